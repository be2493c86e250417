package integration

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb/spannerdbtest"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/internal/write/throttle"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// The ramp of the ramp-up tests: 200 writes/s, x1.5 every 3 s. rampRows
// take about 14 s of it (600 + 900 + 1,350 + 2,025 in the first 12 s), at
// rates the emulators take easily, so the run is ramp-bound to its end.
const (
	rampBase     = 200
	rampGrowth   = 1.5
	rampInterval = 3 * time.Second
	rampRows     = 6000
	// rampReadPhase is how long the tap holds the source's reads: the
	// pipeline reads for at least that long before its first write.
	rampReadPhase = 32 * time.Second
)

// TestRampUp migrates rampRows records under a fast ramp into each store,
// from a source of the same store whose reads the commit tap holds for
// 32 s, so that the read phase outlasts ten of the ramp's intervals. From
// the commits that reached the emulator (the bookkeeping tables and kinds
// excluded), measured from the first data commit: no one-second bin over
// 1.15x the schedule's budget for that second, and at least 80% of the
// budget used over the full seconds of the run (it is ramp-bound
// throughout). With the schedule started when the pipeline was built,
// the first second took the 10th step's rate (11,500/s) at once.
func TestRampUp(t *testing.T) {
	emulator.RequireSpanner(t)
	emulator.RequireDatastore(t)
	ramp := fmt.Sprintf("ramp: {profile: custom, base: %d, growth: %g, interval_seconds: %g}", rampBase, rampGrowth, rampInterval.Seconds())
	t.Run("spanner", func(t *testing.T) {
		ctx := context.Background()
		srcID, src := newSpannerTarget(t, "ramp-src", `CREATE TABLE Events (UserId STRING(36) NOT NULL, Seq INT64 NOT NULL, Page STRING(MAX)) PRIMARY KEY (UserId, Seq)`)
		dstID, dst := newSpannerTarget(t, "ramp-dst")
		var recs []record.Record
		for i := range rampRows {
			recs = append(recs, record.Record{Table: "Events", Fields: []record.Field{
				{Name: "UserId", Value: record.String(fmt.Sprintf("user-%05d", i/4))},
				{Name: "Seq", Value: record.Int(int64(i % 4))},
				{Name: "Page", Value: record.String(fmt.Sprintf("/p/%d", i))}}})
		}
		if err := spannerdbtest.Write(ctx, src, readTable(t, src, "Events"), recs); err != nil {
			t.Fatal(err)
		}
		key, _ := rewrite.ParseKeySchema("EventsV2", "UserId STRING(36), Seq INT64")
		tap := startTap(t, emulator.EnvSpannerHost, key)
		cfg := loadYAML(t, fmt.Sprintf(`
source: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: Events}
target: {type: spanner, project: %[1]s, instance: %[2]s, database: %[4]s, table: EventsV2}
rewrite: {strategy: none}
%[5]s
dead_letter: %[6]q
`, emulator.SpannerProject(), emulator.SpannerInstance(), srcID, dstID, ramp, filepath.Join(t.TempDir(), "dead.jsonl")))
		res := rampRun(t, tap, cfg)
		if got := len(readRows(t, dst, "EventsV2")); got != rampRows {
			t.Fatalf("%d rows written, want %d", got, rampRows)
		}
		checkRamp(t, tap, res, "EventsV2")
	})
	t.Run("datastore", func(t *testing.T) {
		c := emulator.TestDatastore(t)
		srcNS, dstNS := emulator.UniqueNamespace("ramp-src"), emulator.UniqueNamespace("ramp-dst")
		var recs []record.Record
		for i := range rampRows {
			k := rewrite.DatastoreKey{Namespace: srcNS, Path: []rewrite.PathElement{{Kind: "Event", Name: fmt.Sprintf("e%05d", i)}}}
			recs = append(recs, record.Record{Key: &k, Fields: []record.Field{{Name: "Page", Value: record.String(fmt.Sprintf("/p/%d", i))}}})
		}
		putEntities(t, c, recs)
		tap := startTap(t, emulator.EnvDatastoreHost)
		cfg := loadYAML(t, fmt.Sprintf(`
source: {type: datastore, project: %[1]s, namespace: %[2]s, kind: Event}
target: {type: datastore, project: %[1]s, namespace: %[3]s, kind: Event}
rewrite: {strategy: none}
%[4]s
dead_letter: %[5]q
`, emulator.DatastoreProject(), srcNS, dstNS, ramp, filepath.Join(t.TempDir(), "dead.jsonl")))
		res := rampRun(t, tap, cfg)
		if got := countEntities(t, c, dstNS, "Event"); got != rampRows {
			t.Fatalf("%d entities written, want %d", got, rampRows)
		}
		checkRamp(t, tap, res, "Event")
	})
}

// rampRun runs cfg on prism with the tap holding the source's reads for
// rampReadPhase.
func rampRun(t *testing.T, tap *committap.Tap, cfg *config.Config) *migration.Result {
	t.Helper()
	tap.HoldReads(time.Now().Add(rampReadPhase))
	res := migrate(t, cfg, "prism")
	if tap.Held() == 0 {
		t.Fatal("the tap held no read: the read phase was not lengthened")
	}
	wantCounters(t, res, rampRows, rampRows, rampRows, 0)
	if res.Counters["throttled_ms"] == 0 {
		t.Errorf("throttled_ms is 0: the ramp never held writes back")
	}
	return res
}

// checkRamp judges the data commits to table (a Spanner table or a kind)
// that reached the emulator against the schedule started at the first of
// them.
func checkRamp(t *testing.T, tap *committap.Tap, res *migration.Result, table string) {
	t.Helper()
	var commits []committap.Commit
	for _, c := range tap.Commits() {
		if c.Err == nil && len(c.Mutations) > 0 && c.Mutations[0].Table == table {
			commits = append(commits, c)
		}
	}
	if len(commits) == 0 {
		t.Fatalf("no data commits to %s reached the emulator", table)
	}
	sort.Slice(commits, func(i, j int) bool { return commits[i].At.Before(commits[j].At) })
	first, last := commits[0].At, commits[len(commits)-1].At
	sched, _ := throttle.NewSchedule(throttle.ProfileCustom, rampBase, rampGrowth, rampInterval, first)
	bins := map[int]int{}
	writes := 0
	for _, c := range commits {
		bins[int(c.At.Sub(first)/time.Second)] += len(c.Mutations)
		writes += len(c.Mutations)
	}
	full := int(last.Sub(first) / time.Second) // bins 0..full-1 are whole seconds of the run
	used, budget, worst := 0.0, 0.0, 0.0
	var report []string
	for sec := 0; sec <= full; sec++ {
		from := first.Add(time.Duration(sec) * time.Second)
		b := sched.Budget(from, from.Add(time.Second))
		rows := float64(bins[sec])
		worst = math.Max(worst, rows/b)
		report = append(report, fmt.Sprintf("%d:%d/%.0f", sec, bins[sec], b))
		if rows > 1.15*b {
			t.Errorf("second %d after the first data commit: %.0f writes, budget %.0f (more than 1.15x)", sec, rows, b)
		}
		if sec < full {
			used += rows
			budget += b
		}
	}
	t.Logf("%d writes in %d commits over %s from the first data commit; read phase held %d reads; per second (writes/budget) %s; worst bin %.2fx; used %.0f of %.0f (%.0f%%) in the full seconds; throttled %d ms",
		writes, len(commits), last.Sub(first).Round(time.Millisecond), tap.Held(), strings.Join(report, " "), worst, used, budget, 100*used/budget, res.Counters["throttled_ms"])
	if budget > 0 && used < 0.8*budget {
		t.Errorf("used %.0f of a budget of %.0f (%.0f%%) while ramp-bound, want at least 80%%", used, budget, 100*used/budget)
	}
}
