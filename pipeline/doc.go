// Package pipeline builds rekey's Beam graphs from a resolved
// migration.Job and runs them: Migrate reads the source, rewrites every
// record's key and writes the target, with a dead-letter branch at every
// step; Backfill does so for some cohorts of a staged cutover, and Cleanup
// deletes the old records of cohorts that are done; Reverse, Load and
// Verify are the other cohort operations' jobs. Run runs any such graph on
// a Beam runner; Runner plugs Migrate into migration.Run and the cohort
// operations' jobs into package operator (operator.Jobs), which checks,
// moves the phases and keeps the audit around them.
//
// # Counters and progress
//
// The stages count with the helpers of package transforms (CountRead,
// CountWritten, ...), which add to Beam counters of namespace "rekey".
// There is no process-wide tally: a job's counts are what its runner
// reports for it, so two jobs in one process (tests, the demo, a verify
// job next to a migration) never see each other's counts.
//
//   - prism and universal: Run submits the job to the job service itself
//     (as Beam's prism and universal runners do; for prism without
//     --endpoint, to an in-process prism job server) and keeps the job's
//     id. Every second the progress line reads the job's metrics from the
//     job service (GetJobMetrics): committed counts of finished bundles,
//     attempted ones of running bundles, the larger of the two per step.
//     At the end Result.Counters holds the committed counts. This works
//     with any portable runner (prism as a job server, Flink, Spark). A
//     bundle's counts made in its FinishBundle show once the bundle ends:
//     the Go SDK answers no progress request while a bundle finishes.
//   - dataflow: the counts come from the job's metrics at the end
//     (PipelineResult.Metrics); the Dataflow console shows them live. The
//     progress writer gets one line saying so.
//   - direct: the runner keys metrics by DoFn type instead of by step, so
//     of two steps using one DoFn type only one step's counter reaches
//     its results (still so in Beam 2.77; see
//     TestDirectRunnerKeysMetricsByDoFnType). Run therefore gives the
//     job's context a tally of its own (transforms.ObserveCounts); the
//     progress line and the rekey counts of Result.Counters come from it,
//     the other counters from the runner's metrics (where the collapse
//     remains).
//
// Why the direct tally is exact and belongs to one job: every Count helper
// adds the same amount to the Beam counter and to the observer of its
// context. The direct runner executes the whole pipeline in the calling
// process with contexts derived from the one passed to beam.Run (the
// plan's Execute, then each DoFn's bundle context), so every count of the
// job, and only of that job, reaches the tally Run created for it; a
// second job, concurrent or not, has another context and another tally.
// The direct runner does not retry bundles (a failed bundle fails the
// job), so there is no attempted count to tell from a committed one.
package pipeline
