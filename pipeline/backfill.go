package pipeline

import (
	"fmt"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/rewrite"
	"github.com/rekeyio/rekey/transforms"
)

// Backfill returns the graph of a cohort backfill: Migrate restricted to
// the records of b's cohorts (a Spanner source filters in its query, the
// cohort function being SQL; every source is filtered again as it is
// read), each written only where the application has not touched it
// since its cohort's phase began (phases.Backfill), so a backfill
// neither overwrites a newer dual write nor brings back a deleted record.
// operator.CheckBackfill says which jobs can be backfilled.
func Backfill(b phases.Backfill) Graph {
	return func(s beam.Scope, j *migration.Job) error {
		if err := operator.CheckBackfill(j); err != nil {
			return err
		}
		return migrate(s, j, &b)
	}
}

// selectCohorts keeps the records of cohorts (as read from the source,
// before the rewrite).
func selectCohorts(s beam.Scope, j *migration.Job, cohorts []cohort.Range, batches beam.PCollection) (kept, dead beam.PCollection) {
	return transforms.Cohorts(s, transforms.CohortSelection{User: j.Cohort.User, Buckets: j.Cohort.Buckets, Cohorts: cohort.Format(cohorts)}, batches)
}

// cohortFilter is the Spanner SQL condition that pushes cohorts into the
// source's query, "" when the user id is not a column of the source table
// of a type with a SQL expression (then the records are filtered as they
// are read).
func cohortFilter(j *migration.Job, cohorts []cohort.Range) string {
	u, ok, err := j.Cohort.UserSpec()
	if err != nil || !ok || u.From != cohort.FromField || j.Spanner == nil || j.Spanner.Source == nil {
		return ""
	}
	col := j.Spanner.Source.Column(u.Name)
	if col == nil {
		return ""
	}
	ct, err := spannerdb.ParseColumnType(col.Type)
	if err != nil || ct.Array {
		return ""
	}
	t, err := rewrite.ParseType(ct.Base)
	if err != nil {
		return ""
	}
	expr, err := cohort.SQLExpr(u, t)
	if err != nil {
		return ""
	}
	c := cohort.SQL(expr, j.Cohort.Buckets)
	var ors []string
	for _, r := range cohort.Merge(cohorts) {
		if r.First == r.Last {
			ors = append(ors, fmt.Sprintf("%s = %d", c, r.First))
		} else {
			ors = append(ors, fmt.Sprintf("%s BETWEEN %d AND %d", c, r.First, r.Last))
		}
	}
	return strings.Join(ors, " OR ")
}

// andFilter joins two SQL conditions, either of which may be empty.
func andFilter(a, b string) string {
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return "(" + a + ") AND (" + b + ")"
}
