package integration

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rekeyio/rekey/internal/emulator"
	"github.com/rekeyio/rekey/internal/throttle"
	"github.com/rekeyio/rekey/rewrite"
)

// TestRampUp migrates 2,400 rows under a fast ramp (200 rows/s, x1.5 every
// 3 s) through the commit tap, and checks from the commits' arrival times
// that no one-second bin goes over the budget by more than 15%, and that
// at least 80% of the budget is used while work remains.
func TestRampUp(t *testing.T) {
	const n = 2400
	key, _ := rewrite.ParseKeySchema("Events", "UserId STRING(36), Seq INT64")
	var lines []string
	for i := range n {
		lines = append(lines, fmt.Sprintf(`{"UserId": "user-%05d", "Seq": %d}`, i, i))
	}
	in := writeLines(t, "events.jsonl", lines)
	dstID, dst := newSpannerTarget(t, "ramp", `CREATE TABLE Events (UserId STRING(36) NOT NULL, Seq INT64 NOT NULL) PRIMARY KEY (UserId, Seq)`)
	tap := startTap(t, emulator.EnvSpannerHost, key)
	cfg := loadYAML(t, fmt.Sprintf(`
source: {type: jsonl, path: %q, key: "UserId STRING(36), Seq INT64"}
target: {type: spanner, project: %s, instance: %s, database: %s, table: Events}
rewrite: {strategy: none}
ramp: {profile: custom, base: 200, growth: 1.5, interval_seconds: 3}
dead_letter: %q
`, in, emulator.SpannerProject(), emulator.SpannerInstance(), dstID, filepath.Join(t.TempDir(), "dead.jsonl")))
	before := time.Now()
	res := migrate(t, cfg, "prism")
	wantCounters(t, res, n, n, n, 0)
	if got := len(readRows(t, dst, "Events")); got != n {
		t.Fatalf("%d rows, want %d", got, n)
	}
	if res.Counters["throttled_ms"] == 0 {
		t.Errorf("throttled_ms is 0: the ramp never held writes back")
	}
	// The schedule started when the pipeline was built, after before: a
	// schedule from before allows at least as much at any time, so bins
	// over it are over the real budget too.
	sched, _ := throttle.NewSchedule(throttle.ProfileCustom, 200, 1.5, 3*time.Second, before)
	bins := map[int]int{}
	var first, last time.Time
	for _, c := range tap.Commits() {
		if len(c.Mutations) == 0 || c.Mutations[0].Table != "Events" || c.Err != nil {
			continue
		}
		if first.IsZero() {
			first = c.At
		}
		last = c.At
		bins[int(c.At.Sub(before)/time.Second)] += len(c.Mutations)
	}
	used, budget := 0.0, 0.0
	for sec, rows := range bins {
		b := sched.Rate(before.Add(time.Duration(sec+1) * time.Second))
		if float64(rows) > b*1.15 {
			t.Errorf("second %d: %d rows written, budget %.0f (more than 1.15x)", sec, rows, b)
		}
		// Utilisation over the full seconds between the first and last commit.
		if s := before.Add(time.Duration(sec) * time.Second); s.After(first) && s.Add(time.Second).Before(last) {
			used += float64(rows)
			budget += sched.Rate(s)
		}
	}
	t.Logf("%d rows in %s (first commit %s after start); bins %v; used %.0f of a budget of %.0f in the full seconds", n, last.Sub(before).Round(time.Millisecond), first.Sub(before).Round(time.Millisecond), bins, used, budget)
	if budget > 0 && used < 0.8*budget {
		t.Errorf("used %.0f of a budget of %.0f (%.0f%%) while work remained, want at least 80%%", used, budget, 100*used/budget)
	}
}
