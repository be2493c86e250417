package storewrite

import (
	"context"
	"time"

	"github.com/rekeyio/rekey/internal/write/attempts"
	"github.com/rekeyio/rekey/internal/write/retry"
	"github.com/rekeyio/rekey/record"
)

// Outcome is what a writer did: plain values, for the caller to report
// (Beam's emitters and metrics belong to a bundle's goroutine, so a sink
// turns an Outcome into emits and counters there). An Outcome belongs to
// one goroutine at a time.
type Outcome struct {
	// Written counts the records the store holds as written, Existing
	// included.
	Written int
	// Deleted counts the keys a writer in ModeDelete deleted (stored or
	// not: a delete of a missing key succeeds); they are not in Written.
	Deleted int
	// Existing counts the records an insert found stored with the very
	// content it was writing (an earlier run or attempt wrote them).
	Existing int
	// Skipped counts the records a conditional commit left unwritten on
	// purpose (a cohort backfill leaves what the application wrote or
	// deleted since); they are not in Written.
	Skipped int
	// DeadLetters are the refused records, as record.DeadLetter JSON
	// lines (stage "write").
	DeadLetters []string
	// Retries are the waits before each retry of a transient error;
	// Throttled the waits after each local rejection by the adaptive
	// throttle.
	Retries, Throttled []time.Duration
	// Splits counts the commits cut in halves to isolate refused records.
	Splits int
	// ClientRetries counts the commit RPCs a client library repeated on
	// its own within one of Retry's attempts (package attempts): the
	// Spanner client re-running an aborted transaction, gax retrying a
	// Commit. Retries are rekey's own.
	ClientRetries int
	// Paced is the time commits waited for the ramp-up's budget (Pacer).
	Paced time.Duration
	// Commits are the commits tried, with their size and time.
	Commits []Commit
}

// Commit is one commit, its retries included.
type Commit struct {
	// Records, Mutations (Spanner's cells; Datastore's entities) and
	// estimated Bytes of the commit.
	Records, Mutations, Bytes int
	// Took is its time, waits for a slot and retries included.
	Took time.Duration
	// OK reports whether it succeeded.
	OK bool
}

// DeadLetter records rec as refused by source with err.
func (o *Outcome) DeadLetter(source string, rec *record.Record, err error) {
	o.DeadLetters = append(o.DeadLetters, record.NewDeadLetter(record.StageWrite, source, rec, err))
}

// Merge adds p to o.
func (o *Outcome) Merge(p Outcome) {
	o.Written += p.Written
	o.Deleted += p.Deleted
	o.Existing += p.Existing
	o.Skipped += p.Skipped
	o.DeadLetters = append(o.DeadLetters, p.DeadLetters...)
	o.Retries = append(o.Retries, p.Retries...)
	o.Throttled = append(o.Throttled, p.Throttled...)
	o.Splits += p.Splits
	o.ClientRetries += p.ClientRetries
	o.Paced += p.Paced
	o.Commits = append(o.Commits, p.Commits...)
}

// Reset empties o, keeping its slices for reuse.
func (o *Outcome) Reset() {
	*o = Outcome{DeadLetters: o.DeadLetters[:0], Retries: o.Retries[:0], Throttled: o.Throttled[:0], Commits: o.Commits[:0]}
}

// Retry calls commit until it succeeds, fails with an error Classify does
// not find Transient, or p's cumulative backoff is spent; th, if not nil,
// is consulted before each attempt and told its outcome (see retry.Hooks).
// The waits are recorded in o.
//
// Each attempt runs under attempts.Watch: the commit RPCs its client
// library sent beyond the first are counted in o.ClientRetries.
func Retry(ctx context.Context, p retry.Policy, th retry.Throttle, o *Outcome, commit func(ctx context.Context) error) error {
	watched := func(ctx context.Context) error {
		actx, sent := attempts.Watch(ctx)
		err := commit(actx)
		if n := sent(); n > 1 {
			o.ClientRetries += int(n - 1)
		}
		return err
	}
	_, err := p.Do(ctx, watched, retry.Hooks{
		Throttle:    th,
		Transient:   func(err error) bool { return Classify(ctx, err) == Transient },
		OnRetry:     func(_ error, wait time.Duration) { o.Retries = append(o.Retries, wait) },
		OnThrottled: func(wait time.Duration) { o.Throttled = append(o.Throttled, wait) },
	})
	return err
}

// Pacer paces a writer's commits under a ramp-up (throttle.Bound): each
// commit carries at most Size records, sized when it is sent, and waits
// for its records' budget right before it goes (after any slot it needs),
// so nothing between planning and committing bunches commits up.
type Pacer interface {
	// Size is the most records one commit may carry now, at most limit.
	Size(limit int) int
	// Wait blocks until n records fit in the budget and spends them.
	Wait(ctx context.Context, n int) (time.Duration, error)
}

// Chunks calls write with consecutive pieces of items: all of them when p
// is nil, else pieces of at most p.Size(len) items, each sized when its
// turn comes. It stops at write's first error.
func Chunks[T any](items []T, p Pacer, write func([]T) error) error {
	for len(items) > 0 {
		n := len(items)
		if p != nil {
			n = max(1, min(p.Size(n), n))
		}
		if err := write(items[:n]); err != nil {
			return err
		}
		items = items[n:]
	}
	return nil
}

// Pace waits for n records of p's budget (p nil: none), recording the
// wait in o. Its error is a *PaceError.
func Pace(ctx context.Context, p Pacer, n int, o *Outcome) error {
	if p == nil {
		return nil
	}
	d, err := p.Wait(ctx, n)
	o.Paced += d
	if err != nil {
		return &PaceError{err}
	}
	return nil
}

// PaceError is a pacer's failure (its lease unreadable, the context
// done): never the records' fault, so Classify finds it Fatal whatever
// status it wraps, and no commit is isolated or dead-lettered over it.
type PaceError struct{ Err error }

func (e *PaceError) Error() string { return "ramp-up: " + e.Err.Error() }
func (e *PaceError) Unwrap() error { return e.Err }
