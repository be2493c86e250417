// Package retry decides which store errors are worth retrying and retries
// them with exponential backoff and jitter, within a per-attempt deadline
// and a cumulative backoff limit.
//
// Retried (transient): gRPC ABORTED, UNAVAILABLE, RESOURCE_EXHAUSTED,
// DEADLINE_EXCEEDED (and INTERNAL, which Spanner documents as retryable for
// commits); HTTP 408, 429 and 5xx from file systems. Never retried (the
// record or the request is wrong, or access is missing): INVALID_ARGUMENT,
// FAILED_PRECONDITION, PERMISSION_DENIED, UNAUTHENTICATED, ALREADY_EXISTS,
// NOT_FOUND, OUT_OF_RANGE — those go to the dead-letter output (or fail the
// job, for access errors) at once.
package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Class is what to do with an error.
type Class int

// Classes.
const (
	Permanent Class = iota // do not retry
	Transient              // retry with backoff
)

// Classify returns whether err is worth retrying.
func Classify(err error) Class {
	if err == nil {
		return Permanent
	}
	if errors.Is(err, context.Canceled) {
		return Permanent
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Transient
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		switch {
		case ge.Code == 408, ge.Code == 429, ge.Code >= 500:
			return Transient
		}
		return Permanent
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.Aborted, codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded, codes.Internal, codes.Unknown:
			return Transient
		}
		return Permanent
	}
	// Wrapped gRPC errors (the Spanner client wraps its own).
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return Classify(se.GRPCStatus().Err())
	}
	return Permanent
}

// Policy is an exponential backoff with full jitter. Defaults (zero
// fields): first wait 1 s, doubling, at most 60 s between attempts, each
// attempt given 15 s (Beam Java SpannerIO's commit deadline), and 15
// minutes of cumulative backoff before giving up (SpannerIO's limit).
type Policy struct {
	Initial       time.Duration `json:"initial,omitempty"`
	Max           time.Duration `json:"max,omitempty"`
	Multiplier    float64       `json:"multiplier,omitempty"`
	Attempt       time.Duration `json:"attempt,omitempty"`        // deadline of one attempt
	MaxCumulative time.Duration `json:"max_cumulative,omitempty"` // total backoff before giving up

	rnd   func() float64
	sleep func(context.Context, time.Duration) error
}

// Defaults.
const (
	DefaultInitial       = time.Second
	DefaultMax           = 60 * time.Second
	DefaultAttempt       = 15 * time.Second
	DefaultMaxCumulative = 15 * time.Minute
)

// WithDefaults fills in the fields left zero.
func (p Policy) WithDefaults() Policy {
	if p.Initial <= 0 {
		p.Initial = DefaultInitial
	}
	if p.Max <= 0 {
		p.Max = DefaultMax
	}
	if p.Multiplier < 1 {
		p.Multiplier = 2
	}
	if p.Attempt <= 0 {
		p.Attempt = DefaultAttempt
	}
	if p.MaxCumulative <= 0 {
		p.MaxCumulative = DefaultMaxCumulative
	}
	if p.rnd == nil {
		p.rnd = rand.Float64
	}
	if p.sleep == nil {
		p.sleep = Sleep
	}
	return p
}

// Sleep waits d, or until ctx is done (returning its error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Throttle is a client-side throttle consulted before each attempt, such
// as throttle.Adaptive.
type Throttle interface {
	// Allow decides whether to send a request now.
	Allow() bool
	// Record counts a request sent and whether the store accepted it.
	Record(accepted bool)
}

// Hooks adapt one Do call; every field is optional.
type Hooks struct {
	// Throttle may reject an attempt locally, before it is sent: the call
	// then waits (a jittered Initial) and asks again. Local rejections do
	// not spend the cumulative backoff. Every attempt sent is recorded:
	// accepted unless it failed with a transient error (the store's way of
	// saying it is overloaded or unreachable).
	Throttle Throttle
	// Transient replaces Classify to decide which errors are retried.
	Transient func(error) bool
	// OnRetry is called before each retry with the error and the wait.
	OnRetry func(err error, wait time.Duration)
	// OnThrottled is called for each local rejection with its wait.
	OnThrottled func(wait time.Duration)
}

// Do calls f until it succeeds, fails permanently, or the cumulative
// backoff is spent. Each attempt gets its own deadline (Attempt). Do
// returns the number of attempts sent and the last error.
func (p Policy) Do(ctx context.Context, f func(ctx context.Context) error, h Hooks) (int, error) {
	p = p.WithDefaults()
	transient := h.Transient
	if transient == nil {
		transient = func(err error) bool { return Classify(err) == Transient }
	}
	wait := p.Initial
	var slept time.Duration
	attempts := 0
	for {
		if h.Throttle != nil && !h.Throttle.Allow() {
			d := time.Duration((0.5 + p.rnd()) * float64(p.Initial))
			if h.OnThrottled != nil {
				h.OnThrottled(d)
			}
			if err := p.sleep(ctx, d); err != nil {
				return attempts, fmt.Errorf("throttled locally: %w", err)
			}
			continue
		}
		attempts++
		actx, cancel := context.WithTimeout(ctx, p.Attempt)
		err := f(actx)
		cancel()
		if err == nil {
			if h.Throttle != nil {
				h.Throttle.Record(true)
			}
			return attempts, nil
		}
		isTransient := ctx.Err() == nil && transient(err)
		if h.Throttle != nil {
			h.Throttle.Record(!isTransient)
		}
		if !isTransient {
			return attempts, err
		}
		d := time.Duration(p.rnd() * float64(wait)) // full jitter
		if slept+d > p.MaxCumulative {
			return attempts, fmt.Errorf("gave up after %d attempts and %s of backoff: %w", attempts, slept.Round(time.Millisecond), err)
		}
		if h.OnRetry != nil {
			h.OnRetry(err, d)
		}
		if serr := p.sleep(ctx, d); serr != nil {
			return attempts, fmt.Errorf("%w (while waiting to retry after: %v)", serr, err)
		}
		slept += d
		wait = min(time.Duration(float64(wait)*p.Multiplier), p.Max)
	}
}
