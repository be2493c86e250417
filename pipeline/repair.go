package pipeline

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/transforms/staged"
)

// A repair (rekey repair) is a verify whose findings are also put right
// from the authoritative store, old (repairs run while old is
// authoritative: dual_write through shadow): a record missing in new or
// different there is written as old holds it, mapped through the rewrite;
// a record extra in new is deleted from new. Every write and delete is
// conditional on the touched marks, as a backfill's writes are, with the
// repair's start less the skew margin as every cohort's Since: a record
// the application wrote or deleted after then may be newer than what the
// repair read, and is left as the application made it (a later verify
// sees whether it still differs, and the repair log holds it if its
// second write failed). The repair log's entries of the cohorts logged
// before that Since are then cleared: the repair re-read each of their
// records. An entry logged after it touched its mark after it too, so
// the repair left its record alone: the entry stays for the next repair.

// repairs adds the repair's writes and deletes to the verify graph, of
// what the comparison picked (staged.RepairCompareFn, after its recheck:
// a write in flight that settled is not repaired), and returns their
// dead letters.
func repairs(s beam.Scope, j *migration.Job, v operator.VerifyJob, side staged.Side, picked beam.PCollection) ([]beam.PCollection, error) {
	s = s.Scope("repair")
	writes, deletes := beam.ParDo2(s, &staged.RepairPutFn{}, picked)
	w := newWrites(j, newRun())
	w.backfill = v.Repair
	dead, err := w.target(s, w.plan(s, staged.CountWrites(s, writes)))
	if err != nil {
		return nil, err
	}
	b := *v.Repair
	b.Namespace = j.Target.Namespace
	del := beam.ParDo(s, &staged.RepairDeleteFn{Store: j.Spec.TargetStore, Target: j.Target, Table: side.Table, Children: side.Children, Backfill: b}, deletes)
	return append(dead, del), nil
}
