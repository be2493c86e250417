package storewrite

import (
	"context"
	"time"

	"github.com/rekeyio/rekey/internal/retry"
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
	// Existing counts the records an insert found stored with the very
	// content it was writing (an earlier run or attempt wrote them).
	Existing int
	// DeadLetters are the refused records, as record.DeadLetter JSON
	// lines (stage "write").
	DeadLetters []string
	// Retries are the waits before each retry of a transient error;
	// Throttled the waits after each local rejection by the adaptive
	// throttle.
	Retries, Throttled []time.Duration
	// Splits counts the commits cut in halves to isolate refused records.
	Splits int
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
	o.Existing += p.Existing
	o.DeadLetters = append(o.DeadLetters, p.DeadLetters...)
	o.Retries = append(o.Retries, p.Retries...)
	o.Throttled = append(o.Throttled, p.Throttled...)
	o.Splits += p.Splits
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
func Retry(ctx context.Context, p retry.Policy, th retry.Throttle, o *Outcome, commit func(ctx context.Context) error) error {
	_, err := p.Do(ctx, commit, retry.Hooks{
		Throttle:    th,
		Transient:   func(err error) bool { return Classify(ctx, err) == Transient },
		OnRetry:     func(_ error, wait time.Duration) { o.Retries = append(o.Retries, wait) },
		OnThrottled: func(wait time.Duration) { o.Throttled = append(o.Throttled, wait) },
	})
	return err
}
