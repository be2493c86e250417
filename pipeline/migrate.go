package pipeline

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/transforms"
	"github.com/rekeyio/rekey/transforms/sink"
	"github.com/rekeyio/rekey/transforms/source"
)

// Migrate adds the job's migration to the pipeline rooted at s: source →
// rewrite → write planning (database targets, transforms/writeplan) →
// sink, every dead letter to the job's dead-letter file. With
// j.RedriveFrom set, the source is that dead-letter file instead (see
// migration.Job.Redrive). The ramp-up, if any, is named for this run as
// the graph is built and starts at its first data commit (see throttle);
// every sink of the run shares it. With j.DryRun the
// graph stops before the sinks (sink.DryRun counts what they would write).
func Migrate(s beam.Scope, j *migration.Job) error { return migrate(s, j, nil) }

// migrate is Migrate, or with b a cohort backfill (Backfill).
func migrate(s beam.Scope, j *migration.Job, b *phases.Backfill) error {
	w := newWrites(j, newRun())
	w.backfill = b
	var batches, rewritten, redriven beam.PCollection
	var deads []beam.PCollection
	if j.RedriveFrom != "" {
		var stillDead beam.PCollection
		batches, redriven, stillDead = source.DeadLetters(s, j.RedriveFrom)
		deads = append(deads, stillDead)
	} else {
		var readDead []beam.PCollection
		var err error
		var cohorts []cohort.Range
		if b != nil {
			cohorts = b.Cohorts()
		}
		spare, err := spareFields(j)
		if err != nil {
			return err
		}
		if batches, readDead, err = readSource(s, j, readOptions{interleave: w.interleave(), cohorts: cohorts, spare: spare}); err != nil {
			return err
		}
		deads = append(deads, readDead...)
		if b != nil {
			var other beam.PCollection
			batches, other = selectCohorts(s, j, cohorts, batches)
			deads = append(deads, other)
		}
	}
	// batches has no other consumer: the rewrite may change its records.
	rewritten, rewriteDead := transforms.RewriteOwning(s, j.Spec, batches)
	deads = append(deads, rewriteDead)
	if j.RedriveFrom != "" {
		rewritten = beam.Flatten(s, rewritten, redriven)
	}
	rewritten = w.plan(s, rewritten)
	var writeDead []beam.PCollection
	if j.DryRun {
		// The planned batches go nowhere: they are counted per table or
		// kind (migration.WouldWrite).
		writeDead = []beam.PCollection{sink.DryRun(s, migration.WouldWrite, rewritten)}
	} else {
		var err error
		if writeDead, err = w.target(s, rewritten); err != nil {
			return err
		}
	}
	deads = append(deads, writeDead...)
	sink.Lines(s, j.DeadLetterPath, beam.Flatten(s, deads...))
	return nil
}

// spareFields is how many fields the job's rewrite may add to a record
// (Rekeyer.Adds): the room a source that can gives each record, for the
// rewrite to add them in place (transforms.RewriteOwning).
func spareFields(j *migration.Job) (int, error) {
	rk, err := j.Spec.Build()
	if err != nil {
		return 0, err
	}
	return rk.Adds(), nil
}

// readSource reads the job's source (sourceKind.read).
func readSource(s beam.Scope, j *migration.Job, o readOptions) (beam.PCollection, []beam.PCollection, error) {
	k, err := sourceOf(j)
	if err != nil {
		return beam.PCollection{}, nil, err
	}
	return k.read(s, j, o)
}

// target writes the planned batches to the job's target (deletes them
// from its source) and returns the dead letters.
func (w writes) target(s beam.Scope, batches beam.PCollection) ([]beam.PCollection, error) {
	k, err := targetOf(w.endpoint())
	if err != nil {
		return nil, err
	}
	return k.write(s, w, batches)
}
