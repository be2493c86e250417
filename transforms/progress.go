package transforms

import (
	"context"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// The Count helpers add to rekey's Beam counters (transforms.go); the
// runner aggregates them per step and reports them while a job runs (prism
// and other portable runners, through the job service) and at its end.
//
// A context may also carry a count observer (ObserveCounts): it is told
// every count made with that context or one derived from it. There is no
// process-wide tally: an observer belongs to whoever set up the context,
// typically one job (see package pipeline, which uses it on the direct
// runner).

// ObserveCounts returns a context whose counts are also passed to observe,
// with the counter's name (as in transforms.go) and the amount. observe may
// be called from several goroutines at once.
func ObserveCounts(ctx context.Context, observe func(name string, n int64)) context.Context {
	return context.WithValue(ctx, observerKey{}, observe)
}

type observerKey struct{}

func count(ctx context.Context, c beam.Counter, name string, n int64) {
	c.Inc(ctx, n)
	if observe, ok := ctx.Value(observerKey{}).(func(string, int64)); ok {
		observe(name, n)
	}
}

// CountRead counts records taken from the input, dead-lettered or not
// (see Read).
func CountRead(ctx context.Context, n int64) { count(ctx, Read, "read", n) }

// CountRewritten counts rewritten records.
func CountRewritten(ctx context.Context, n int64) { count(ctx, Rewritten, "rewritten", n) }

// CountWritten counts written records.
func CountWritten(ctx context.Context, n int64) { count(ctx, Written, "written", n) }

// CountDeadLettered counts dead-lettered records.
func CountDeadLettered(ctx context.Context, n int64) { count(ctx, DeadLettered, "dead_lettered", n) }

// CountRetry counts a commit attempt about to be retried after waiting.
func CountRetry(ctx context.Context, wait time.Duration) {
	count(ctx, Retried, "retried", 1)
	count(ctx, BackoffMillis, "backoff_ms", wait.Milliseconds())
}

// CountThrottled counts time spent waiting for a write budget; rejected
// says the adaptive throttle held a commit back.
func CountThrottled(ctx context.Context, wait time.Duration, rejected bool) {
	count(ctx, ThrottledMillis, "throttled_ms", wait.Milliseconds())
	if rejected {
		count(ctx, ThrottleRejected, "throttle_rejected", 1)
	}
}

// CountClientRetries counts commit RPCs a client library repeated on its
// own (storewrite.Outcome.ClientRetries).
func CountClientRetries(ctx context.Context, n int64) { count(ctx, ClientRetried, "client_retried", n) }

// CountSplit counts a failed commit cut in halves.
func CountSplit(ctx context.Context) { count(ctx, Split, "split", 1) }

// CountUnmapped counts key values pointing at a migrated kind through a
// property with no mapping (rekeyer.Rekeyer.Unmapped).
func CountUnmapped(ctx context.Context, n int64) {
	count(ctx, ReferencesUnmapped, "references_unmapped", n)
}

// CountCohortOther counts records of other cohorts left out of a cohort
// backfill.
func CountCohortOther(ctx context.Context, n int64) { count(ctx, CohortOther, "cohort_other", n) }

// CountDeleted counts deleted keys.
func CountDeleted(ctx context.Context, n int64) { count(ctx, Deleted, "deleted", n) }

// CountBackfillSkipped counts records a cohort backfill left as the
// application made them.
func CountBackfillSkipped(ctx context.Context, n int64) {
	count(ctx, BackfillSkipped, "backfill_skipped", n)
}
