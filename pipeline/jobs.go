package pipeline

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/progress"
	"github.com/rekeyio/rekey/migration"
)

// Runner runs the jobs of the cohort operations (package operator).
var _ operator.Jobs = Runner{}

// Backfill is r running the cohort backfill b (the Backfill graph) as
// its Migrate.
func (r Runner) Backfill(b phases.Backfill) migration.Runner {
	r.backfill = &b
	return r
}

// Cleanup runs the Cleanup graph of cohorts on r.
func (r Runner) Cleanup(ctx context.Context, j *migration.Job, cohorts []cohort.Range) (*migration.Result, error) {
	return Run(ctx, j, r, Cleanup(cohorts))
}

// DescribeDeletes says how a cleanup's deletes are planned.
func (r Runner) DescribeDeletes(j *migration.Job) string {
	return writes{job: j, ramp: j.Ramp(""), deletes: true}.describe()
}

// Reverse runs the Reverse graph of b on r.
func (r Runner) Reverse(ctx context.Context, j *migration.Job, b phases.Backfill) (*migration.Result, error) {
	return Run(ctx, j, r, Reverse(b))
}

// Load runs the Load graph of f on r.
func (r Runner) Load(ctx context.Context, j *migration.Job, f operator.LoadFiles) (*migration.Result, error) {
	return Run(ctx, j, r, Load(f))
}

// Verify runs the verify job v on r (a repair when v.Repair is set) and
// reads back what it found: the report's tallies, written to
// v.ReportPath, and the differing keys, written beside it and removed
// once read.
func (r Runner) Verify(ctx context.Context, j *migration.Job, v operator.VerifyJob) (operator.VerifyFound, *migration.Result, error) {
	var found operator.VerifyFound
	r.counts = countsCompared
	r.total = func(ctx context.Context) (progress.Total, bool) { return estimateCompared(ctx, j, v.Cohorts) }
	res, err := Run(ctx, j, r, verifyGraph(v))
	if err != nil {
		return found, res, err
	}
	lines, err := readLines(ctx, v.ReportPath)
	if err != nil {
		return found, res, fmt.Errorf("reading the verify report %s: %w", v.ReportPath, err)
	}
	keyLines, err := readLines(ctx, keysPath(v.ReportPath))
	if err != nil {
		return found, res, fmt.Errorf("reading the verify's keys %s: %w", keysPath(v.ReportPath), err)
	}
	for _, l := range lines {
		var c operator.VerifyCohort
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			return found, res, fmt.Errorf("verify report %s: %w", v.ReportPath, err)
		}
		found.Cohorts = append(found.Cohorts, c)
	}
	for _, l := range keyLines {
		var k operator.KeyLine
		if err := json.Unmarshal([]byte(l), &k); err != nil {
			return found, res, fmt.Errorf("verify keys %s: %w", keysPath(v.ReportPath), err)
		}
		found.Keys = append(found.Keys, k)
	}
	removeFile(ctx, keysPath(v.ReportPath))
	return found, res, nil
}

// WriteReport replaces the file at path with lines (local or on a Beam
// file system).
func (r Runner) WriteReport(ctx context.Context, path string, lines []string) error {
	return writeLines(ctx, path, lines)
}
