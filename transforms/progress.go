package transforms

import (
	"context"
	"sync/atomic"
)

// Progress counts records in this process, for the live progress line of
// local runners (prism and direct run the workers in the launching process).
// On remote runners it stays zero there; Beam counters are the record.
var Progress struct {
	Read, Written, DeadLettered atomic.Int64
}

// CountRead, CountWritten and CountDeadLettered add n to both the Beam
// counter and this process's progress.
func CountRead(ctx context.Context, n int64) {
	Read.Inc(ctx, n)
	Progress.Read.Add(n)
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
