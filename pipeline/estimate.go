package pipeline

import (
	"context"
	"time"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/internal/progress"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/transforms/source"
)

// estimateTimeout bounds how long the total of a run's progress is
// looked for.
const estimateTimeout = 30 * time.Second

// estimateTotal estimates the records a migration reads, for its
// progress meter: a redrive, the dead-letter file's lines; a Spanner
// source, a COUNT(*) of the main table (with the filter) and of each
// interleaved child; a Datastore source, the count of the kind and of
// each descendant kind (source.CountDatastore); JSON Lines, CSV and
// entity JSON files, from their sizes (source.EstimateLines); Avro files,
// from their sizes and their first blocks' counts (source.EstimateAvro).
// A dry run (which writes nothing to count against) and any failure give
// none: the meter then shows counts and rate only. A count
// taken beside the run is an estimate (the source may change while it is
// read), unless a file was read whole.
func estimateTotal(ctx context.Context, j *migration.Job) (progress.Total, bool) {
	if j.DryRun || j.TranslateOnly {
		return progress.Total{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, estimateTimeout)
	defer cancel()
	if j.RedriveFrom != "" {
		n, exact, ok, err := source.EstimateLines(ctx, source.FilesConfig{Path: j.RedriveFrom, Format: "jsonl"})
		return progress.Total{N: n, Exact: exact, From: "the dead-letter file's size"}, ok && err == nil
	}
	k, err := sourceOf(j)
	if err != nil {
		return progress.Total{}, false
	}
	return k.estimate(ctx, j)
}

// estimateCompared estimates the records a verify of cohorts compares,
// for its progress meter: the old records of the cohorts — a Spanner
// source's COUNT(*) with the cohort filter where its query can tell the
// cohorts; otherwise the source's count (as estimateTotal) times the
// cohorts' share of the buckets (users spread evenly over the buckets).
// Records extra in new come on top; the meter raises an estimate the run
// outgrows.
func estimateCompared(ctx context.Context, j *migration.Job, cohorts []cohort.Range) (progress.Total, bool) {
	cohorts = cohort.Merge(cohorts)
	if c, ok := sources[j.Source.Type].(cohortCounter); ok {
		ctx, cancel := context.WithTimeout(ctx, estimateTimeout)
		defer cancel()
		if t, ok := c.countCohorts(ctx, j, cohorts); ok {
			return t, true
		}
	}
	jj := *j
	jj.DryRun, jj.TranslateOnly, jj.RedriveFrom = false, false, ""
	t, ok := estimateTotal(ctx, &jj)
	if !ok {
		return t, false
	}
	if b := j.Cohort.Buckets; b > 0 {
		if n := cohort.Count(cohorts); n < b {
			t.N = (t.N*int64(n) + int64(b) - 1) / int64(b)
			t.From += ", times the cohorts' share"
			t.Exact = false
		}
	}
	return t, true
}
