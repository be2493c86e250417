package pipeline

import (
	"errors"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/transforms/sink"
	"github.com/rekeyio/rekey/transforms/staged"
)

// Reverse returns the graph of a reverse backfill (rekey run --reverse):
// the new records of b's cohorts (a Spanner target filters in its query
// where the user id is a column of the new table) are turned back into
// old records by the inverse rewrite (rekeyer.Invert), kept if their user
// is in the cohorts, planned as old keys and written to old, each batch
// as new holds it when the batch is committed (phases.Reverse: so no
// application write is lost). Old's records of the cohorts go through
// the same commit, which deletes from old those new does not hold (the
// records deleted in new_only). b.Reverse must be set.
func Reverse(b phases.Backfill) Graph {
	return func(s beam.Scope, j *migration.Job) error {
		if err := operator.CheckReverse(j); err != nil {
			return err
		}
		if b.Reverse == nil {
			return errors.New("reverse backfill: no Reverse")
		}
		newBatches, deads, err := readTarget(s.Scope("new"), j, &b)
		if err != nil {
			return err
		}
		olds, invertDead := beam.ParDo2(s, &staged.InvertFn{Spec: j.Spec.Text(), Namespace: j.Source.Namespace, Database: j.Source.Database}, newBatches)
		deads = append(deads, invertDead)
		olds, cohortDead := selectCohorts(s, j, b.Cohorts(), olds)
		deads = append(deads, cohortDead)
		// Old's records of the cohorts too: one that new no longer holds
		// (deleted while new alone was written, in new_only) is deleted
		// from old by the same conditional commit, which finds no new
		// record for it (the soak, seed 21: a record deleted in new_only
		// came back after the reverse backfill). Those new holds are
		// written as new holds them, a second time.
		oldBatches, oldDeads, err := readSource(s.Scope("old"), j, readOptions{cohorts: b.Cohorts()})
		if err != nil {
			return err
		}
		deads = append(deads, oldDeads...)
		oldBatches, oldCohortDead := selectCohorts(s.Scope("old"), j, b.Cohorts(), oldBatches)
		deads = append(deads, oldCohortDead)
		olds = beam.Flatten(s, olds, oldBatches)
		w := newWrites(j.Reversed(), newRun())
		w.backfill = &b
		writeDead, err := w.target(s, w.plan(s, olds))
		if err != nil {
			return err
		}
		deads = append(deads, writeDead...)
		sink.Lines(s, j.DeadLetterPath, beam.Flatten(s, deads...))
		return nil
	}
}
