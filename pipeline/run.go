package pipeline

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/dataflow"  // --runner dataflow
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/direct"    // --runner direct
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"     // --runner prism (default)
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal" // --runner universal

	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/transforms"
)

// Runners rekey supports.
var Runners = []string{"prism", "direct", "dataflow", "universal"}

// Graph adds a job's pipeline to the scope (Migrate; later Verify and
// Backfill).
type Graph func(s beam.Scope, j *migration.Job) error

// Runner runs jobs on a Beam runner: Name is one of Runners; on local
// runners (prism, direct) a progress line is written to Progress every
// second while a job runs. It is the migration.Runner of Beam.
type Runner struct {
	Runner   string
	Progress io.Writer
}

// Name is the Beam runner's name.
func (r Runner) Name() string { return r.Runner }

// Describe says how the job's writes are planned (DescribeWrites).
func (r Runner) Describe(j *migration.Job) string { return DescribeWrites(j) }

// Migrate builds the job's migration (Migrate) and runs it.
func (r Runner) Migrate(ctx context.Context, j *migration.Job) (*migration.Result, error) {
	return Run(ctx, j, r, Migrate)
}

// Run builds graph from the job and runs it on r.Runner.
func Run(ctx context.Context, j *migration.Job, r Runner, graph Graph) (*migration.Result, error) {
	runner, progress := r.Runner, r.Progress
	p, s := beam.NewPipelineWithRoot()
	if err := graph(s, j); err != nil {
		return nil, err
	}
	start := time.Now()
	before := transforms.Snapshot()
	stop := startProgress(runner, progress, start, before)
	pr, err := beam.Run(ctx, runner, p)
	stop()
	res := &migration.Result{Counters: migration.Counters{}, Elapsed: time.Since(start)}
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
