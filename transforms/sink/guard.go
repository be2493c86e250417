package sink

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rekeyio/rekey/internal/write/retry"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/internal/write/throttle"
	"github.com/rekeyio/rekey/transforms"
)

// Guard is how a sink treats a store that fails or is overloaded: the
// backoff of commits that fail with a transient error, and the adaptive
// client-side throttle consulted before each commit.
type Guard struct {
	// Retry is the backoff of transient errors; zero fields take
	// retry's defaults (1 s doubling to 60 s, 15 s per attempt, 15
	// minutes of cumulative backoff).
	Retry retry.Policy `json:"retry"`
	// AdaptiveOff turns the adaptive throttle off; AdaptiveK (0: 1.25)
	// and AdaptiveWindow (0: 2 minutes) shape it.
	AdaptiveOff    bool          `json:"adaptive_off,omitempty"`
	AdaptiveK      float64       `json:"adaptive_k,omitempty"`
	AdaptiveWindow time.Duration `json:"adaptive_window,omitempty"`
	// Ramp is the job's ramp-up: the writers size each commit by the rate
	// in force as it is sent and wait for its budget right before it goes
	// (storewrite.Pacer), sharing one budget with every process writing
	// the run (throttle, "One ramp for the whole job").
	Ramp throttle.Ramp `json:"ramp,omitempty"`
}

// Pacer is the writers' pacer under the ramp-up, reaching the run's
// state through lease (nil when there is no ramp-up): one per process and
// run, shared by every writer (throttle.SharedPacer).
func (g Guard) Pacer(lease throttle.Lease) (storewrite.Pacer, error) {
	if g.Ramp.Off() {
		return nil, nil
	}
	p, err := throttle.SharedPacer(g.Ramp)
	if err != nil {
		return nil, err
	}
	return p.With(lease), nil
}

// Throttle is the process's adaptive throttle for target and these
// settings, nil when off.
func (g Guard) Throttle(target string) retry.Throttle {
	if g.AdaptiveOff {
		return nil
	}
	key := fmt.Sprintf("%s k=%g window=%s", target, g.AdaptiveK, g.AdaptiveWindow)
	return throttle.Shared(key, g.AdaptiveK, g.AdaptiveWindow)
}

// outcome is what a sink's commit did: the writer's storewrite.Outcome
// (dead letters, counts, retry, throttle and ramp-up waits, splits,
// commits) and its error. It is filled on the goroutine
// that commits and reported on the bundle's.
type outcome struct {
	storewrite.Outcome
	err error
}

// storeMetrics counts a store's own metrics of an outcome (commit sizes
// and times), on the bundle's goroutine.
type storeMetrics func(ctx context.Context, o *storewrite.Outcome)

// report emits the dead letters, counts the rest (the store's own metrics
// with m) and returns o's error; o is emptied for reuse.
func (o *outcome) report(ctx context.Context, emit func(string), m storeMetrics) error {
	for _, line := range o.DeadLetters {
		emit(line)
	}
	transforms.CountDeadLettered(ctx, int64(len(o.DeadLetters)))
	for _, d := range o.Retries {
		transforms.CountRetry(ctx, d)
	}
	for _, d := range o.Throttled {
		transforms.CountThrottled(ctx, d, true)
	}
	if o.Paced > 0 {
		transforms.CountThrottled(ctx, o.Paced, false)
	}
	m(ctx, &o.Outcome)
	transforms.CountWritten(ctx, int64(o.Written))
	if o.Deleted > 0 {
		transforms.CountDeleted(ctx, int64(o.Deleted))
	}
	if o.Skipped > 0 {
		transforms.CountBackfillSkipped(ctx, int64(o.Skipped))
	}
	for range o.Splits {
		transforms.CountSplit(ctx)
	}
	if o.ClientRetries > 0 {
		transforms.CountClientRetries(ctx, int64(o.ClientRetries))
	}
	err := o.err
	o.Reset()
	o.err = nil
	return err
}

// finished holds the outcomes of commits that ran on goroutines of their
// own, until the bundle's goroutine reports them (Beam's emitters and
// metrics belong to it).
type finished struct {
	mu   sync.Mutex
	done []*outcome
}

// add records a finished commit's outcome.
func (q *finished) add(o *outcome) {
	q.mu.Lock()
	q.done = append(q.done, o)
	q.mu.Unlock()
}

// drop forgets the outcomes not reported (those of a failed bundle).
func (q *finished) drop() {
	q.mu.Lock()
	q.done = nil
	q.mu.Unlock()
}

// report reports the outcomes recorded so far and returns the first error
// among them.
func (q *finished) report(ctx context.Context, emit func(string), m storeMetrics) error {
	q.mu.Lock()
	done := q.done
	q.done = nil
	q.mu.Unlock()
	var first error
	for _, o := range done {
		if err := o.report(ctx, emit, m); err != nil && first == nil {
			first = err
		}
	}
	return first
}

var inFlight = struct {
	sync.Mutex
	m map[string]chan struct{}
}{m: map[string]chan struct{}{}}

// commitSlots returns the process's semaphore of n commits to db: the cap
// of Parallelism, shared by every bundle and DoFn instance writing there.
func commitSlots(db string, n int) chan struct{} {
	inFlight.Lock()
	defer inFlight.Unlock()
	key := fmt.Sprintf("%s/%d", db, n)
	c, ok := inFlight.m[key]
	if !ok {
		c = make(chan struct{}, n)
		inFlight.m[key] = c
	}
	return c
}
