package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/transforms"
	"github.com/rekeyio/rekey/transforms/sink"
	"github.com/rekeyio/rekey/transforms/staged"
)

// verifyGraph returns the graph of a verify job (and a repair's, with
// v.Repair set).
func verifyGraph(v operator.VerifyJob) Graph {
	return func(s beam.Scope, j *migration.Job) error {
		if err := operator.CheckVerify(j); err != nil {
			return err
		}
		if v.ReportPath == "" {
			return errors.New("verify: no report path")
		}
		b := &phases.Backfill{Spans: nil}
		for _, r := range cohort.Merge(v.Cohorts) {
			b.Spans = append(b.Spans, phases.BackfillSpan{First: r.First, Last: r.Last})
		}
		oldBatches, deads, err := readSource(s.Scope("old"), j, readOptions{cohorts: b.Cohorts()})
		if err != nil {
			return err
		}
		oldBatches, cohortDead := selectCohorts(s.Scope("old"), j, b.Cohorts(), oldBatches)
		deads = append(deads, cohortDead)
		spec := j.Spec.Text()
		sel := transforms.CohortSelection{User: j.Cohort.User, Buckets: j.Cohort.Buckets, Cohorts: cohort.Format(b.Cohorts())}
		side := staged.Side{Store: j.Spec.TargetStore, Sel: sel}
		if j.Spanner != nil && len(j.Spanner.Targets) > 0 {
			side.Table, side.Children = j.Spanner.Targets[0], j.Spanner.Targets[1:]
		}
		if j.Spanner != nil {
			side.SourceTable = j.Spanner.Source
			for _, name := range slices.Sorted(maps.Keys(j.Spanner.Children)) {
				side.SourceChildren = append(side.SourceChildren, j.Spanner.Children[name])
			}
		}
		expected, rewriteDead := beam.ParDo2(s.Scope("old"), &staged.ExpectFn{Spec: spec, Side: side}, oldBatches)
		deads = append(deads, rewriteDead)
		newBatches, newDeads, err := readTarget(s.Scope("new"), j, b)
		if err != nil {
			return err
		}
		deads = append(deads, newDeads...)
		actual := beam.ParDo(s.Scope("new"), &staged.NewSideFn{Side: side, Spec: spec}, newBatches)
		joined := beam.CoGroupByKey(s, expected, actual)
		var src *spannerdb.Table
		if j.Spanner != nil {
			src = j.Spanner.Source
		}
		cmp := staged.CompareFn{Side: side, Examples: v.Examples, Spec: spec, Source: j.Source, Recheck: staged.NewRecheck(j.Source, j.Target, src, j.Spec)}
		var tallies, keys, fixes beam.PCollection
		if v.Repair == nil {
			cmp.Routed = v.Routed
			tallies, keys = beam.ParDo2(s, &cmp, joined)
		} else {
			cmp.Repair = &staged.RepairPick{Buckets: j.Cohort.Buckets, ReadNew: v.RepairReadNew, Pending: v.RepairPending}
			tallies, keys, fixes = beam.ParDo3(s, &staged.RepairCompareFn{CompareFn: cmp}, joined)
		}
		perCohort := beam.CombinePerKey(s, &staged.CohortTallyFn{Examples: v.Examples}, tallies)
		sink.Lines(s.Scope("report"), v.ReportPath, beam.ParDo(s, &staged.ReportLineFn{}, perCohort))
		sink.Lines(s.Scope("keys"), keysPath(v.ReportPath), keys)
		if v.Repair != nil {
			repairDead, err := repairs(s, j, v, side, fixes)
			if err != nil {
				return err
			}
			deads = append(deads, repairDead...)
		}
		sink.Lines(s, j.DeadLetterPath, beam.Flatten(s, deads...))
		return nil
	}
}

// readTarget reads the job's target as a source: the new records, of b's
// cohorts where a query can tell them (databaseTarget.readNew).
func readTarget(s beam.Scope, j *migration.Job, b *phases.Backfill) (beam.PCollection, []beam.PCollection, error) {
	d, ok := databaseOf(j)
	if !ok {
		return beam.PCollection{}, nil, fmt.Errorf("target.type %s: only a database target can be read back", j.Target.Type)
	}
	batches, deads := d.readNew(s, j, b)
	return batches, deads, nil
}

// cohortFilterOn is cohortFilter for a Spanner table other than the
// source (verify's read of the target): "" when the user id is not one
// of its columns.
func cohortFilterOn(j *migration.Job, t *spannerdb.Table, cohorts []cohort.Range) string {
	jj := *j
	schemas := *j.Spanner
	schemas.Source = t
	jj.Spanner = &schemas
	return cohortFilter(&jj, cohorts)
}

// keysPath is where a verify job writes its differing keys (keyLine),
// next to the report, before Runner.Verify reads them back.
func keysPath(report string) string { return report + ".keys" }

// removeFile removes path, if its file system can; a failure is left
// (the file is a leftover, not a wrong result).
func removeFile(ctx context.Context, path string) {
	fs, err := filesystem.New(ctx, path)
	if err != nil {
		return
	}
	defer fs.Close()
	if rm, ok := fs.(filesystem.Remover); ok {
		_ = rm.Remove(ctx, path)
	}
}
