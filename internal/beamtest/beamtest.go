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
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/direct" // registers "direct"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"  // registers "prism"

	"github.com/rekeyio/rekey/internal/emulator"
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
		msg := fmt.Sprintf("%s is not set; run the tests through scripts/test.sh, which starts prism as a Beam job server (set %s=1 to skip tests that need one instead)", EnvJobEndpoint, emulator.EnvSkip)
		if os.Getenv(emulator.EnvSkip) == "1" {
			t.Skip(msg)
		}
		t.Fatal(msg)
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
	ep := JobEndpoint(t)
	for name, v := range map[string]string{"endpoint": ep, "environment_type": "LOOPBACK"} {
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

// Bytes returns the collected elements that are []byte.
func (c *Collector) Bytes() [][]byte {
	var out [][]byte
	for _, e := range c.Elements() {
		if b, ok := e.([]byte); ok {
			out = append(out, b)
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
