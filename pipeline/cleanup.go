package pipeline

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/transforms/sink"
)

// Cleanup returns the graph of a cohort cleanup: the old records of
// cohorts, read from the job's source, deleted from it. A Spanner source
// reads only the key and user id columns of the rows the migration read
// (its source.filter) and filters the cohorts in its query; every source
// is filtered again as it is read (transforms.Cohorts). The deletes are
// planned as the migration plans its writes (transforms/writeplan), but
// by the source's key: shuffled over the whole old key space, each commit
// within a narrow key range, since mass deletes in one narrow range leave
// tombstones that slow the reads there; the sinks delete in their delete
// mode under the job's ramp-up, retries and adaptive throttle, counting
// deleted. A dry run plans them and counts them per table or kind
// (migration.WouldDelete), deleting nothing. operator.CheckCleanup says
// which jobs can be cleaned up; operator.Cleanup runs the graph for
// cohorts in done.
func Cleanup(cohorts []cohort.Range) Graph {
	return func(s beam.Scope, j *migration.Job) error {
		if err := operator.CheckCleanup(j); err != nil {
			return err
		}
		w := newWrites(j, newRun())
		w.deletes = true
		batches, deads, err := readSource(s, j, readOptions{cohorts: cohorts, keysOnly: true})
		if err != nil {
			return err
		}
		batches, other := selectCohorts(s, j, cohorts, batches)
		deads = append(deads, other)
		planned := w.plan(s, batches)
		if j.DryRun {
			deads = append(deads, sink.DryRun(s, migration.WouldDelete, planned))
		} else {
			deleteDead, err := w.target(s, planned)
			if err != nil {
				return err
			}
			deads = append(deads, deleteDead...)
		}
		sink.Lines(s, j.DeadLetterPath, beam.Flatten(s, deads...))
		return nil
	}
}
