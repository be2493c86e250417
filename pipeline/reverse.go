package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/internal/config"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
	"github.com/rekeyio/rekey/transforms"
	"github.com/rekeyio/rekey/transforms/sink"
)

func init() {
	register.DoFn4x1[context.Context, []byte, func([]byte), func(string), error](&invertFn{})
}

// Reverse returns the graph of a reverse backfill (rekey run --reverse):
// the new records of b's cohorts (a Spanner target filters in its query
// where the user id is a column of the new table) are turned back into
// old records by the inverse rewrite (rekeyer.Invert), kept if their user
// is in the cohorts, planned as old keys and written to old, each batch
// as new holds it when the batch is committed (cutover.Reverse: so no
// application write is lost). Old's records of the cohorts go through
// the same commit, which deletes from old those new does not hold (the
// records deleted in new_only). b.Reverse must be set.
func Reverse(b cutover.Backfill) Graph {
	return func(s beam.Scope, j *migration.Job) error {
		if err := operator.CheckReverse(j); err != nil {
			return err
		}
		if b.Reverse == nil {
			return errors.New("reverse backfill: no Reverse")
		}
		newBatches, deads := readTarget(s.Scope("new"), j, &b)
		olds, invertDead := beam.ParDo2(s, &invertFn{Spec: j.Spec.Text(), Namespace: j.Config.Source.Namespace, Database: j.Config.Source.Database}, newBatches)
		deads = append(deads, invertDead)
		olds, cohortDead := selectCohorts(s, j, b.Cohorts(), olds)
		deads = append(deads, cohortDead)
		// Old's records of the cohorts too: one that new no longer holds
		// (deleted while new alone was written, in new_only) is deleted
		// from old by the same conditional commit, which finds no new
		// record for it (the soak, seed 21: a record deleted in new_only
		// came back after the reverse backfill). Those new holds are
		// written as new holds them, a second time.
		oldBatches, oldDeads, err := readSource(s.Scope("old"), j, 0, b.Cohorts())
		if err != nil {
			return err
		}
		deads = append(deads, oldDeads...)
		oldBatches, oldCohortDead := selectCohorts(s.Scope("old"), j, b.Cohorts(), oldBatches)
		deads = append(deads, oldCohortDead)
		olds = beam.Flatten(s, olds, oldBatches)
		w := newWrites(toOld(j), newRun())
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

// toOld is the job turned around for writing: its target is the source
// (endpoint, key, Spanner table), without a ramp-up (the old store has no
// ramp table, and a reverse backfill is a rollback, which should not
// wait).
func toOld(j *migration.Job) *migration.Job {
	jr := *j
	cfg := *j.Config
	cfg.Target = cfg.Source
	cfg.Ramp = config.RampConfig{}
	jr.Config = &cfg
	jr.TargetKey = j.SourceKey
	if j.Spanner != nil {
		sp := *j.Spanner
		sp.Targets = []*spannerdb.Table{j.Spanner.Source}
		jr.Spanner = &sp
	}
	return &jr
}

// invertFn turns new records back into old ones (rekeyer.Invert), in the
// source's namespace and database.
type invertFn struct {
	Spec      rekeyer.Text `json:"spec"`
	Namespace string       `json:"namespace"`
	Database  string       `json:"database"`

	rk *rekeyer.Rekeyer
}

func (f *invertFn) Setup() error {
	var err error
	f.rk, err = f.Spec.Build()
	return err
}

func (f *invertFn) ProcessElement(ctx context.Context, batch []byte, emit func([]byte), dead func(string)) error {
	recs, err := record.DecodeBatch(batch)
	if err != nil {
		return err
	}
	out := recs[:0]
	for i := range recs {
		nr := recs[i]
		r := nr
		r.Fields = append([]record.Field(nil), nr.Fields...)
		if err := f.rk.Invert(&r); err != nil {
			transforms.CountDeadLettered(ctx, 1)
			dead(record.NewDeadLetter(record.StageRewrite, nr.Table, &nr, fmt.Errorf("reverse backfill: %w", err)))
			continue
		}
		if r.Key != nil {
			r.Key.Namespace, r.Key.Database = f.Namespace, f.Database
		}
		out = append(out, r)
	}
	transforms.CountRewritten(ctx, int64(len(out)))
	if len(out) > 0 {
		emit(record.EncodeBatch(out))
	}
	return nil
}
