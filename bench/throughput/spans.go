package main

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The client libraries' spans around one commit: Spanner's Apply (both
// sides call it) and the Datastore client's Commit RPC (PutMulti and
// Mutate both end in it).
const (
	spannerApplySpan    = "cloud.google.com/go/spanner.Apply"
	datastoreCommitSpan = "cloud.google.com/go/datastore.datastoreClient.Commit"
)

// watch measures the commits of a run from inside the process: the
// Google client libraries start an OpenTelemetry span around every
// commit, and the tracer provider installed here counts the ones in
// flight. Both sides of a comparison run in this process (prism and direct
// run the Beam workers in it), so both are measured the same way.
var watch = &spanWatch{}

func init() {
	otel.SetTracerProvider(watch)
}

// commitStats describes the commits of a run.
type commitStats struct {
	n int
	// mean is the average number of commits in flight over the run
	// (the summed commit time over the run's time), max the most at once.
	mean float64
	max  int
	// first is when the first commit started, since the run began.
	first time.Duration
}

type spanWatch struct {
	noop.TracerProvider

	mu       sync.Mutex
	name     string
	start    time.Time
	inFlight int
	stats    commitStats
	busy     time.Duration // summed commit time
}

func (w *spanWatch) begin(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.name, w.start, w.inFlight, w.stats, w.busy = name, time.Now(), 0, commitStats{}, 0
}

func (w *spanWatch) end() commitStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.stats
	if el := time.Since(w.start); el > 0 {
		st.mean = w.busy.Seconds() / el.Seconds()
	}
	w.name = ""
	return st
}

func (w *spanWatch) Tracer(string, ...trace.TracerOption) trace.Tracer { return tracer{w: w} }

type tracer struct {
	noop.Tracer
	w *spanWatch
}

func (t tracer) Start(ctx context.Context, name string, _ ...trace.SpanStartOption) (context.Context, trace.Span) {
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if name != w.name {
		// Not a commit: a span that does nothing, so that its End cannot
		// end a commit span further up the context.
		var s noop.Span
		return trace.ContextWithSpan(ctx, s), s
	}
	now := time.Now()
	if w.stats.n == 0 {
		w.stats.first = now.Sub(w.start)
	}
	w.stats.n++
	w.inFlight++
	w.stats.max = max(w.stats.max, w.inFlight)
	s := &span{w: w, name: name, began: now}
	return trace.ContextWithSpan(ctx, s), s
}

type span struct {
	noop.Span
	w     *spanWatch
	name  string
	began time.Time
	once  sync.Once
}

func (s *span) End(...trace.SpanEndOption) {
	s.once.Do(func() {
		w := s.w
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.name != s.name {
			return
		}
		now := time.Now()
		w.inFlight--
		w.busy += now.Sub(s.began)
	})
}
