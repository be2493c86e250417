package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/dataflow" // --runner dataflow
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/direct"   // --runner direct

	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/progress"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/transforms"
	"github.com/rekeyio/rekey/transforms/sink"
)

// Runners rekey supports.
var Runners = []string{"prism", "direct", "dataflow", "universal"}

// Graph adds a job's pipeline to the scope (Migrate, Backfill, Cleanup;
// later Verify).
type Graph func(s beam.Scope, j *migration.Job) error

// Runner runs jobs on a Beam runner: Name is one of Runners. While a job
// runs on prism, universal or direct, a progress line is written to
// Progress every second (see the package doc for where its counts come
// from); on dataflow a note (to Notes) says the counts come at the end.
// It is the migration.Runner of Beam.
type Runner struct {
	Runner   string
	Progress io.Writer
	// Notes receives what the runner has to tell (nil: none are wanted).
	Notes migration.Notes
	// backfill, if set, makes Migrate run the cohort backfill (Backfill)
	// instead of the whole migration (Runner.Backfill sets it).
	backfill *phases.Backfill

	// total, if set, estimates the job's records for the progress meter
	// (Migrate sets it: estimateTotal; a verify, estimateCompared).
	total func(context.Context) (progress.Total, bool)
	// counts says what the job's progress counts (see progressCounts).
	counts progressCounts
}

// progressCounts says what a job's progress counts.
type progressCounts int

const (
	countsWritten  progressCounts = iota // records written (or deleted)
	countsCompared                       // a verify or a repair: records compared (operator.VerifyCompared)
	countsRead                           // a dry run, which writes nothing: records read
	countsPlan                           // a plan: records read, as a dry run's
)

// Name is the Beam runner's name.
func (r Runner) Name() string { return r.Runner }

// Describe says how the job's writes are planned (DescribeWrites).
func (r Runner) Describe(j *migration.Job) string { return DescribeWrites(j) }

// Migrate builds the job's migration (Migrate) and runs it. A dry run's
// result also holds a sample of the first source records' keys before and
// after the rewrite (Sample).
func (r Runner) Migrate(ctx context.Context, j *migration.Job) (*migration.Result, error) {
	if err := keepOutput(ctx, j); err != nil {
		return nil, err
	}
	if err := CheckFiles(ctx, j); err != nil {
		return nil, err
	}
	graph := Migrate
	if r.backfill != nil {
		graph = Backfill(*r.backfill)
	} else {
		r.total = func(ctx context.Context) (progress.Total, bool) { return estimateTotal(ctx, j) }
	}
	res, err := Run(ctx, j, r, graph)
	if err == nil && j.DryRun {
		res.Sample, err = Sample(ctx, j, sampleSize)
	}
	return res, err
}

// namespace is the namespace of rekey's Beam metrics (transforms.go);
// Result.Counters holds its counters.
const namespace = "rekey"

// Run builds graph from the job and runs it on r.Runner. The result's
// counters are the job's "rekey" counters as the runner reports them (see
// the package doc).
//
// When the job's workers run in this process (inProcess), the job gets a
// scratch directory for the run (migration.Job.ScratchDir, see
// newScratch), removed when Run returns.
func Run(ctx context.Context, j *migration.Job, r Runner, graph Graph) (*migration.Result, error) {
	if j != nil && InProcess(r.Runner) {
		dir, err := newScratch()
		if err != nil {
			return nil, fmt.Errorf("scratch directory: %w", err)
		}
		defer os.RemoveAll(dir)
		scratch := *j
		scratch.ScratchDir = dir
		j = &scratch
	}
	p, s := beam.NewPipelineWithRoot()
	if err := graph(s, j); err != nil {
		return nil, err
	}
	start := time.Now()
	res := &migration.Result{Counters: migration.Counters{}}
	if j != nil && j.DryRun && r.counts == countsWritten {
		r.counts = countsRead
	}
	var err error
	switch r.Runner {
	case "prism", "universal":
		err = runPortable(ctx, r, p, start, res)
	case "direct":
		err = runDirect(ctx, r, p, start, res)
	default:
		r.Notes.Say(migration.NoLiveProgress{Runner: r.Runner})
		if err := SetWorkerBinary(r.Runner); err != nil {
			return nil, err
		}
		var pr beam.PipelineResult
		pr, err = beam.Run(ctx, r.Runner, p)
		if pr != nil {
			res.JobID = pr.JobID()
			addCounters(res.Counters, pr.Metrics(), false)
		}
	}
	res.Elapsed = time.Since(start)
	if err != nil {
		if local(r.Runner) {
			removeParts(ctx, j)
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("%s runner: %w", r.Runner, ctx.Err())
		}
		return res, fmt.Errorf("%s runner: %w", r.Runner, err)
	}
	return res, nil
}

// keepOutput refuses a run that would replace an existing JSON Lines
// target file (unless j.Overwrite): a run never erases output it was not
// asked to.
func keepOutput(ctx context.Context, j *migration.Job) error {
	t := j.Target
	ft, ok := targets[t.Type].(fileTarget)
	if !ok || j.DryRun || j.TranslateOnly || j.Overwrite {
		return nil
	}
	path, msg := ft.existing(t)
	exists, err := sink.Exists(ctx, path)
	if err != nil || !exists {
		return nil // the sink reports a path it cannot write
	}
	return &migration.ConfigError{Err: fmt.Errorf("%s: give another path (for example REKEY_TARGET_PATH=...), move it away, or run with --overwrite", msg)}
}

func local(runner string) bool { return runner == "prism" || runner == "direct" }

// scratchPrefix begins the name of a run's scratch directory in
// os.TempDir: rekey-scratch-PID-RANDOM.
const scratchPrefix = "rekey-scratch-"

// newScratch makes a scratch directory for a run of this process, first
// removing those of rekey processes that are gone: a run killed outright
// (SIGKILL, a crash) cannot remove its own, which may hold about the size
// of its input.
func newScratch() (string, error) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), scratchPrefix+"*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(filepath.Base(d), scratchPrefix), "-", 2)[0])
		if err == nil && pid > 0 && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
	return os.MkdirTemp("", fmt.Sprintf("%s%d-", scratchPrefix, os.Getpid()))
}

// InProcess reports whether the runner's SDK workers run in this process,
// and so share its disk: direct, and prism or universal with the loopback
// environment (prism's default without --endpoint).
func InProcess(runner string) bool {
	env := strings.ToLower(*jobopts.EnvironmentType)
	switch runner {
	case "direct":
		return true
	case "prism":
		return env == "loopback" || env == "" && *jobopts.Endpoint == ""
	case "universal":
		return env == "loopback"
	}
	return false
}

// removeParts removes the part files an unfinished local run left next to
// its JSON Lines target and its dead-letter file (a re-run writes its own;
// what was committed to a database stays, and a re-run converges).
func removeParts(ctx context.Context, j *migration.Job) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, _ = sink.RemoveParts(ctx, j.DeadLetterPath)
	if ft, ok := targets[j.Target.Type].(fileTarget); ok && !j.DryRun {
		ft.removeParts(ctx, j.Target)
	}
}

// addCounters adds the "rekey" counters of m to c, summed over steps:
// their committed values (attempted where a runner commits none), or with
// live set, the larger of the two, which is what a running job has at
// least counted (finished bundles are committed, running ones attempted).
func addCounters(c migration.Counters, m metrics.Results, live bool) {
	for _, r := range m.AllMetrics().Counters() {
		if r.Namespace() != namespace {
			continue
		}
		v := r.Result()
		if live {
			v = max(r.Committed, r.Attempted)
		}
		c[r.Name()] += v
	}
}

// runDirect runs p on the direct runner. Its metrics are keyed by DoFn
// type, not by step, so the counts of a second step of the same type are
// lost; the Count helpers' counts are tallied for this job instead (see the
// package doc).
func runDirect(ctx context.Context, r Runner, p *beam.Pipeline, start time.Time, res *migration.Result) error {
	t := &tally{n: map[string]int64{}}
	stop := startProgress(ctx, r.Progress, start, t.counters, r.total, r.counts)
	pr, err := beam.Run(transforms.ObserveCounts(ctx, t.add), "direct", p)
	stop()
	if pr != nil {
		res.JobID = pr.JobID()
		addCounters(res.Counters, pr.Metrics(), false)
	}
	maps.Copy(res.Counters, t.counters())
	return err
}

// tally sums one job's counts by name.
type tally struct {
	mu sync.Mutex
	n  map[string]int64
}

func (t *tally) add(name string, n int64) {
	t.mu.Lock()
	t.n[name] += n
	t.mu.Unlock()
}

func (t *tally) counters() migration.Counters {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.n)
}

// startProgress shows the run's progress on w every second (a bar on a
// terminal, plain lines elsewhere; see internal/progress) with the counts
// now() returns (nil: none yet) until the returned stop is called, which
// clears the bar. total, if set, estimates the run's records; it runs
// beside the job and the meter gets percent and ETA when it returns.
// counts says what it counts.
func startProgress(ctx context.Context, w io.Writer, start time.Time, now func() migration.Counters, total func(context.Context) (progress.Total, bool), counts progressCounts) (stop func()) {
	if w == nil {
		return func() {}
	}
	m := progress.New(w, progress.IsTerminal(w), 0)
	ctx, cancel := context.WithCancel(ctx)
	if total != nil {
		go func() {
			if t, ok := total(ctx); ok {
				m.SetTotal(t)
			}
		}()
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				m.Finish()
				return
			case <-t.C:
				if c := now(); c != nil {
					m.Update(snapshot(c, time.Since(start), counts))
				}
			}
		}
	}()
	return func() { cancel(); close(done); <-finished }
}

// snapshot is the progress counts of a run's counters.
func snapshot(c migration.Counters, el time.Duration, counts progressCounts) progress.Snapshot {
	s := progress.Snapshot{Read: c[migration.Read], Done: c[migration.Written], Dead: c[migration.DeadLettered], Elapsed: el}
	switch {
	case counts == countsCompared: // a verify or a repair: its repairs are counted at the end
		s.Done, s.Verb = c[operator.VerifyCompared], "compared"
	case counts == countsRead:
		s.ReadOnly = true
	case counts == countsPlan:
		s.ReadOnly, s.Why = true, "a plan"
	case c[migration.Deleted] > 0: // a cohort cleanup
		s.Done, s.Verb = c[migration.Deleted], "deleted"
	}
	return s
}
