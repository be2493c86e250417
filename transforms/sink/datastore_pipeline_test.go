package sink_test

// A private helper to run the Datastore sink tests' pipelines on prism
// and direct and read back their outputs and metrics. Both runners run
// DoFns in the test process (prism in loopback mode), which is what lets
// a collector DoFn hand elements back through a package variable.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/direct"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
)

var dsRunners = []string{"prism", "direct"}

var dsInit sync.Once

// dsRun runs a pipeline on runner and returns its metrics by
// "namespace/name" (distributions as name.max, name.count, ...).
func dsRun(t *testing.T, runner string, build func(s beam.Scope)) map[string]int64 {
	t.Helper()
	dsInit.Do(func() {
		if !beam.Initialized() {
			beam.Init()
		}
	})
	p, s := beam.NewPipelineWithRoot()
	build(s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var (
		res beam.PipelineResult
		err error
	)
	switch runner {
	case "prism":
		res, err = prism.Execute(ctx, p)
	case "direct":
		res, err = direct.Execute(ctx, p)
	default:
		t.Fatalf("unknown runner %q", runner)
	}
	if err != nil {
		t.Fatalf("pipeline on %s: %v", runner, err)
	}
	m := map[string]int64{}
	if res == nil {
		return m
	}
	all := res.Metrics().AllMetrics()
	for _, c := range all.Counters() {
		m[c.Namespace()+"/"+c.Name()] += c.Result()
	}
	for _, d := range all.Distributions() {
		k, v := d.Namespace()+"/"+d.Name(), d.Result()
		if _, ok := m[k+".count"]; !ok || v.Max > m[k+".max"] {
			m[k+".max"] = v.Max
		}
		m[k+".count"] += v.Count
		m[k+".sum"] += v.Sum
	}
	return m
}

var (
	dsCollectMu sync.Mutex
	dsCollected = map[string][]any{}
	dsNextID    int
)

// dsCollector gathers a PCollection's elements for the test.
type dsCollector struct{ id string }

func newDSCollector(t *testing.T) dsCollector {
	dsCollectMu.Lock()
	defer dsCollectMu.Unlock()
	dsNextID++
	c := dsCollector{id: fmt.Sprintf("%s#%d", t.Name(), dsNextID)}
	dsCollected[c.id] = nil
	t.Cleanup(func() {
		dsCollectMu.Lock()
		delete(dsCollected, c.id)
		dsCollectMu.Unlock()
	})
	return c
}

func (c dsCollector) bytes(s beam.Scope, col beam.PCollection) {
	beam.ParDo0(s, &dsCollectBytesFn{ID: c.id}, col)
}

func (c dsCollector) strings(s beam.Scope, col beam.PCollection) {
	beam.ParDo0(s, &dsCollectStringFn{ID: c.id}, col)
}

func (c dsCollector) elements() []any {
	dsCollectMu.Lock()
	defer dsCollectMu.Unlock()
	return append([]any(nil), dsCollected[c.id]...)
}

func dsAppend(id string, v any) {
	dsCollectMu.Lock()
	defer dsCollectMu.Unlock()
	dsCollected[id] = append(dsCollected[id], v)
}

type dsCollectBytesFn struct {
	ID string `json:"id"`
}

func (f *dsCollectBytesFn) ProcessElement(b []byte) { dsAppend(f.ID, append([]byte(nil), b...)) }

type dsCollectStringFn struct {
	ID string `json:"id"`
}

func (f *dsCollectStringFn) ProcessElement(s string) { dsAppend(f.ID, s) }

func init() {
	register.DoFn1x0[[]byte](&dsCollectBytesFn{})
	register.DoFn1x0[string](&dsCollectStringFn{})
}
