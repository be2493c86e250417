package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/rekeyio/rekey/internal/retry"
	"github.com/rekeyio/rekey/internal/throttle"
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
}

// do runs commit under the guard: throttled by th (g.throttle's, or nil),
// retried with backoff, counted (retried, backoff_ms, throttled_ms,
// throttle_rejected).
func (g Guard) do(ctx context.Context, th retry.Throttle, commit func(ctx context.Context) error) error {
	_, err := g.Retry.Do(ctx, commit, retry.Hooks{
		Throttle:    th,
		OnRetry:     func(_ error, wait time.Duration) { transforms.CountRetry(ctx, wait) },
		OnThrottled: func(wait time.Duration) { transforms.CountThrottled(ctx, wait, true) },
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
