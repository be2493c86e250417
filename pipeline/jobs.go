package pipeline

import (
	"context"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/migration"
)

// Runner runs the jobs of the cohort operations (package operator).
var _ operator.Jobs = Runner{}

// Backfill is r running the cohort backfill b (the Backfill graph) as
// its Migrate.
func (r Runner) Backfill(b cutover.Backfill) migration.Runner {
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
func (r Runner) Reverse(ctx context.Context, j *migration.Job, b cutover.Backfill) (*migration.Result, error) {
	return Run(ctx, j, r, Reverse(b))
}

// Load runs the Load graph of f on r.
func (r Runner) Load(ctx context.Context, j *migration.Job, f operator.LoadFiles) (*migration.Result, error) {
	return Run(ctx, j, r, Load(f))
}
