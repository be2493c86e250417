// Package sink holds rekey's Beam sinks: thin DoFns over the Beam-free
// store writers (internal/store/spannerdb.Writer,
// internal/store/datastoredb.Writer), which decide what one commit holds,
// retry it and isolate a bad record by halves; and the file sinks (JSON
// Lines, entity JSON, Spanner's Avro export), which write one part file
// per bundle and join them once the job ends.
//
// Every database sink takes batches that write planning
// (transforms/writeplan) has already ordered and cut, commits each under
// a Guard (retry policy, adaptive throttle, the job's ramp-up), keeps a
// bounded number of commits in flight, and returns a dead-letter
// collection: a record the store refuses is never dropped. DryRun stands
// in for a sink in a dry run: it counts what would be written, per table
// or kind, and writes nothing.
package sink
