package plan_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image/png"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/plan"
	"github.com/rekeyio/rekey/plan/detect"
	"github.com/rekeyio/rekey/plan/keys"
	"github.com/rekeyio/rekey/plan/rules"
	"github.com/rekeyio/rekey/plan/sim"
	"github.com/rekeyio/rekey/rewrite"
)

// sampled is a sample of n records of a table of sequential INT64 ids
// 1..n created one a second (Created), rewritten by bit reversal, as the
// plan sink writes them: the records dealt in a shuffled order to
// streams workers, each stream's records cut into planned batches of
// batch records sorted by the new key.
func sampled(n, workers, batch int) []keys.Stream {
	r := rng(3)
	order := r.Perm(n)
	streams := make([]keys.Stream, workers)
	for i, id := range order {
		k := spanner{rewrite.Int64(int64(id + 1))}.old()
		nk := spanner{rewrite.Int64(int64(bits.Reverse64(uint64(id+1)) >> 1))}.new()
		k.New, k.NewText, k.NewParts = nk.New, nk.NewText, nk.NewParts
		t := epoch.Add(time.Duration(id) * time.Second)
		k.Time, k.TimeField, k.Bytes = &t, "Created", 200
		w := i % workers
		k.Batch = len(streams[w]) / batch
		streams[w] = append(streams[w], k)
	}
	for _, s := range streams {
		for start := 0; start < len(s); start += batch {
			b := s[start:min(start+batch, len(s))]
			slices.SortFunc(b, func(x, y keys.Key) int { return bytes.Compare(x.New, y.New) })
		}
	}
	return streams
}

// buildSampled plans 3,000 sampled records standing for 3 million on 3
// Spanner nodes, the new keys pre-split 10 times a node.
func buildSampled(t *testing.T) *plan.Plan {
	t.Helper()
	p, err := plan.Build(plan.Input{
		Streams: sampled(3000, 4, 25), Source: "Spanner db/old table Events", Target: "Spanner db/new table EventsV2",
		Table: "EventsV2", SourceTable: "Events", SourceColumn: "Id", TargetColumn: "Id",
		SourceKey: "Id INT64", TargetKey: "Id INT64", Strategy: "bitreverse", Method: "a test sample",
		Rows: 3_000_000, Sim: sim.SpannerDefaults(3), PreSplitPerNode: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The old keys in creation order pin the load to the last split, one
// node; the new keys in planned order spread it over the three, and the
// load is faster.
func TestBuild(t *testing.T) {
	p := buildSampled(t)
	if p.Sampled != 3000 || p.Rows != 3_000_000 || p.Scale != 1000 {
		t.Errorf("sampled %d standing for %d (scale %g), want 3,000 for 3,000,000 (1,000)", p.Sampled, p.Rows, p.Scale)
	}
	b, a := p.Before, p.After
	if b.HotspotScore < 2.5 || a.HotspotScore >= b.HotspotScore || a.HotspotScore > 1.5 || a.Duration >= b.Duration {
		t.Errorf("before: score %.2f in %s; after: score %.2f in %s; want before ≥ 2.5 (3 nodes), after near 1 and faster",
			b.HotspotScore, b.Duration, a.HotspotScore, a.Duration)
	}
	// The busiest node's share is per moment: it falls with the score
	// (over the whole run, a hotspot moving from node to node shares the
	// writes about evenly, and that share rose after the rewrite).
	if b.BusiestNodeShare < 0.8 || a.BusiestNodeShare >= b.BusiestNodeShare || a.BusiestNodeShare > 0.5 {
		t.Errorf("busiest node's share before %.2f, after %.2f (of the run: %.2f, %.2f); want ≈ 1 before, near 1/3 after",
			b.BusiestNodeShare, a.BusiestNodeShare, b.BusiestNodeOfRun, a.BusiestNodeOfRun)
	}
	if !strings.Contains(b.Order, "Created") || !strings.Contains(a.Order, "planned write order") {
		t.Errorf("orders %q and %q: want the creation order before, the planned order after", b.Order, a.Order)
	}
	if a.PreSplits != 29 || b.PreSplits != 0 {
		t.Errorf("pre-splits before %d, after %d; want 0 and 29 (10 a node on 3 nodes)", b.PreSplits, a.PreSplits)
	}
	if !hasFinding(p.Findings, rules.MonotonicKey) || hasFinding(p.Remaining, rules.MonotonicKey) {
		t.Errorf("findings %v, remaining %v: want %s in the old keys only", p.Findings, p.Remaining, rules.MonotonicKey)
	}
	if len(p.Samples) != plan.SampleRows || p.Samples[0].Old == "" || p.Samples[0].New == "" || p.Samples[0].Old == p.Samples[0].New {
		t.Errorf("samples %+v: want %d old → new pairs", p.Samples, plan.SampleRows)
	}
}

// Without timestamps the old keys are loaded in key order; with no
// records there is nothing to plan.
func TestBuildOrders(t *testing.T) {
	streams := sampled(200, 2, 10)
	for _, s := range streams {
		for i := range s {
			s[i].Time = nil
		}
	}
	p, err := plan.Build(plan.Input{Streams: streams, Sim: sim.SpannerDefaults(3)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Before.Order, "key order") || p.Rows != 200 || p.Scale != 1 {
		t.Errorf("before order %q, rows %d, scale %g; want key order, 200 and 1", p.Before.Order, p.Rows, p.Scale)
	}
	if _, err := plan.Build(plan.Input{DeadLettered: 7}); err == nil || !strings.Contains(err.Error(), "7 dead-lettered") {
		t.Errorf("no records: error %v, want one saying nothing was sampled and 7 were dead-lettered", err)
	}
}

func hasFinding(fs []rules.Finding, id string) bool {
	return slices.ContainsFunc(fs, func(f rules.Finding) bool { return f.Rule == id })
}

// writesOf are writes of the keys big-endian uint64s of vals.
func writesOf(vals []uint64) ([]sim.Write, []string) {
	ws := make([]sim.Write, len(vals))
	texts := make([]string, len(vals))
	for i, v := range vals {
		ws[i] = sim.Write{Key: binary.BigEndian.AppendUint64([]byte("T/"), v)}
		texts[i] = fmt.Sprint(v)
	}
	return ws, texts
}

func TestQuantiles(t *testing.T) {
	r := rng(4)
	vals := make([]uint64, 1000)
	for i := range vals {
		vals[i] = r.Uint64()
	}
	ws, _ := writesOf(vals)
	q := plan.Quantiles(ws, 10)
	if len(q) != 9 {
		t.Fatalf("%d quantiles of 10 ranges, want 9", len(q))
	}
	for i := 1; i < len(q); i++ {
		if bytes.Compare(q[i-1], q[i]) >= 0 {
			t.Errorf("quantile %d is not above quantile %d", i, i-1)
		}
	}
	// Each range (the first from the lowest key, each from one point up
	// to the next) holds a tenth of the keys.
	counts := make([]int, 10)
	for _, w := range ws {
		i, _ := slices.BinarySearchFunc(q, w.Key, bytes.Compare)
		if i < len(q) && bytes.Equal(q[i], w.Key) {
			i++ // a point starts its range
		}
		counts[i]++
	}
	for i, c := range counts {
		if c != 100 {
			t.Errorf("range %d holds %d keys, want 100 (all: %v)", i, c, counts)
		}
	}

	same, _ := writesOf([]uint64{5, 5, 5, 5})
	if q := plan.Quantiles(same, 4); len(q) != 1 {
		t.Errorf("quantiles of one key repeated: %d points, want 1 (distinct points only)", len(q))
	}
	if q := plan.Quantiles(ws, 1); q != nil {
		t.Errorf("1 range: %d points, want none", len(q))
	}
}

func TestSpread(t *testing.T) {
	const n, bins = 3200, 32
	r := rng(5)
	uniform := make([]uint64, n)
	clustered := make([]uint64, n)
	for i := range uniform {
		uniform[i] = r.Uint64()
		clustered[i] = 1<<40 + r.Uint64N(1<<20) // one narrow range …
	}
	clustered[0], clustered[1] = 0, 1<<63 // … and the two ends of a wide one

	ws, texts := writesOf(uniform)
	counts, labels := plan.Spread(ws, texts, bins)
	if sum(counts) != n {
		t.Errorf("uniform keys: counts sum to %g, want %d", sum(counts), n)
	}
	for i, c := range counts {
		if c < n/bins/2 || c > 2*n/bins {
			t.Errorf("uniform keys: bin %d holds %g, want about %d (all: %v)", i, c, n/bins, counts)
		}
		if labels[i] == "" {
			t.Errorf("uniform keys: bin %d has no label", i)
		}
	}
	lowest := slices.Min(uniform)
	if labels[0] != fmt.Sprint(lowest) {
		t.Errorf("bin 0's label %q, want the lowest key %d", labels[0], lowest)
	}

	ws, texts = writesOf(clustered)
	counts, labels = plan.Spread(ws, texts, bins)
	if sum(counts) != n || counts[0] < n-2 || counts[bins-1] != 1 {
		t.Errorf("clustered keys: %v; want %d in the first bin, the top key in the last", counts, n-1)
	}
	if labels[1] != "" {
		t.Errorf("an empty bin's label %q, want none", labels[1])
	}

	one, text := writesOf([]uint64{7, 7})
	if counts, _ := plan.Spread(one, text, bins); counts[0] != 2 {
		t.Errorf("one key twice: %v, want both in the first bin", counts)
	}
}

func sum(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s
}

// Write makes a self-contained report: three inline PNGs, no network
// links, the PNGs as files and plan.json with both runs and the findings;
// Summary names both runs and the report.
func TestWrite(t *testing.T) {
	p := buildSampled(t)
	dir := filepath.Join(t.TempDir(), "report")
	f, err := p.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(f.HTML)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(html), `src="data:image/png;base64,`); n != 3 {
		t.Errorf("report.html holds %d inline PNGs, want 3", n)
	}
	if strings.Contains(string(html), "http://") || strings.Contains(string(html), "https://") {
		t.Error("report.html links to the network; it must open offline")
	}
	for _, want := range []string{"Events", "EventsV2", "bitreverse", rules.MonotonicKey, "Created", "share of the writes at each moment", "Hotspot score: that share over an even one", "To full speed: "} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report.html does not mention %q", want)
		}
	}
	for _, name := range []string{f.Heatmap, f.Spread, f.Rate} {
		if filepath.Dir(name) != dir {
			t.Errorf("%s is not in %s", name, dir)
		}
		checkPNG(t, name)
	}

	var doc struct {
		Before, After map[string]any
		Findings      []struct{ Rule, Severity, Evidence string }
		Sampled       int
	}
	js, err := os.ReadFile(f.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatalf("plan.json: %v", err)
	}
	if doc.Before["name"] != "before" || doc.After["name"] != "after" || doc.Sampled != 3000 ||
		len(doc.Findings) != len(p.Findings) || doc.Findings[0].Rule != rules.MonotonicKey || doc.Findings[0].Severity != "error" {
		t.Errorf("plan.json: before %v, after %v, sampled %d, findings %v", doc.Before["name"], doc.After["name"], doc.Sampled, doc.Findings)
	}
	for _, field := range []string{"hotspot_score", "busiest_node_share", "busiest_node_share_of_run"} {
		if _, ok := doc.Before[field].(float64); !ok {
			t.Errorf("plan.json: before has no %s: %v", field, doc.Before)
		}
	}

	var sum strings.Builder
	p.Summary(&sum, f)
	s := sum.String()
	for _, want := range []string{"report: " + f.HTML, "\n    before ", "\n    after ", "as fast", "source keys: " + detect.Count(int64(len(p.Findings)), "finding"), "rewritten keys: no findings", "3,000 records of 3,000,000",
		"\n      busiest node: the busiest node's share of the writes at each moment, averaged over the load (33% = even over the 3 nodes, 100% = all on one)\n",
		"\n      hotspot score: that share over an even one: 1 = even over the nodes, 3 = all on one\n", "\n      load time: ", "\n      splits: ", "\n      to full speed: "} {
		if !strings.Contains(s, want) {
			t.Errorf("summary does not say %q:\n%s", want, s)
		}
	}
}

func checkPNG(t *testing.T, name string) {
	t.Helper()
	r, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if cfg, err := png.DecodeConfig(r); err != nil || cfg.Width < 100 || cfg.Height < 100 {
		t.Errorf("%s: %+v, %v; want a picture", filepath.Base(name), cfg, err)
	}
}

// A plan whose load is as fast before as after says why, and a Datastore
// target's simulated servers are not called nodes.
func TestSummaryAlike(t *testing.T) {
	run := func(name string, d time.Duration) plan.Run {
		r := plan.Run{Name: name, Duration: d, Finished: true, ReachedFullSpeed: true, HotspotScore: 3}
		r.Result.Params.Nodes = 1
		return r
	}
	for _, c := range []struct {
		name      string
		datastore bool
		rows      int64
		after     time.Duration
		want, not []string
	}{
		{"small datastore sample", true, 0, time.Second, []string{"1 server:", "busiest server", "even over the servers", "50 writes are too few", "pass --rows"}, []string{"node"}},
		{"large, alike", false, 5000000, time.Second, []string{"1 node:", "at 5,000,000 writes the source keys make no hotspot"}, []string{"--rows", "server"}},
		{"faster after", false, 5000000, time.Second / 4, []string{"4.0x as fast"}, []string{"alike"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &plan.Plan{Input: plan.Input{Datastore: c.datastore, Rows: c.rows}, Sampled: 50, Rows: max(c.rows, 50), Before: run("before", time.Second), After: run("after", c.after)}
			var b strings.Builder
			p.Summary(&b, plan.Files{HTML: "r.html"})
			for _, w := range c.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("summary does not say %q:\n%s", w, b.String())
				}
			}
			for _, w := range c.not {
				if strings.Contains(b.String(), w) {
					t.Errorf("summary says %q:\n%s", w, b.String())
				}
			}
		})
	}
}

// A plan of keys loaded from the sink's part files (the texts read back
// from the files) is the plan of the same keys in memory: the same
// report, byte for byte.
func TestBuildFromFiles(t *testing.T) {
	streams := sampled(3000, 4, 25)
	dir := t.TempDir()
	for i, s := range streams {
		w, err := keys.Create(context.Background(), dir, fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		for j := range s {
			if err := w.Write(&s[j]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	set, err := keys.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	in := plan.Input{Source: "Spanner db/old table Events", Table: "EventsV2", SourceTable: "Events", SourceColumn: "Id", TargetColumn: "Id",
		Rows: 3_000_000, Sim: sim.SpannerDefaults(3), PreSplitPerNode: 10}
	report := func(in plan.Input) map[string][]byte {
		p, err := plan.Build(in)
		if err != nil {
			t.Fatal(err)
		}
		p.Created = epoch
		f, err := p.Write(filepath.Join(t.TempDir(), "report"))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]byte{}
		for _, name := range []string{f.HTML, f.JSON, f.Heatmap, f.Spread, f.Rate} {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(name)] = b
		}
		return out
	}
	fromFiles := in
	fromFiles.Keys = set
	inMemory := in
	inMemory.Streams = streams
	got, want := report(fromFiles), report(inMemory)
	for name := range want {
		if !bytes.Equal(got[name], want[name]) {
			t.Errorf("%s of the keys from files differs from that of the keys in memory", name)
		}
	}
}

// buildSharded plans 4,000 records whose new key is (ShardId, Id), the
// shard strategy's n and mode, on 3 nodes.
func buildSharded(t *testing.T, n int64, mode string) *plan.Plan {
	t.Helper()
	sh := &rewrite.Shard{N: n, Mode: mode}
	var stream keys.Stream
	for i := range 4000 {
		k := spanner{rewrite.Int64(int64(i + 1))}.old()
		nk := spanner{rewrite.Int64(sh.Of(fmt.Append(nil, i+1))), rewrite.Int64(int64(i + 1))}.new()
		k.New, k.NewText, k.NewParts = nk.New, nk.NewText, nk.NewParts
		stream = append(stream, k)
	}
	slices.SortFunc(stream, func(x, y keys.Key) int { return bytes.Compare(x.New, y.New) })
	p, err := plan.Build(plan.Input{
		Streams: []keys.Stream{stream}, Table: "EventsV2", SourceTable: "Events", SourceColumn: "Id", TargetColumn: "ShardId",
		ShardColumn: "ShardId", Shards: n, SignedShards: mode == "signed", Sim: sim.SpannerDefaults(3),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The shard column's values are checked against the nodes: 8 shards on
// 3 nodes leave one node 3 of them (it read as a busiest node's share
// higher after the rewrite than before); the signed form's 2n−1 values
// give shard 0 twice the rows of the others (n = 16: 31 values).
func TestShardFindings(t *testing.T) {
	for _, tc := range []struct {
		n     int64
		mode  string
		want  []string
		words []string
	}{
		{8, "abs", []string{rules.ShardsUneven}, []string{"8 values of ShardId over 3 nodes: placed whole, the busiest node holds 3 of them"}},
		{16, "signed", []string{rules.SignedShards}, []string{"n = 16 in mode signed gives 31 values of ShardId (-15..15) in 4,000 sampled keys; 0 holds 6."}},
		{8, "signed", []string{rules.SignedShards, rules.ShardsUneven}, []string{"gives 15 values", "15 values of ShardId over 3 nodes"}},
		{9, "abs", nil, nil},
		{3, "abs", nil, nil},
	} {
		p := buildSharded(t, tc.n, tc.mode)
		var got []string
		text := findingsText(p.Remaining)
		for _, f := range p.Remaining {
			got = append(got, f.Rule)
		}
		slices.Sort(got)
		want := slices.Clone(tc.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("n = %d %s: findings\n%s want %v", tc.n, tc.mode, text, tc.want)
		}
		for _, w := range tc.words {
			if !strings.Contains(text, w) {
				t.Errorf("n = %d %s: findings\n%s do not say %q", tc.n, tc.mode, text, w)
			}
		}
		if f := findingOf(p.Remaining, rules.SignedShards); f != nil {
			var zero, other float64
			if _, err := fmt.Sscanf(f.Evidence[strings.Index(f.Evidence, "; 0 holds"):], "; 0 holds %f%% of them, each other value %f%%", &zero, &other); err != nil || zero < 1.7*other || zero > 2.3*other {
				t.Errorf("n = %d %s: %q: want shard 0 about twice the others (%v)", tc.n, tc.mode, f.Evidence, err)
			}
		}
	}
}

func findingOf(fs []rules.Finding, rule string) *rules.Finding {
	for i := range fs {
		if fs[i].Rule == rule {
			return &fs[i]
		}
	}
	return nil
}
