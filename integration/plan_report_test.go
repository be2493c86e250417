package integration

import (
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb/spannerdbtest"
	"github.com/rekeyio/rekey/internal/testkit/beamtest"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/plan"
	"github.com/rekeyio/rekey/plan/detect"
	"github.com/rekeyio/rekey/plan/rules"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// runPlan makes `rekey plan`'s report for cfg on runner into a fresh
// directory.
func runPlan(t *testing.T, cfg, runner string, req pipeline.PlanRequest) (*plan.Plan, plan.Files) {
	t.Helper()
	req.Out = filepath.Join(t.TempDir(), "plan")
	p, files, err := pipeline.Plan(context.Background(), loadYAML(t, cfg), req, pipeline.Runner{Runner: runner})
	if err != nil {
		t.Fatalf("plan on %s: %v", runner, err)
	}
	return p, files
}

// hasRule reports whether fs has a finding of rule id.
func hasRule(fs []rules.Finding, id string) bool {
	for _, f := range fs {
		if f.Rule == id {
			return true
		}
	}
	return false
}

// checkReport checks the report's files: the HTML holds its pictures
// inline, and the heatmap is the side-by-side picture.
func checkReport(t *testing.T, f plan.Files) {
	t.Helper()
	html, err := os.ReadFile(f.HTML)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(html), "data:image/png;base64,"); n != 3 {
		t.Errorf("report.html holds %d inline PNGs, want 3", n)
	}
	if strings.Contains(string(html), "http://") || strings.Contains(string(html), "https://") {
		t.Errorf("report.html links to the network; it must open offline")
	}
	r, err := os.Open(f.Heatmap)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cfg, err := png.DecodeConfig(r)
	if err != nil || cfg.Width < 1000 {
		t.Errorf("heatmap.png: %+v, %v; want a side-by-side PNG", cfg, err)
	}
	if _, err := os.Stat(f.JSON); err != nil {
		t.Error(err)
	}
}

// TestPlanSpanner plans a Spanner → Spanner migration of a table with a
// sequential INT64 key and a creation time that grows with it, rewritten
// with bitreverse, every call through a commit tap: the source is
// sampled in its query (a pushed-down FARM_FINGERPRINT filter), exactly
// the sample size is kept, the analysis names the sequence (and the
// correlation with the creation time) in the old keys and not in the new
// ones, the simulated load of the old keys is a hotspot and of the new
// ones (pre-split, 10 points per node) is not, and not one commit or DDL statement reaches the emulator:
// the target database stays empty.
func TestPlanSpanner(t *testing.T) {
	// The table stands for one of 3 million rows (--rows): a load of
	// 6,000 would take seconds either way.
	const rows, sample, simulated = 6000, 3000, 3_000_000
	ctx := context.Background()
	for _, runner := range runners {
		t.Run(runner, func(t *testing.T) {
			srcID, src := newSpannerTarget(t, "plan-src", `CREATE TABLE Events (Id INT64 NOT NULL, Created TIMESTAMP, Page STRING(MAX)) PRIMARY KEY (Id)`)
			dstID, dst := newSpannerTarget(t, "plan-dst")
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var recs []record.Record
			for i := range rows {
				recs = append(recs, record.Record{Table: "Events", Fields: []record.Field{
					{Name: "Id", Value: record.Int(int64(i + 1))},
					{Name: "Created", Value: record.Time(start.Add(time.Duration(i) * time.Second))},
					{Name: "Page", Value: record.String(fmt.Sprintf("/p/%d", i%7))}}})
			}
			if err := spannerdbtest.Write(ctx, src, readTable(t, src, "Events"), recs); err != nil {
				t.Fatal(err)
			}
			tap := startTap(t, emulator.EnvSpannerHost)
			p, files := runPlan(t, fmt.Sprintf(`
source: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: Events}
target: {type: spanner, project: %[1]s, instance: %[2]s, database: %[4]s, table: EventsV2}
rewrite: {strategy: bitreverse}
`, emulator.SpannerProject(), emulator.SpannerInstance(), srcID, dstID), runner, pipeline.PlanRequest{Sample: sample, Rows: simulated, PreSplitPerNode: 10})

			if p.Sampled != sample || p.Rows != simulated {
				t.Errorf("sampled %d standing for %d, want %d for %d", p.Sampled, p.Rows, sample, simulated)
			}
			if !strings.Contains(p.Input.Method, "FARM_FINGERPRINT") || !strings.Contains(p.Input.Method, detect.Thousands(int64(sample))+" of "+detect.Thousands(int64(rows))+" rows") {
				t.Errorf("method %q: want the sample taken in the query", p.Input.Method)
			}
			if !hasRule(p.Findings, rules.MonotonicKey) || hasRule(p.Remaining, rules.MonotonicKey) {
				t.Errorf("findings %+v / remaining %+v: want %s in the old keys only", p.Findings, p.Remaining, rules.MonotonicKey)
			}
			if p.Before.HotspotScore < 2.5 || p.After.HotspotScore > 1.5 || p.After.Duration >= p.Before.Duration {
				t.Errorf("before: score %.2f in %s, after: score %.2f in %s; want the old keys' load pinned to one node (score near 3) and the new keys' spread (near 1) and faster",
					p.Before.HotspotScore, p.Before.Duration, p.After.HotspotScore, p.After.Duration)
			}
			checkReport(t, files)
			noCommits(t, tap)
			var tables int64
			err := dst.Single().Query(ctx, spanner.Statement{SQL: "SELECT COUNT(*) FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = ''"}).
				Do(func(r *spanner.Row) error { return r.Columns(&tables) })
			if err != nil || tables != 0 {
				t.Errorf("the target database has %d tables (%v), want none", tables, err)
			}
		})
	}
}

// TestPlanDatastore plans a Datastore → Datastore migration of a kind
// named Customer1, Customer2, ... with hashprefix, reading all of it and
// a sample by key: the names are found sequential in the old keys and not
// in the new, and the target namespace holds no entity afterwards (the
// tap saw no commit).
func TestPlanDatastore(t *testing.T) {
	const n = 600
	ctx := context.Background()
	c := emulator.TestDatastore(t)
	ns := emulator.UniqueNamespace("plan-src")
	var recs []record.Record
	for i := range n {
		recs = append(recs, record.Record{Table: "Customer",
			Key:    &rewrite.DatastoreKey{Namespace: ns, Path: []rewrite.PathElement{{Kind: "Customer", Name: fmt.Sprintf("Customer%d", i+1)}}},
			Fields: []record.Field{{Name: "Name", Value: record.String(fmt.Sprint("n", i))}}})
	}
	putEntities(t, c, recs)
	dstNS := emulator.UniqueNamespace("plan-dst")
	tap := startTap(t, emulator.EnvDatastoreHost)
	cfg := fmt.Sprintf(`
source: {type: datastore, project: %[1]s, namespace: %[2]s, kind: Customer}
target: {type: datastore, project: %[1]s, namespace: %[3]s, kind: Customer}
rewrite: {strategy: hashprefix}
`, emulator.DatastoreProject(), ns, dstNS)
	for _, tc := range []struct {
		name   string
		sample int
		want   int
		method string
	}{
		// --all reads the kind; a sample reads only the sampled keys'
		// entities (the emulator has no __scatter__ values: the keys come
		// from a reservoir over a keys-only scan).
		{"all", 0, n, "all records read"},
		{"sample", 200, 200, "keys-only scan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, files := runPlan(t, cfg, "prism", pipeline.PlanRequest{Sample: tc.sample})
			if p.Sampled != tc.want || p.Rows != n || !strings.Contains(p.Input.Method, tc.method) {
				t.Errorf("sampled %d of %d (%s), want %d of %d (%s)", p.Sampled, p.Rows, p.Input.Method, tc.want, n, tc.method)
			}
			if !hasRule(p.Findings, rules.SequentialNames) || hasRule(p.Remaining, rules.SequentialNames) {
				t.Errorf("findings %+v / remaining %+v: want %s in the old keys only", p.Findings, p.Remaining, rules.SequentialNames)
			}
			checkReport(t, files)
		})
	}
	noCommits(t, tap)
	if got, err := c.Count(ctx, datastore.NewQuery("Customer").Namespace(dstNS).KeysOnly()); err != nil || got != 0 {
		t.Errorf("the target namespace holds %d entities (%v), want none", got, err)
	}
}

// TestPlanOnJobServer plans a JSON Lines → Spanner migration of
// sequential ids with --runner universal on the Beam job server (prism,
// standalone), the SDK worker in this process: a sample of 500 of the
// 2,000 lines is kept, the ids are found to be a counter in the old keys
// and not in the bit-reversed new ones.
func TestPlanOnJobServer(t *testing.T) {
	beamtest.UseJobServer(t)
	emulator.RequireSpanner(t)
	var lines []string
	for i := range 2000 {
		lines = append(lines, fmt.Sprintf(`{"Id": %d, "Page": "/p/%d"}`, i+1, i%13))
	}
	in := writeLines(t, "events.jsonl", lines)
	p, files := runPlan(t, fmt.Sprintf(`
source: {type: jsonl, path: %q, key: "Id INT64"}
target: {type: spanner, project: %s, instance: %s, database: %s, table: Events}
rewrite: {strategy: bitreverse}
`, in, emulator.SpannerProject(), emulator.SpannerInstance(), emulator.UniqueDatabaseID("plan-js")), "universal",
		pipeline.PlanRequest{Sample: 500, Rows: 2_000_000, PreSplitPerNode: 10, KeepKeys: true})
	if p.Sampled != 500 || p.Rows != 2_000_000 || !strings.Contains(p.Input.Method, "uniform random sample of 500") {
		t.Errorf("sampled %d standing for %d (%s), want a uniform sample of 500 standing for 2,000,000", p.Sampled, p.Rows, p.Input.Method)
	}
	// The sample's workers spilled the records beside the keys; the run
	// removed those files and their folder, and left the keys.
	runs := filepath.Join(filepath.Dir(files.JSON), "keys-*", "run-*")
	if parts, _ := filepath.Glob(filepath.Join(runs, "part-*")); len(parts) == 0 {
		t.Errorf("no key files in %s", runs)
	}
	if left, _ := filepath.Glob(filepath.Join(runs, "sample*")); len(left) != 0 {
		t.Errorf("the sample's spill files are left: %v", left)
	}
	if !hasRule(p.Findings, rules.MonotonicKey) || hasRule(p.Remaining, rules.MonotonicKey) {
		t.Errorf("findings %+v / remaining %+v: want %s in the old keys only", p.Findings, p.Remaining, rules.MonotonicKey)
	}
	if p.After.HotspotScore >= p.Before.HotspotScore {
		t.Errorf("hotspot score before %.2f, after %.2f: want the new keys' lower", p.Before.HotspotScore, p.After.HotspotScore)
	}
	checkReport(t, files)
}
