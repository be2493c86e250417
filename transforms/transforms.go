// Package transforms holds rekey's Beam transforms: sources (package
// source), sinks (package sink) and the stages between them. Every stage
// passes records in batches (record.Batch: one element holds many
// records, so Beam's per-element cost is paid once per batch, and fused
// stages hand them on without encoding them) and
// sends what it cannot handle to a dead-letter PCollection of JSON lines
// (record.DeadLetter) instead of failing the job or dropping it.
package transforms

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/migration"
	_ "github.com/rekeyio/rekey/transforms/batchcoder" // record.Batch's coder, for every stage
)

// BatchSize is how many records a source or stage puts in one batch
// element: large enough to amortise Beam's per-element cost, small enough
// to keep a worker's memory flat.
const BatchSize = 500

// Counters every run reports (namespace "rekey"), named as migration
// names them for the Result's Counters.
var (
	// Read counts every record a source took from its input (a line, a
	// row, an entity, a dead letter of a redrive), the ones it
	// dead-lettered too: read = written + dead_lettered, plus the records
	// left out on purpose (CohortOther, BackfillSkipped).
	Read         = beam.NewCounter("rekey", migration.Read)
	Rewritten    = beam.NewCounter("rekey", migration.Rewritten)
	Written      = beam.NewCounter("rekey", migration.Written)
	DeadLettered = beam.NewCounter("rekey", migration.DeadLettered)
	// Retried counts commit attempts rekey repeated after a transient
	// error (its write.retry policy); the client libraries' own retries
	// inside one attempt are not in it, but in ClientRetried.
	Retried = beam.NewCounter("rekey", migration.Retried)
	// ClientRetried counts the commit RPCs the Spanner and Datastore
	// client libraries repeated on their own (an aborted transaction run
	// again, a Commit retried by gax), seen on the sinks' connections
	// (package attempts).
	ClientRetried = beam.NewCounter("rekey", migration.ClientRetried)
	// BackoffMillis is the time commits waited before being retried.
	BackoffMillis = beam.NewCounter("rekey", "backoff_ms")
	// ThrottledMillis is the time writes waited for the ramp-up's budget
	// or after a local rejection by the adaptive throttle.
	ThrottledMillis = beam.NewCounter("rekey", "throttled_ms")
	// ThrottleRejected counts commits the adaptive throttle held back
	// (each waited and asked again).
	ThrottleRejected = beam.NewCounter("rekey", "throttle_rejected")
	// Split counts failed commits cut in halves to isolate refused
	// records.
	Split = beam.NewCounter("rekey", "split")
	// ReferencesUnmapped counts key values that point at a migrated kind
	// through a property neither references nor references_to maps: they
	// keep pointing at the old keys.
	ReferencesUnmapped = beam.NewCounter("rekey", migration.ReferencesUnmapped)
	// CohortOther counts records a cohort backfill read and left out: their
	// user is in another cohort.
	CohortOther = beam.NewCounter("rekey", migration.CohortOther)
	// BackfillSkipped counts records a cohort backfill did not write because
	// the application wrote or deleted them after the backfill read them.
	BackfillSkipped = beam.NewCounter("rekey", migration.BackfillSkipped)
	// Deleted counts the keys a sink in delete mode deleted (a cohort
	// cleanup's old records).
	Deleted = beam.NewCounter("rekey", migration.Deleted)
)
