// Package spannerdb is rekey's view of a Cloud Spanner (GoogleSQL dialect)
// table: its schema read from INFORMATION_SCHEMA, DDL to create a target
// table from a source schema with a rewritten key, the explicit
// conversions between Spanner rows and record.Record (RowToRecord) and
// back to mutations (MutationFor), and the Writer sinks and applications
// write with. Nothing here imports Beam.
//
// # Writing
//
// A Writer converts records into mutations of its table and commits them
// in batches bounded by Spanner's limits (MaxCommitMutations cells,
// MaxCommitBytes) and its own, lower bounds (DefaultMaxMutations,
// DefaultMaxBytes, DefaultMaxRows, as Beam Java's SpannerIO). Every commit
// goes through the retry policy and the adaptive throttle (retry.Policy,
// retry.Throttle: the same as the Datastore writer's), and a failed commit
// is handled by internal/write/storewrite's one error table and its halving:
// refused for its rows, the batch is committed in halves, recursively, so
// the good rows land and each refused row becomes a dead letter; refused
// for access, every row is dead-lettered; anything else (transient errors
// whose retries are spent, a missing table, a cancelled context) is
// returned. In insert mode a commit that meets existing rows reads them
// back at once: a row stored with exactly the values being written counts
// as written (Existing), one with other values is dead-lettered, and the
// rest is committed again. In delete mode each record becomes a Delete of
// its primary key (a cohort cleanup's deletes of old rows), bounded and
// handled as writes are; a key not stored is no error. Upserts and deletes
// commit with ApplyAtLeastOnce (a replay does the same again), inserts
// with Apply's replay protection (ClientCommit). Everything a write does
// (written counts, dead letters, retry and throttle waits, splits, commit
// sizes and times) is returned as a storewrite.Outcome, never emitted.
//
// # Concurrency
//
// Add, Cut and Reset change the Writer's buffer and belong to one
// goroutine. WriteBatch reads only the Writer's configuration and works
// on the Batch it is given (Cut hands each batch out once, and the buffer
// never shares its array with a batch handed out), recording into an
// Outcome of its own that it returns; Commit and Read must be safe for
// concurrent use (a spanner.Client is), and so must Throttle
// (throttle.Adaptive is). So any number of WriteBatch calls may run at
// once, on goroutines of their own, while the owner goes on adding rows:
// this is how the Spanner sink keeps up to 4 commits of a bundle in
// flight while its goroutine converts the next batches. The bound on
// commits in flight across goroutines is Slots, a semaphore each commit
// holds from before its first attempt to after its last (the wait for it
// is part of no attempt's deadline): the sink gives every Writer of a
// worker process writing to one database the same semaphore of
// write.parallelism slots, so at most that many commits run there at
// once, whatever the number of bundles. Each Outcome is read by the
// goroutine that waits for its WriteBatch (the sink hands it over through
// a mutex-guarded queue and reports it on the bundle's goroutine, where
// Beam's emitters and metrics belong), so no Outcome is shared while it is
// written. Rows of batches in flight together land in no particular order,
// as the commits of different workers do; the rows of one batch land in
// one commit, or in halves in order.
package spannerdb
