package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/internal/testkit/beamtest"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/transforms"
)

func TestMain(m *testing.M) { beamtest.Main(m) }

func init() {
	register.DoFn2x0[context.Context, int]((*countFn)(nil))
}

// countFn counts every element as read, and as written if Written, with
// rekey's Count helpers, then sleeps Sleep.
type countFn struct {
	Written bool          `json:"written"`
	Sleep   time.Duration `json:"sleep"`
}

func (f *countFn) ProcessElement(ctx context.Context, _ int) {
	transforms.CountRead(ctx, 1)
	if f.Written {
		transforms.CountWritten(ctx, 1)
	}
	time.Sleep(f.Sleep)
}

// twoSteps counts a elements in one step and b in another of the same
// DoFn type: a+b read, b written.
func twoSteps(a, b int) func(s beam.Scope) {
	return func(s beam.Scope) {
		beam.ParDo0(s.Scope("first"), &countFn{}, beam.CreateList(s, make([]int, a)))
		beam.ParDo0(s.Scope("second"), &countFn{Written: true}, beam.CreateList(s, make([]int, b)))
	}
}

func graph(build func(s beam.Scope)) pipeline.Graph {
	return func(s beam.Scope, _ *migration.Job) error { build(s); return nil }
}

// runners are the runners these tests run jobs on: the local ones, and
// universal against the job server scripts/test.sh starts, if any.
func runners() []string {
	rs := append([]string(nil), beamtest.Runners...)
	if os.Getenv(beamtest.EnvJobEndpoint) != "" {
		rs = append(rs, "universal")
	}
	return rs
}

// on sets up runner for the test: the job server of scripts/test.sh for
// universal.
func on(t *testing.T, runner string) {
	if runner == "universal" {
		beamtest.UseJobServer(t)
	}
}

// run runs a pipeline.Run job on runner.
func run(t *testing.T, runner string, r pipeline.Runner, g pipeline.Graph) *migration.Result {
	t.Helper()
	r.Runner = runner
	res, err := pipeline.Run(t.Context(), nil, r, g)
	if err != nil {
		t.Fatalf("%s: %v", runner, err)
	}
	return res
}

// TestDirectRunnerKeysMetricsByDoFnType is why pipeline.Run tallies counts
// on the direct runner: it keys metrics by DoFn type, so of two steps of
// one type only one step's counts reach its metrics. If this fails, the
// direct runner keys metrics by step now and the tally can go.
func TestDirectRunnerKeysMetricsByDoFnType(t *testing.T) {
	for _, runner := range beamtest.Runners {
		m := beamtest.Run(t, runner, twoSteps(3, 4))
		got := m["rekey/read"]
		if runner == "direct" {
			if got == 7 {
				t.Errorf("direct: read=%d: the direct runner no longer loses a step's counts", got)
			}
			continue
		}
		if got != 7 {
			t.Errorf("%s: read=%d, want 7", runner, got)
		}
	}
}

// TestRunCountsTwoStepsOfOneType: Run reports the counts of every step on
// every runner.
func TestRunCountsTwoStepsOfOneType(t *testing.T) {
	for _, runner := range runners() {
		t.Run(runner, func(t *testing.T) {
			on(t, runner)
			res := run(t, runner, pipeline.Runner{}, graph(twoSteps(3, 4)))
			if c := res.Counters; c[migration.Read] != 7 || c[migration.Written] != 4 {
				t.Errorf("counters %s; want read=7 written=4", c)
			}
		})
	}
}

// TestConcurrentJobsCountApart: two jobs running at once in one process
// each report exactly their own counts.
func TestConcurrentJobsCountApart(t *testing.T) {
	for _, runner := range runners() {
		t.Run(runner, func(t *testing.T) {
			on(t, runner)
			sizes := [][2]int{{300, 200}, {70, 30}}
			results := make([]*migration.Result, len(sizes))
			errs := make([]error, len(sizes))
			var wg sync.WaitGroup
			for i, n := range sizes {
				wg.Go(func() {
					// Both jobs are still running when either ends.
					results[i], errs[i] = pipeline.Run(t.Context(), nil, pipeline.Runner{Runner: runner}, func(s beam.Scope, _ *migration.Job) error {
						twoSteps(n[0], n[1])(s)
						beam.ParDo0(s.Scope("wait"), &countFn{Sleep: 1500 * time.Millisecond}, beam.CreateList(s, []int{0}))
						return nil
					})
				})
			}
			wg.Wait()
			for i, n := range sizes {
				if errs[i] != nil {
					t.Errorf("job %d: %v", i, errs[i])
					continue
				}
				c := results[i].Counters
				if c[migration.Read] != int64(n[0]+n[1]+1) || c[migration.Written] != int64(n[1]) {
					t.Errorf("job %d: counters %s; want read=%d written=%d", i, c, n[0]+n[1]+1, n[1])
				}
			}
		})
	}
}

// syncBuffer is a strings.Builder safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestProgressWhileRunning: the progress line shows a running job's
// counts, as plain lines when the output is not a terminal.
func TestProgressWhileRunning(t *testing.T) {
	for _, runner := range runners() {
		t.Run(runner, func(t *testing.T) {
			on(t, runner)
			var out syncBuffer
			res := run(t, runner, pipeline.Runner{Progress: &out}, graph(func(s beam.Scope) {
				// One bundle of 4 elements, 0.8s each: only live metrics
				// show counts before it ends.
				beam.ParDo0(s, &countFn{Written: true, Sleep: 800 * time.Millisecond}, beam.CreateList(s, make([]int, 4)))
			}))
			live := false
			for _, line := range strings.Split(out.String(), "\n") {
				var read, written, dead int
				if _, err := fmt.Sscanf(line, "rekey: %d read, %d written, %d dead-lettered,", &read, &written, &dead); err == nil && read > 0 && written > 0 {
					live = true
				}
			}
			if !live || strings.ContainsAny(out.String(), "\r\033") { // not a terminal: plain lines
				t.Errorf("progress %q; want a line with counts", out.String())
			}
			if c := res.Counters; c[migration.Read] != 4 || c[migration.Written] != 4 {
				t.Errorf("counters %s; want read=4 written=4", c)
			}
		})
	}
}

// TestRunScratchDir: a job run on a runner whose workers run in this
// process (direct; prism and universal with the loopback environment)
// gets a scratch directory that exists while the graph is built and is
// gone after the run; the caller's job is left as it was.
func TestRunScratchDir(t *testing.T) {
	for _, runner := range runners() {
		t.Run(runner, func(t *testing.T) {
			on(t, runner)
			j := &migration.Job{}
			var dir string
			g := func(s beam.Scope, jj *migration.Job) error {
				dir = jj.ScratchDir
				if st, err := os.Stat(dir); err != nil || !st.IsDir() {
					t.Errorf("scratch directory %q: %v", dir, err)
				}
				twoSteps(1, 1)(s)
				return nil
			}
			if _, err := pipeline.Run(t.Context(), j, pipeline.Runner{Runner: runner}, g); err != nil {
				t.Fatal(err)
			}
			if dir == "" || j.ScratchDir != "" {
				t.Fatalf("the graph's job had scratch directory %q, the caller's %q", dir, j.ScratchDir)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("scratch directory %s after the run: %v", dir, err)
			}
		})
	}
}

// TestRunRemovesStaleScratchDirs: a run removes the scratch directories
// of rekey processes that are gone, and leaves those of live ones.
func TestRunRemovesStaleScratchDirs(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(os.TempDir(), fmt.Sprintf("rekey-scratch-%d-1", gone.Process.Pid))
	live := filepath.Join(os.TempDir(), fmt.Sprintf("rekey-scratch-%d-2", os.Getpid()))
	other := filepath.Join(os.TempDir(), "rekey-scratch-notapid")
	for _, d := range []string{stale, live, other} {
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pipeline.Run(t.Context(), &migration.Job{}, pipeline.Runner{Runner: "direct"}, graph(twoSteps(1, 1))); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the scratch directory of a process that is gone is still there: %v", err)
	}
	for _, d := range []string{live, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
}
