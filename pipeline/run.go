package pipeline

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/dataflow"  // --runner dataflow
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/direct"    // --runner direct
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"     // --runner prism (default)
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal" // --runner universal

	"github.com/rekeyio/rekey/transforms"
)

// Runners rekey supports.
var Runners = []string{"prism", "direct", "dataflow", "universal"}

// Result is what a run did.
type Result struct {
	// Counters are the "rekey" namespace counters: read, rewritten,
	// written, dead_lettered, retried (and any others stages add).
	Counters map[string]int64
	Elapsed  time.Duration
	JobID    string
}

// Run builds the migration pipeline from plan and runs it on runner. On
// local runners (prism, direct) a progress line is written to progress
// every second while it runs.
func Run(ctx context.Context, plan *Plan, runner string, progress io.Writer) (*Result, error) {
	p, s := beam.NewPipelineWithRoot()
	if _, err := Migrate(s, plan); err != nil {
		return nil, err
	}
	start := time.Now()
	before := transforms.Snapshot()
	stop := startProgress(runner, progress, start, before)
	pr, err := beam.Run(ctx, runner, p)
	stop()
	res := &Result{Counters: map[string]int64{}, Elapsed: time.Since(start)}
	if pr != nil {
		res.JobID = pr.JobID()
		for _, c := range pr.Metrics().AllMetrics().Counters() {
			if c.Namespace() == "rekey" {
				res.Counters[c.Name()] += c.Result()
			}
		}
	}
	if local(runner) {
		// Exact in-process counts (see transforms.Progress).
		for name, n := range transforms.Snapshot() {
			res.Counters[name] = n - before[name]
		}
	}
	if err != nil {
		return res, fmt.Errorf("%s runner: %w", runner, err)
	}
	return res, nil
}

func local(runner string) bool { return runner == "prism" || runner == "direct" }

func startProgress(runner string, w io.Writer, start time.Time, before map[string]int64) func() {
	if w == nil || !local(runner) {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		printed := false
		for {
			select {
			case <-done:
				if printed {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case <-t.C:
				printed = true
				el := time.Since(start)
				now := transforms.Snapshot()
				n := now["written"] - before["written"]
				fmt.Fprintf(w, "\r\033[K%d read, %d written, %d dead-lettered, %.0f records/s, %s elapsed",
					now["read"]-before["read"], n, now["dead_lettered"]-before["dead_lettered"],
					float64(n)/el.Seconds(), el.Truncate(time.Second))
			}
		}
	}()
	return func() { close(done); <-finished }
}

// FormatCounters renders counters in a stable order.
func FormatCounters(c map[string]int64) string {
	order := []string{"read", "rewritten", "written", "dead_lettered", "retried"}
	seen := map[string]bool{}
	out := ""
	for _, k := range order {
		out += fmt.Sprintf("%s=%d ", k, c[k])
		seen[k] = true
	}
	var rest []string
	for k := range c {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		out += fmt.Sprintf("%s=%d ", k, c[k])
	}
	return out[:len(out)-1]
}
