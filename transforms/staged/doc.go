// Package staged holds the DoFns of the staged cutover's jobs, which
// package pipeline wires into graphs for the cohort operations (package
// cutover/operator):
//
//   - verify (and repair): ExpectFn maps old records through the
//     migration's rewrite to the records new should hold, NewSideFn keys
//     new's records the same way, CompareFn judges each joined key
//     (matching, missing, extra, mismatched, routed around) and reads
//     findings again before they count (recheck.go), CohortTallyFn and
//     ReportLineFn fold the tallies into one report line per cohort;
//   - repair: RepairCompareFn is CompareFn with a third output, what
//     RepairPick puts right of the differences left after the recheck;
//     RepairPutFn splits it, RepairDeleteFn deletes extra records
//     conditionally on the touched marks, CountWrites counts the writes;
//   - reverse backfill: InvertFn turns new records back into old ones;
//   - phase-aware load: LoadFn writes each record through the application
//     library, where its cohort's phase says.
//
// Each DoFn carries its settings as plain serialisable fields (the
// migration's rewrite as rekeyer.Text) and holds no state between
// bundles but its clients, so any worker process can run it.
package staged
