package pipeline

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/transforms/sink"
	"github.com/rekeyio/rekey/transforms/source"
	"github.com/rekeyio/rekey/transforms/staged"
)

// A phase-aware bulk load (rekey load) writes new data while a staged
// migration is under way without bypassing the cutover: every record, in
// old keys and of the old table or kind, goes through the application
// library of the migration (cutover.NewSpanner, NewDatastore), which
// writes it where its cohort's phase says — old only, old and new, or new
// only — with the dual writes' touched marks and repair log, exactly as
// the application's own writes. So the argument of the cutover package
// doc holds for a load as for any instance of the application: a load is
// one more instance, with the same phase cache, TTL and skew.
//
// Each worker runs loadParallel library calls at once; a call that fails
// is retried for loadRetryFor (a stale phase cache or a busy store is
// transient), then the record is dead-lettered with the reason. The
// calls go under the job's ramp-up (one budget for every process of the
// run, its lease in the target) and the adaptive throttle, as a run's
// commits do.

// Load returns the graph of a phase-aware bulk load of the records of the
// files f (format jsonl, csv or avro, as a source's) into migration
// f.Migration's stores, each where its cohort's phase says.
func Load(f operator.LoadFiles) Graph {
	return func(s beam.Scope, j *migration.Job) error {
		if err := operator.CheckLoad(j); err != nil {
			return err
		}
		portable, err := j.Portable()
		if err != nil {
			return err
		}
		table := j.Source.Table
		if table == "" {
			table = j.Source.Kind
		}
		batches, readDead := source.Files(s, source.FilesConfig{Path: f.Path, Format: f.Format, Delimiter: f.Delimiter, Table: table})
		w := newWrites(j, newRun())
		dead := beam.ParDo(s, &staged.LoadFn{Job: portable, Migration: f.Migration, Guard: w.guard()}, batches)
		sink.Lines(s, j.DeadLetterPath, beam.Flatten(s, readDead, dead))
		return nil
	}
}
