package transforms

import (
	"context"
	"sync/atomic"
)

// Progress counts records in this process. The local runners (prism,
// direct) run their workers in the launching process, so these are exact
// there: they feed the live progress line, and pipeline.Run reports them
// for local runners because the direct runner keys metrics by DoFn type and
// drops the counts of a second step of the same type. On remote runners
// they stay zero here; Beam's counters are the record.
var Progress struct {
	Read, Rewritten, Written, DeadLettered, Retried atomic.Int64
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

// CountRetried counts retried writes.
func CountRetried(ctx context.Context, n int64) {
	Retried.Inc(ctx, n)
	Progress.Retried.Add(n)
}

// Snapshot returns the process's counts by counter name.
func Snapshot() map[string]int64 {
	return map[string]int64{
		"read": Progress.Read.Load(), "rewritten": Progress.Rewritten.Load(), "written": Progress.Written.Load(),
		"dead_lettered": Progress.DeadLettered.Load(), "retried": Progress.Retried.Load(),
	}
}
