// Package operator runs the operator's side of a staged cutover: the
// cohort operations (backfill, verify, repair, reverse backfill, cleanup,
// phase-aware load). Each one checks that the migration allows it, reads
// and moves the cohorts' phases in the phase store (package
// cutover/phases),
// records the audit, and asks a Jobs for the one Beam job it needs; it
// returns what happened and reports progress as migration.Notes. It
// imports no Beam: pipeline.Runner implements Jobs (the graphs), and the
// command line (cmd/rekey) prints the notes and the results.
//
// A new cohort operation goes here, as a function of the same shape:
//
//	job, res, audit, err := operator.Backfill(ctx, cfg, operator.CohortOptions{...}, jobs)
//
// with its Beam graph, if it needs one, in package pipeline behind a new
// method of Jobs, and its DoFns in package transforms/staged.
//
// Why the order of each operation is safe (a backfill after the dual-write
// hold, a reverse backfill after read_new's hold, a repair conditional on
// the touched marks as of its start less the skew) is argued in package
// phases' doc (cutover/phases), whose protocol the application's library
// shares.
//
// The jobs' conditional commits are here too (SpannerBackfill,
// DatastoreBackfill, the repairs' deletes, SpannerReverse,
// DatastoreReverse, DatastoreFromSpannerReverse): the Beam sinks run them
// on the workers, each commit reading the touched marks (or, for a
// reverse backfill, new's records) inside the transaction that writes.
// They are the operator's, not the application's: package cutover's
// exported API is the library an application links, and holds none of
// the store adapters' types, nor the phase store's operator side
// (package phases).
package operator
