package sink

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rekeyio/rekey/internal/retry"
	"github.com/rekeyio/rekey/internal/throttle"
	"github.com/rekeyio/rekey/record"
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
	// Ramp is the ramp-up that paced batches (record.EncodePacedBatch,
	// from transforms/writeplan) spend: each waits for its pacing key's share
	// of the budget just before its commit, so no delay between planning
	// and committing bunches commits up.
	Ramp throttle.Ramp `json:"ramp,omitempty"`
}

// pacer returns the pacer batch's commit waits for, nil if none.
func (g Guard) pacer(batch []byte) (*throttle.Pacer, error) {
	if g.Ramp.Off() {
		return nil, nil
	}
	key, keys, ok := record.BatchPacing(batch)
	if !ok {
		return nil, nil
	}
	return throttle.SharedPacer(g.Ramp, key, keys)
}

// pace waits for n operations of p's budget (p nil: none) and returns the
// wait.
func pace(ctx context.Context, p *throttle.Pacer, n int) (time.Duration, error) {
	if p == nil {
		return 0, nil
	}
	return p.Wait(ctx, n)
}

// do runs commit under the guard: throttled by th (g.throttle's, or nil),
// retried with backoff; each retry's and each throttled wait is passed to
// onRetry and onThrottled (for transforms.CountRetry and CountThrottled,
// on the bundle's goroutine).
func (g Guard) do(ctx context.Context, th retry.Throttle, commit func(ctx context.Context) error, onRetry, onThrottled func(wait time.Duration)) error {
	_, err := g.Retry.Do(ctx, commit, retry.Hooks{
		Throttle:    th,
		OnRetry:     func(_ error, wait time.Duration) { onRetry(wait) },
		OnThrottled: onThrottled,
	})
	return err
}

// throttle is the process's adaptive throttle for target and these
// settings, nil when off.
func (g Guard) throttle(target string) retry.Throttle {
	if g.AdaptiveOff {
		return nil
	}
	key := fmt.Sprintf("%s k=%g window=%s", target, g.AdaptiveK, g.AdaptiveWindow)
	return throttle.Shared(key, g.AdaptiveK, g.AdaptiveWindow)
}

// commitLog is what every sink's commit records for the bundle's
// goroutine to report: its dead letters and the waits the Guard made it
// take (retry backoffs, adaptive-throttle rejections, the ramp-up's
// budget). The store's own counts sit beside it.
type commitLog struct {
	dead               []string
	retries, throttles []time.Duration
	paced              time.Duration
}

// report emits the dead letters and counts the waits.
func (l *commitLog) report(ctx context.Context, emit func(string)) {
	for _, line := range l.dead {
		emit(line)
	}
	transforms.CountDeadLettered(ctx, int64(len(l.dead)))
	for _, d := range l.retries {
		transforms.CountRetry(ctx, d)
	}
	for _, d := range l.throttles {
		transforms.CountThrottled(ctx, d, true)
	}
	if l.paced > 0 {
		transforms.CountThrottled(ctx, l.paced, false)
	}
}

// reset empties the log, keeping its slices for reuse.
func (l *commitLog) reset() {
	*l = commitLog{dead: l.dead[:0], retries: l.retries[:0], throttles: l.throttles[:0]}
}

// finished holds the outcomes of commits that ran on goroutines of their
// own, until the bundle's goroutine reports them (Beam's emitters and
// metrics belong to it).
type finished[O interface {
	report(ctx context.Context, emit func(string)) error
}] struct {
	mu   sync.Mutex
	done []O
}

// add records a finished commit's outcome.
func (q *finished[O]) add(o O) {
	q.mu.Lock()
	q.done = append(q.done, o)
	q.mu.Unlock()
}

// drop forgets the outcomes not reported (those of a failed bundle).
func (q *finished[O]) drop() {
	q.mu.Lock()
	q.done = nil
	q.mu.Unlock()
}

// report reports the outcomes recorded so far and returns the first error
// among them.
func (q *finished[O]) report(ctx context.Context, emit func(string)) error {
	q.mu.Lock()
	done := q.done
	q.done = nil
	q.mu.Unlock()
	var first error
	for _, o := range done {
		if err := o.report(ctx, emit); err != nil && first == nil {
			first = err
		}
	}
	return first
}
