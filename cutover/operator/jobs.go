package operator

import (
	"context"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/migration"
)

// Jobs runs the Beam jobs of cohort operations (pipeline.Runner does).
// Each method builds one job's graph from a resolved migration and runs
// it; the counters of the result are the job's.
type Jobs interface {
	// Name is the runner's name, for messages.
	Name() string
	// Backfill is a runner whose Migrate runs the cohort backfill b of a
	// job instead of the whole migration: the migration restricted to
	// b's cohorts, each record written only where the application has
	// not touched it since its cohort's phase began (phases.Backfill).
	Backfill(b phases.Backfill) migration.Runner
	// Cleanup deletes the source's records of cohorts (the old records
	// of a finished cutover); DescribeDeletes says in one line how those
	// deletes are planned ("" if there is nothing to say).
	Cleanup(ctx context.Context, j *migration.Job, cohorts []cohort.Range) (*migration.Result, error)
	DescribeDeletes(j *migration.Job) string
	// Reverse copies new back to old for b's cohorts (b.Reverse set):
	// the reverse backfill's copy.
	Reverse(ctx context.Context, j *migration.Job, b phases.Backfill) (*migration.Result, error)
	// Load writes the records of files into the migration's stores
	// through the application library, each where its cohort's phase
	// says.
	Load(ctx context.Context, j *migration.Job, f LoadFiles) (*migration.Result, error)
	// Verify compares old and new for v's cohorts and, when v.Repair is
	// set, puts right what differs (see VerifyJob); WriteReport writes
	// a report's lines to path (a local path or one on the runner's
	// file systems, as v.ReportPath).
	Verify(ctx context.Context, j *migration.Job, v VerifyJob) (VerifyFound, *migration.Result, error)
	WriteReport(ctx context.Context, path string, lines []string) error
}

// LoadFiles are the files of a phase-aware load and the migration they
// go into.
type LoadFiles struct {
	// Path, Format (jsonl, csv or avro) and Delimiter are as a file
	// source's.
	Path, Format, Delimiter string
	// Migration names the migration in the phase store.
	Migration string
}
