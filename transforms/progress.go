package transforms

import (
	"context"
	"sync/atomic"
	"time"
)

// Progress counts records in this process. The local runners (prism,
// direct) run their workers in the launching process, so these are exact
// there: they feed the live progress line, and pipeline.Run reports them
// for local runners because the direct runner keys metrics by DoFn type and
// drops the counts of a second step of the same type. On remote runners
// they stay zero here; Beam's counters are the record.
var Progress struct {
	Read, Rewritten, Written, DeadLettered, Retried         atomic.Int64
	BackoffMillis, ThrottledMillis, ThrottleRejected, Split atomic.Int64
}

// CountRead adds n to the read counter and this process's progress.
func CountRead(ctx context.Context, n int64) {
	Read.Inc(ctx, n)
	Progress.Read.Add(n)
}

// CountRewritten counts rewritten records.
func CountRewritten(ctx context.Context, n int64) {
	Rewritten.Inc(ctx, n)
	Progress.Rewritten.Add(n)
}

// CountWritten counts written records.
func CountWritten(ctx context.Context, n int64) {
	Written.Inc(ctx, n)
	Progress.Written.Add(n)
}

// CountDeadLettered counts dead-lettered records.
func CountDeadLettered(ctx context.Context, n int64) {
	DeadLettered.Inc(ctx, n)
	Progress.DeadLettered.Add(n)
}

// CountRetry counts a commit attempt about to be retried after waiting.
func CountRetry(ctx context.Context, wait time.Duration) {
	Retried.Inc(ctx, 1)
	Progress.Retried.Add(1)
	ms := wait.Milliseconds()
	BackoffMillis.Inc(ctx, ms)
	Progress.BackoffMillis.Add(ms)
}

// CountThrottled counts time spent waiting for a write budget; rejected
// says the adaptive throttle held a commit back.
func CountThrottled(ctx context.Context, wait time.Duration, rejected bool) {
	ms := wait.Milliseconds()
	ThrottledMillis.Inc(ctx, ms)
	Progress.ThrottledMillis.Add(ms)
	if rejected {
		ThrottleRejected.Inc(ctx, 1)
		Progress.ThrottleRejected.Add(1)
	}
}

// CountSplit counts a failed commit cut in halves.
func CountSplit(ctx context.Context) {
	Split.Inc(ctx, 1)
	Progress.Split.Add(1)
}

// Snapshot returns the process's counts by counter name.
func Snapshot() map[string]int64 {
	return map[string]int64{
		"read": Progress.Read.Load(), "rewritten": Progress.Rewritten.Load(), "written": Progress.Written.Load(),
		"dead_lettered": Progress.DeadLettered.Load(), "retried": Progress.Retried.Load(),
		"backoff_ms": Progress.BackoffMillis.Load(), "throttled_ms": Progress.ThrottledMillis.Load(),
		"throttle_rejected": Progress.ThrottleRejected.Load(), "split": Progress.Split.Load(),
	}
}
