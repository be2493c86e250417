// Package beamtest runs Beam pipelines in tests on the local runners and
// reads back their metrics and outputs.
//
// Run initialises Beam (beam.Init) before the first pipeline if nothing
// did, so a test package needs no TestMain; one that has its own may call
// Main. For each runner in Runners:
//
//	out := beamtest.NewCollector(t)
//	m := beamtest.Run(t, runner, func(s beam.Scope) {
//		batches, _ := source.Spanner(s, cfg)
//		out.Collect(s, batches)
//	})
//	m["rekey/read"], out.Bytes()
//
// Both runners execute DoFns in the test process (prism in loopback
// mode), which is what lets a Collector hand elements back to the test.
package beamtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/direct" // registers "direct"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"  // registers "prism"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/record"
)

// Runners are the local runners pipelines are tested on: prism (Beam's
// default local runner) and direct (deprecated, still used by many).
var Runners = []string{"prism", "direct"}

// EnvJobEndpoint is the address of a Beam job server for tests of the
// universal runner, host:port; scripts/test.sh starts prism as one and sets
// it.
const EnvJobEndpoint = "REKEY_JOB_ENDPOINT"

// JobEndpoint returns the job server's address (EnvJobEndpoint). Without
// one it fails the test, saying to run scripts/test.sh, or skips it when
// REKEY_SKIP_EMULATOR=1, as tests needing an emulator do.
func JobEndpoint(t testing.TB) string {
	t.Helper()
	ep := os.Getenv(EnvJobEndpoint)
	if ep == "" {
		missing(t, "%s is not set; run the tests through scripts/test.sh, which starts prism as a Beam job server", "one", EnvJobEndpoint)
	}
	return ep
}

// UseJobServer points Beam's universal runner at the job server
// (JobEndpoint) for the rest of the test, with the SDK worker in this
// process (--endpoint, --environment_type=LOOPBACK on flag.CommandLine),
// and restores the flags when the test ends. Tests using it must not run
// in parallel with other pipelines.
func UseJobServer(t testing.TB) {
	t.Helper()
	setFlags(t, map[string]string{"endpoint": JobEndpoint(t), "environment_type": "LOOPBACK"})
}

// EnvWorkerPool is the address of a Go SDK worker pool beside the job
// server, host:port, and EnvWorkerPoolDir the folder under which it gives
// each worker a folder of its own (internal/testkit/workerpool; started
// by scripts/test.sh).
const (
	EnvWorkerPool    = "REKEY_WORKER_POOL"
	EnvWorkerPoolDir = "REKEY_WORKER_POOL_DIR"
)

// UseWorkerPool points Beam's universal runner at the job server for the
// rest of the test with the SDK workers in other processes, started by
// the worker pool (--endpoint, --environment_type=EXTERNAL,
// --environment_config=POOL), as a Flink or Spark job server runs them:
// the job stages this test binary (which must call beam.Init in its
// TestMain, so that it serves as a worker) and each worker runs it in a
// folder and TMPDIR of its own. It returns the pool's log of workers
// (Workers). Without a pool it fails the test, or skips it with
// REKEY_SKIP_EMULATOR=1.
func UseWorkerPool(t testing.TB) *Pool {
	t.Helper()
	ep := JobEndpoint(t)
	pool, dir := os.Getenv(EnvWorkerPool), os.Getenv(EnvWorkerPoolDir)
	if pool == "" || dir == "" {
		missing(t, "%s or %s is not set; run the tests through scripts/test.sh, which starts a Go SDK worker pool beside the job server", "one", EnvWorkerPool, EnvWorkerPoolDir)
	}
	setFlags(t, map[string]string{"endpoint": ep, "environment_type": "EXTERNAL", "environment_config": pool})
	p := &Pool{Dir: dir}
	p.seen = len(p.all(t))
	return p
}

// EnvWorkerPoolBin and EnvWorkerBoot are the worker pool's program and
// Beam's boot program (scripts/test.sh builds both), for tests that start
// a pool of their own (StartWorkerPool).
const (
	EnvWorkerPoolBin = "REKEY_WORKER_POOL_BIN"
	EnvWorkerBoot    = "REKEY_WORKER_BOOT"
)

// StartWorkerPool starts a worker pool of the test's own, its workers'
// environment this process's with env (KEY=VALUE) added, and points
// Beam's universal runner at it as UseWorkerPool does; the pool stops
// when the test ends. Tests use it when the workers must see what the
// shared pool's do not, such as a commit tap in front of an emulator
// (SPANNER_EMULATOR_HOST). Without the programs (EnvWorkerPoolBin,
// EnvWorkerBoot) it fails the test, or skips it with REKEY_SKIP_EMULATOR=1.
func StartWorkerPool(t testing.TB, env ...string) *Pool {
	t.Helper()
	ep := JobEndpoint(t)
	bin, boot := os.Getenv(EnvWorkerPoolBin), os.Getenv(EnvWorkerBoot)
	if bin == "" || boot == "" {
		missing(t, "%s or %s is not set; run the tests through scripts/test.sh, which builds the worker pool and Beam's boot program", "them", EnvWorkerPoolBin, EnvWorkerBoot)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "-port=0", "-boot="+boot, "-root="+dir)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the worker pool: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		setFlags(t, map[string]string{"endpoint": ep, "environment_type": "EXTERNAL", "environment_config": a})
	case <-time.After(30 * time.Second):
		t.Fatal("the worker pool did not say where it listens within 30 s")
	}
	return &Pool{Dir: dir}
}

// A Pool is the worker pool a test uses.
type Pool struct {
	Dir  string
	seen int // events before the test
}

// A WorkerEvent is a line of the pool's log: a worker started or exited.
type WorkerEvent struct {
	Event string    `json:"event"` // "start" or "exit"
	ID    string    `json:"id"`
	PID   int       `json:"pid"`
	Dir   string    `json:"dir"`
	Time  time.Time `json:"time"`
}

// Workers returns the pool's events since UseWorkerPool.
func (p *Pool) Workers(t testing.TB) []WorkerEvent {
	t.Helper()
	return p.all(t)[p.seen:]
}

func (p *Pool) all(t testing.TB) []WorkerEvent {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(p.Dir, "workers.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []WorkerEvent
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e WorkerEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("worker pool log %s: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// Started returns the workers started since UseWorkerPool, failing the
// test if none was, or if one ran in this process.
func (p *Pool) Started(t testing.TB) []WorkerEvent {
	t.Helper()
	var started []WorkerEvent
	for _, e := range p.Workers(t) {
		if e.Event == "start" {
			if e.PID == os.Getpid() {
				t.Fatalf("worker %s ran in the test's own process", e.ID)
			}
			started = append(started, e)
		}
	}
	if len(started) == 0 {
		t.Fatal("the worker pool started no worker: the job ran elsewhere")
	}
	return started
}

// WaitExit waits up to 30 s for the pool to log worker id's exit,
// failing the test if it does not.
func (p *Pool) WaitExit(t testing.TB, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, e := range p.Workers(t) {
			if e.ID == id && e.Event == "exit" {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("worker %s did not exit within 30 s of its job", id)
}

// setFlags sets Beam's flags on flag.CommandLine for the rest of the test.
func setFlags(t testing.TB, flags map[string]string) {
	t.Helper()
	for name, v := range flags {
		f := flag.Lookup(name)
		if f == nil {
			t.Fatalf("no Beam flag --%s", name)
		}
		old := f.Value.String()
		if err := flag.Set(name, v); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = flag.Set(name, old) })
	}
}

// Main is a TestMain for packages that run pipelines: it parses flags,
// initialises Beam and runs the tests.
func Main(m *testing.M) {
	if !flag.Parsed() {
		flag.Parse()
	}
	beam.Init()
	os.Exit(m.Run())
}

// Metrics are a run's metrics by "namespace/name", summed over steps.
// A distribution adds "namespace/name.count", ".sum", ".min" and ".max".
type Metrics map[string]int64

// Run builds a pipeline with build and runs it on runner ("prism" or
// "direct"), failing the test if it fails; it returns the run's metrics.
func Run(t testing.TB, runner string, build func(s beam.Scope)) Metrics {
	t.Helper()
	m, err := RunErr(t.Context(), runner, build)
	if err != nil {
		t.Fatalf("pipeline on %s: %v", runner, err)
	}
	return m
}

var initOnce sync.Once

// RunErr is Run returning the pipeline's error, for tests of failures.
func RunErr(ctx context.Context, runner string, build func(s beam.Scope)) (Metrics, error) {
	initOnce.Do(func() {
		if !beam.Initialized() {
			beam.Init()
		}
	})
	p, s := beam.NewPipelineWithRoot()
	build(s)
	res, err := beam.Run(ctx, runner, p)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return Metrics{}, nil
	}
	return collectMetrics(res.Metrics()), nil
}

// MetricsContext returns a context that records Beam metrics as a
// runner's bundle context does, for tests that call a DoFn's methods
// themselves, and a function returning what was recorded with it or a
// context derived from it.
func MetricsContext(ctx context.Context) (context.Context, func() Metrics) {
	ctx = metrics.SetPTransformID(metrics.SetBundleID(ctx, "beamtest"), "beamtest")
	return ctx, func() Metrics { return collectMetrics(metrics.ResultsExtractor(ctx)) }
}

func collectMetrics(r metrics.Results) Metrics {
	out := Metrics{}
	all := r.AllMetrics()
	for _, c := range all.Counters() {
		out[c.Namespace()+"/"+c.Name()] += c.Result()
	}
	type dist struct{ count, sum, min, max int64 }
	ds := map[string]*dist{}
	for _, d := range all.Distributions() {
		k := d.Namespace() + "/" + d.Name()
		v := d.Result()
		cur, ok := ds[k]
		if !ok {
			ds[k] = &dist{v.Count, v.Sum, v.Min, v.Max}
			continue
		}
		cur.count += v.Count
		cur.sum += v.Sum
		cur.min = min(cur.min, v.Min)
		cur.max = max(cur.max, v.Max)
	}
	for k, d := range ds {
		out[k+".count"], out[k+".sum"], out[k+".min"], out[k+".max"] = d.count, d.sum, d.min, d.max
	}
	return out
}

// String lists the metrics sorted by name, for test logs.
func (m Metrics) String() string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ""
	for _, k := range keys {
		s += k + "=" + strconv.FormatInt(m[k], 10) + " "
	}
	return s
}

// A Collector gathers the elements of PCollections for a test.
type Collector struct {
	id string
}

var (
	collectMu sync.Mutex
	collected = map[string][]any{}
	nextID    int
)

// NewCollector returns an empty collector, released when the test ends.
func NewCollector(t testing.TB) *Collector {
	collectMu.Lock()
	defer collectMu.Unlock()
	nextID++
	c := &Collector{id: fmt.Sprintf("%s#%d", t.Name(), nextID)}
	collected[c.id] = nil
	t.Cleanup(func() {
		collectMu.Lock()
		delete(collected, c.id)
		collectMu.Unlock()
	})
	return c
}

// Collect adds every element of col to the collector when the pipeline
// runs.
func (c *Collector) Collect(s beam.Scope, col beam.PCollection) {
	beam.ParDo0(s.Scope("beamtest.Collect"), &collectFn{ID: c.id}, col)
}

// Elements returns what was collected so far, in arrival order.
func (c *Collector) Elements() []any {
	collectMu.Lock()
	defer collectMu.Unlock()
	return append([]any(nil), collected[c.id]...)
}

// Strings returns the collected elements that are strings.
func (c *Collector) Strings() []string {
	var out []string
	for _, e := range c.Elements() {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Bytes returns the collected elements that are []byte, and those that
// are record batches in their coder's bytes (record.EncodeBatch), which
// record.DecodeBatch reads back.
func (c *Collector) Bytes() [][]byte {
	var out [][]byte
	for _, e := range c.Elements() {
		switch b := e.(type) {
		case []byte:
			out = append(out, b)
		case record.Batch:
			out = append(out, b.Encode())
		}
	}
	return out
}

// Records returns the records of the collected record batches, in
// arrival order.
func (c *Collector) Records() []record.Record {
	var out []record.Record
	for _, e := range c.Elements() {
		if b, ok := e.(record.Batch); ok {
			out = append(out, b.Recs...)
		}
	}
	return out
}

// Reset forgets what was collected, to reuse the collector for another run.
func (c *Collector) Reset() {
	collectMu.Lock()
	collected[c.id] = nil
	collectMu.Unlock()
}

func init() {
	register.DoFn1x0[beam.X]((*collectFn)(nil))
}

type collectFn struct {
	ID string `json:"id"`
}

func (f *collectFn) ProcessElement(x beam.X) {
	collectMu.Lock()
	defer collectMu.Unlock()
	if b, ok := x.([]byte); ok {
		x = append([]byte(nil), b...) // the runner may reuse the buffer
	}
	collected[f.ID] = append(collected[f.ID], x)
}

// missing fails the test for what is not set (format and args, "... is
// not set; run the tests through scripts/test.sh, which ..."), or skips
// it with REKEY_SKIP_EMULATOR=1, saying so.
func missing(t testing.TB, format, need string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...) + fmt.Sprintf(" (set %s=1 to skip tests that need %s instead)", emulator.EnvSkip, need)
	if os.Getenv(emulator.EnvSkip) == "1" {
		t.Skip(msg)
	}
	t.Fatal(msg)
}
