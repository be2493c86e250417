// Package source holds rekey's Beam sources. Each reads one kind of
// input into batches of records (record.Batch) and sends what it
// cannot read to a dead-letter collection, one JSON line per record with
// where it came from (file:line, table and key) and why:
//
//   - Files: JSON Lines, CSV, Avro (Spanner's export format too) and
//     Datastore entity JSON, from local paths or any Beam file system
//     (gs://), each file read in byte ranges in parallel, or in
//     interleaved ranges for write planning without a global shuffle
//     (FilesConfig.Interleave);
//   - Spanner: a table's rows through partitioned queries at one read
//     time, with a filter pushed into the query (a cohort's rows, a
//     sample);
//   - Datastore: a kind's entities in key ranges split on __scatter__, at
//     one read time; DatastoreSample reads a sample of its keys;
//   - DeadLetters: a dead-letter file, for a redrive.
//
// The Peek, Count and Estimate functions read a little of the same
// inputs outside a pipeline (a dry run's sample, a progress total); they
// run in the launching process, which a runner whose workers are
// elsewhere may not allow for local paths (see pipeline's CheckFiles).
//
// A new file format is a reader beside csvrows.go and avro.go, chosen by
// readFilesFn.readFile in files.go.
package source
