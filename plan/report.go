package plan

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/rekeyio/rekey/plan/chart"
	"github.com/rekeyio/rekey/plan/detect"
	"github.com/rekeyio/rekey/plan/rules"
	"github.com/rekeyio/rekey/plan/sim"
)

// Picture sizes of the report.
const (
	HeatRows = 32 // key ranges of a heatmap
	HeatCols = 60 // time buckets of a heatmap
	Bins     = 32 // ranges of the key-spread histograms
)

// Files are what Write wrote.
type Files struct {
	Dir, HTML, JSON, Heatmap, Spread, Rate string
}

// Write writes the report into dir: report.html (self-contained: the
// pictures are inline PNGs), the pictures as PNG files, and plan.json.
func (p *Plan) Write(dir string) (Files, error) {
	f := Files{Dir: dir, HTML: filepath.Join(dir, "report.html"), JSON: filepath.Join(dir, "plan.json"),
		Heatmap: filepath.Join(dir, "heatmap.png"), Spread: filepath.Join(dir, "spread.png"), Rate: filepath.Join(dir, "rate.png")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return f, err
	}
	pics := map[string]func(io.Writer) error{f.Heatmap: p.heatmapPNG, f.Spread: p.spreadPNG, f.Rate: p.ratePNG}
	inline := map[string]template.URL{}
	for path, draw := range pics {
		var b bytes.Buffer
		if err := draw(&b); err != nil {
			return f, fmt.Errorf("plan report: %s: %w", filepath.Base(path), err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			return f, err
		}
		inline[filepath.Base(path)] = template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes()))
	}
	js, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return f, err
	}
	if err := os.WriteFile(f.JSON, append(js, '\n'), 0o644); err != nil {
		return f, err
	}
	var html bytes.Buffer
	if err := reportTemplate.Execute(&html, reportData{Plan: p, Pics: inline, Params: p.params(), LoadColumns: p.loadColumns()}); err != nil {
		return f, fmt.Errorf("plan report: %w", err)
	}
	return f, os.WriteFile(f.HTML, html.Bytes(), 0o644)
}

// heat is a run's heatmap in writes/s per key range and time bucket,
// its rows labelled rows.
func heat(r Run, rows []string, title string) chart.Heatmap {
	g := r.Result.Heat(HeatRows, HeatCols)
	h := chart.Heatmap{Title: title, Cells: g.PerSecond(), Unit: "writes/s", RowLabels: rows}
	for c := range g.ColEnd {
		label := ""
		if c%10 == 0 {
			start := time.Duration(0)
			if c > 0 {
				start = g.ColEnd[c-1]
			}
			label = chart.Seconds(start.Seconds())
		}
		h.ColLabels = append(h.ColLabels, label)
	}
	return h
}

func (p *Plan) heatmapPNG(w io.Writer) error {
	return chart.SideBySide(w, "Simulated writes by key range over time (same colour scale)",
		heat(p.Before, p.beforeRows, "before: "+shortDuration(p.Before.Duration)),
		heat(p.After, p.afterRows, "after: "+shortDuration(p.After.Duration)))
}

// dsScope matches a Datastore key text's database and namespace
// (rewrite.DatastoreKey.String): `db="…",ns="…",`.
var dsScope = regexp.MustCompile(`^(db="(?:[^"\\]|\\.)*",)?(ns="(?:[^"\\]|\\.)*",)?`)

// labelTexts are texts as a picture labels key ranges: a database and
// namespace every text shares are left out (a cut label of a Datastore
// key would show only them), and said in none.
func labelTexts(texts []string) []string {
	if len(texts) == 0 {
		return texts
	}
	scope := dsScope.FindString(texts[0])
	if scope == "" {
		return texts
	}
	for _, t := range texts {
		if !strings.HasPrefix(t, scope) {
			return texts
		}
	}
	out := make([]string, len(texts))
	for i, t := range texts {
		out[i] = t[len(scope):]
	}
	return out
}

// labelScope is the database and namespace labelTexts leaves out of
// texts whose first is first and which all share the prefix shared
// (their longest common prefix): "" if they do not all have first's.
func labelScope(first, shared string) string {
	if scope := dsScope.FindString(first); scope != "" && strings.HasPrefix(shared, scope) {
		return scope
	}
	return ""
}

func (p *Plan) spreadPNG(w io.Writer) error {
	title, xlabel := "Rewritten keys across "+fmt.Sprint(Bins)+" equal ranges of the new key space", "key range (its lowest key)"
	if p.discrete {
		title, xlabel = "Rewritten keys by "+p.Input.TargetColumn, p.Input.TargetColumn
	}
	labels := p.spreadLabels
	counts := make([]float64, len(p.spread))
	for i, c := range p.spread {
		counts[i] = c * p.Scale
	}
	return chart.BarChart{Title: title, XLabel: xlabel, YLabel: "records", Labels: labels, Values: counts}.PNG(w)
}

func (p *Plan) ratePNG(w io.Writer) error {
	lc := chart.LineChart{Title: "Write rate over time", XLabel: "time since the first write", YLabel: "writes/s", XFormat: chart.Seconds}
	add := func(name string, r Run, y func(sim.Tick) float64, dashed bool) {
		s := chart.Series{Name: name, Dashed: dashed}
		for _, t := range r.Result.Series {
			s.X = append(s.X, (t.At + t.Width/2).Seconds())
			s.Y = append(s.Y, y(t))
		}
		lc.Series = append(lc.Series, s)
	}
	add("after: achieved", p.After, func(t sim.Tick) float64 { return t.Done }, false)
	add("before: achieved", p.Before, func(t sim.Tick) float64 { return t.Done }, false)
	add(p.rampName(), p.After, func(t sim.Tick) float64 { return t.Offered }, true)
	return lc.PNG(w)
}

func (p *Plan) rampName() string {
	if p.Input.Sim.Ramp == nil {
		return "offered (no ramp-up: as fast as the store takes)"
	}
	return "offered: the ramp-up schedule"
}

// Param is one simulation parameter as the report shows it.
type Param struct{ Name, Value, Basis string }

func (p *Plan) params() []Param {
	sp := p.After.Result.Params
	basis := func(published bool, src string) string {
		if published {
			return "published: " + src
		}
		return "assumption: " + src
	}
	spanner := !p.Input.Datastore
	ps := []Param{
		{p.NodeNoun() + "s", fmt.Sprint(sp.Nodes), "--nodes"},
		{"writes/s per " + p.NodeNoun(), chart.Number(sp.NodeWrites), basis(spanner && (sp.NodeWrites == sim.SpannerRegionalNodeWrites || sp.NodeWrites == sim.SpannerMultiRegionNodeWrites), "cloud.google.com/spanner/docs/performance (3,500 regional, 2,700 multi-region)")},
		{"writes/s per split", chart.Number(sp.SplitWrites), basis(!spanner && sp.SplitWrites == sim.FirestoreStartRate, "a new key range starts at 500 ops/s (Firestore 500/50/5); Spanner publishes no per-split figure")},
		{"load split: threshold", chart.Number(sp.LoadThreshold) + " writes/s", basis(false, "half a split's capacity")},
		{"load split: delay", sp.LoadSplitDelay.String(), basis(false, "Spanner: load splitting acts \"every few minutes\"")},
		{"size split", fmt.Sprintf("%d GiB", sp.SplitBytes>>30), basis(false, "the sources say about 8 GB")},
		{"pre-split points", fmt.Sprint(p.After.PreSplits), "--presplit (per node, at quantiles of the new keys; after only)"},
		{"ramp-up", p.rampName(), "the config's ramp"},
		{"row size", fmt.Sprintf("%d bytes", sp.RowBytes), "measured per sampled record where known"},
		{"records per sampled record", fmt.Sprintf("%.4g", sp.Scale), "rows / sample"},
		{"loader look-ahead", fmt.Sprint(sp.Concurrency), "writes in flight past a blocked one"},
		{"step", sp.Step.String(), "simulation tick"},
	}
	return ps
}

type reportData struct {
	*Plan
	Pics        map[string]template.URL
	Params      []Param
	LoadColumns []column
}

func shortDuration(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%.1f days", d.Hours()/24)
	case d >= time.Hour:
		return fmt.Sprintf("%.1f h", d.Hours())
	case d >= time.Minute:
		return fmt.Sprintf("%.1f min", d.Minutes())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// NodeNoun is what the simulation's servers are called: Spanner's nodes;
// Datastore has no nodes to choose, its servers are simulated alike.
func (p *Plan) NodeNoun() string {
	if p.Input.Datastore {
		return "server"
	}
	return "node"
}

// column is a column of the simulated load's table and what it means.
type column struct{ Name, Means string }

// loadColumns are the columns of the simulated load's table (the
// terminal's names; the report's are longer) with what each means, as
// both say under the table.
func (p *Plan) loadColumns() []column {
	nodes, noun := p.After.Result.Params.Nodes, p.NodeNoun()
	return []column{
		{"load time", "until the last write is done (> T: not done when the simulation stopped at T)"},
		{"busiest " + noun, fmt.Sprintf("the busiest %s's share of the writes at each moment, averaged over the load (%.0f%% = even over the %s, 100%% = all on one)",
			noun, 100/float64(max(nodes, 1)), detect.Count(int64(nodes), noun))},
		{"hotspot score", fmt.Sprintf("that share over an even one: 1 = even over the %ss, %d = all on one", noun, nodes)},
		{"splits", "key ranges of the table at the end of the load"},
		{"to full speed", fmt.Sprintf("until the writes first reach 90%% of what the %ss can take (or the ramp-up offers)", noun)},
	}
}

// alikeHint explains a load as fast before as after (ratio within 5%):
// a sample too small to load any server hard, unless --rows scaled it,
// or keys that make no hotspot at this size.
func (p *Plan) alikeHint(ratio float64) string {
	if ratio < 0.95 || ratio > 1.05 {
		return ""
	}
	if p.Input.Rows <= int64(p.Sampled) {
		return fmt.Sprintf("before and after are alike: %s are too few to load any %s hard; pass --rows with the table's real size to simulate the load at scale",
			detect.Count(p.Rows, "write"), p.NodeNoun())
	}
	return fmt.Sprintf("before and after are alike: at %s the source keys make no hotspot the rewrite would remove", detect.Count(p.Rows, "write"))
}

// Summary writes the plan for a terminal.
func (p *Plan) Summary(w io.Writer, f Files) {
	in := p.Input
	fmt.Fprintf(w, "rekey plan: %s → %s (%s)\n", in.Source, in.Target, in.Strategy)
	fmt.Fprintf(w, "  sample: %s records of %s (%s)", detect.Thousands(int64(p.Sampled)), detect.Thousands(p.Rows), in.Method)
	if in.DeadLettered > 0 {
		fmt.Fprintf(w, "; %d dead-lettered", in.DeadLettered)
	}
	fmt.Fprintln(w)
	printFindings(w, "source keys", p.Findings)
	printFindings(w, "rewritten keys", p.Remaining)
	nodes := p.After.Result.Params.Nodes
	fmt.Fprintf(w, "  simulated load of %s, %s:\n", detect.Count(p.Rows, "write"), detect.Count(int64(nodes), p.NodeNoun()))
	cols := p.loadColumns()
	fmt.Fprintf(w, "    %-7s %12s %14s %14s %8s %16s\n", "", cols[0].Name, cols[1].Name, cols[2].Name, cols[3].Name, cols[4].Name)
	for _, r := range []Run{p.Before, p.After} {
		fs := shortDuration(r.TimeToFullSpeed)
		if !r.ReachedFullSpeed {
			fs = "never"
		}
		d := shortDuration(r.Duration)
		if !r.Finished {
			d = "> " + d
		}
		fmt.Fprintf(w, "    %-7s %12s %13.0f%% %14.2f %8d %16s\n", r.Name, d, 100*r.BusiestNodeShare, r.HotspotScore, r.Splits, fs)
	}
	for _, c := range cols {
		fmt.Fprintf(w, "      %s: %s\n", c.Name, c.Means)
	}
	if p.After.Duration > 0 {
		ratio := p.Before.Duration.Seconds() / p.After.Duration.Seconds()
		fmt.Fprintf(w, "    the rewritten load is %.1fx as fast\n", ratio)
		if hint := p.alikeHint(ratio); hint != "" {
			fmt.Fprintf(w, "    %s\n", hint)
		}
	}
	fmt.Fprintf(w, "  report: %s\n", f.HTML)
}

func printFindings(w io.Writer, what string, fs []rules.Finding) {
	if len(fs) == 0 {
		fmt.Fprintf(w, "  %s: no findings\n", what)
		return
	}
	fmt.Fprintf(w, "  %s: %s\n", what, detect.Count(int64(len(fs)), "finding"))
	for _, f := range fs {
		fmt.Fprintf(w, "    %-7s %s [%s]: %s\n", f.Severity, f.Subject, f.Rule, f.Evidence)
		fmt.Fprintf(w, "            fix: %s\n", f.Fix)
	}
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"dur":   shortDuration,
	"pct":   func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) },
	"f2":    func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"n":     func(v int64) string { return detect.Thousands(v) },
	"join":  strings.Join,
	"fast":  func(a, b time.Duration) string { return fmt.Sprintf("%.1f", a.Seconds()/max(b.Seconds(), 1e-9)) },
	"stamp": func(t time.Time) string { return t.Format(time.RFC3339) },
	"list":  func(rs ...Run) []Run { return rs },
	"int64": func(n int) int64 { return int64(n) },
	"cap":   func(s string) string { return strings.ToUpper(s[:1]) + s[1:] },
}).Parse(reportHTML))

const reportHTML = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>rekey plan: {{.Input.Target}}</title>
<style>
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1700px;padding:0 1rem;color:#1d2330}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ccd}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ccd;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f2f4f8}code{font-size:.9em}.error{color:#a01010;font-weight:600}.warning{color:#a05a00;font-weight:600}.info{color:#335}
img{max-width:100%;border:1px solid #ccd}.muted{color:#667}
</style></head><body>
<h1>rekey plan: {{.Input.Source}} → {{.Input.Target}}</h1>
<p>Rewrite: <code>{{.Input.Strategy}}</code>. Key before: <code>{{.Input.SourceKey}}</code>; after: <code>{{.Input.TargetKey}}</code>.</p>
<p>Sample: {{n (int64 .Sampled)}} records standing for {{n .Rows}} ({{.Input.Method}}).{{if .Input.DeadLettered}} {{.Input.DeadLettered}} records were refused (dead letters).{{end}} Written {{stamp .Created}}; nothing was written to the target.</p>

<h2>Simulated load</h2>
<table><tr><th></th><th>write order</th>{{range .LoadColumns}}<th title="{{.Means}}">{{.Name}}</th>{{end}}</tr>
{{range $r := (list .Before .After)}}<tr><td>{{$r.Name}}</td><td>{{$r.Order}}</td><td>{{if not $r.Finished}}&gt; {{end}}{{dur $r.Duration}}</td><td>{{pct $r.BusiestNodeShare}}</td><td>{{f2 $r.HotspotScore}}</td><td>{{$r.Splits}}</td><td>{{if $r.ReachedFullSpeed}}{{dur $r.TimeToFullSpeed}}{{else}}never{{end}}</td></tr>
{{end}}</table>
<p class="muted">Write order: the order the simulated loader writes the keys in.{{range .LoadColumns}} {{cap .Name}}: {{.Means}}.{{end}}</p>
<p>The rewritten load is {{fast .Before.Duration .After.Duration}}× as fast.</p>
<img alt="heatmaps before and after" src="{{index .Pics "heatmap.png"}}">
<p class="muted">Key Visualizer style: time on x, key ranges on y in key order (each labelled with its first key), colour from dark (cold) to white (hottest), one scale for both; bars along the bottom and right edges are totals per time bucket and per range.</p>
<img alt="write rate over time" src="{{index .Pics "rate.png"}}">

<h2>Findings in the source keys</h2>
{{template "findings" .Findings}}
<h2>Findings in the rewritten keys</h2>
{{template "findings" .Remaining}}

<h2>Rewritten keys across the key space</h2>
<img alt="histogram of rewritten keys" src="{{index .Pics "spread.png"}}">

<h2>Split points</h2>
{{if .Input.Datastore}}<p>Datastore and Firestore take no split points: a new kind or key range starts on one server. Ramp the load up instead — 500 writes/s, then 50% more every 5 minutes (<code>ramp: {profile: datastore}</code>) — over keys spread across the range.</p>
{{else}}<p>{{if .After.PreSplits}}The "after" run started on {{.After.PreSplits}} split points (<code>--presplit</code>), at quantiles of the new keys.{{else}}The "after" run relied on load splits alone; <code>--presplit 10</code> shows the same load on pre-split ranges.{{end}}
<code>rekey splits -c FILE --nodes N</code> computes about 10 points a node for the target table in the format of <code>gcloud spanner databases splits add --splits-file</code> (or adds them with <code>--apply</code>).
Create them between 7 days and 12 hours before the load; they expire after 10 days unless told otherwise (at most 30); expire them before dropping the table or an index; backups do not keep them; small instances need none.</p>
{{end}}
<h2>Sample keys</h2>
<table><tr><th>old key</th><th>new key</th></tr>
{{range .Samples}}<tr><td><code>{{.Old}}</code></td><td><code>{{.New}}</code></td></tr>
{{end}}</table>

<h2>Model and parameters</h2>
<p>A range-partitioned store: the table starts as one split (or at the pre-split points); a split is cut at its median key when it outgrows the size threshold or after its load has stayed above the threshold for the delay; new splits go to the least loaded node. The loader writes in the order given, up to the ramp-up's rate, and waits on a split or node that is at capacity. See <code>plan/sim</code> for the whole model.</p>
<table><tr><th>parameter</th><th>value</th><th>basis</th></tr>
{{range .Params}}<tr><td>{{.Name}}</td><td>{{.Value}}</td><td>{{.Basis}}</td></tr>
{{end}}</table>
</body></html>
{{define "findings"}}{{if not .}}<p>None.</p>{{else}}<table><tr><th>severity</th><th>subject</th><th>rule</th><th>evidence</th><th>fix</th><th>source</th></tr>
{{range .}}<tr><td class="{{.Severity}}">{{.Severity}}</td><td>{{.Subject}}</td><td><code>{{.Rule}}</code><br>{{.Text}}</td><td>{{.Evidence}}</td><td>{{.Fix}}{{if .Strategies}}<br>strategies: {{join .Strategies ", "}}{{end}}</td><td>{{.Source}}</td></tr>
{{end}}</table>{{end}}{{end}}`
