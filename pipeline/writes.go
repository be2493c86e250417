package pipeline

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/write/throttle"
	"github.com/rekeyio/rekey/internal/write/writeorder"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/transforms/sink"
	"github.com/rekeyio/rekey/transforms/source"
	"github.com/rekeyio/rekey/transforms/writeplan"
)

// writes is how one graph writes a job's target: the job and the ramp-up
// its planner and sinks share.
type writes struct {
	job  *migration.Job
	ramp throttle.Ramp
	// backfill, if set, makes the sinks a cohort backfill's (Backfill).
	backfill *phases.Backfill
	// deletes makes the writes a cohort cleanup's (Cleanup): the records
	// are the source's, planned by the source's key and deleted from the
	// source (the sinks in storewrite.ModeDelete).
	deletes bool
}

// newWrites names the run whose writes share the job's ramp-up.
func newWrites(j *migration.Job, run string) writes {
	return writes{job: j, ramp: j.Ramp(run)}
}

// newRun names a run of a pipeline: its ramp-up's state in the target
// (throttle.Lease) is the run's alone.
func newRun() string { return uuid.NewString() }

// guard is the sinks' retry policy and adaptive throttle (write.retry,
// write.adaptive_throttle) and the ramp-up.
func (w writes) guard() sink.Guard {
	wc := w.job.Write
	return sink.Guard{Retry: wc.Retry.Policy(), AdaptiveOff: wc.AdaptiveThrottle.Disabled,
		AdaptiveK: wc.AdaptiveThrottle.K, AdaptiveWindow: wc.AdaptiveThrottle.Window, Ramp: w.ramp}
}

// endpoint is the store the writes go to: the target, or the source for
// deletes.
func (w writes) endpoint() config.Endpoint {
	if w.deletes {
		return w.job.Source
	}
	return w.job.Target
}

// planOptions are the write-planning options for the job's target (the
// source for deletes, by its key) as the job resolved them
// (migration.Job.WriteOrder), with the run's scratch directory for a
// global shuffle; false for targets that are not databases.
func (w writes) planOptions() (writeorder.Options, bool) {
	p, ok := w.job.WriteOrder(w.deletes)
	if !ok {
		return writeorder.Options{}, false
	}
	o := p.Options
	if !o.Local {
		o.Spill = w.job.ScratchDir
	}
	return o, true
}

// interleave is the number of records a round of the source's
// interleaved read takes from all its ranges (source.FilesConfig.Interleave)
// when write planning relies on it to skip the global shuffle; 0
// otherwise.
func (w writes) interleave() int {
	p, _ := w.job.WriteOrder(w.deletes)
	return p.Interleave
}

// DescribeWrites says in one line how the job's writes are planned (for
// `rekey run` to print), or "" for targets that are not databases.
func DescribeWrites(j *migration.Job) string { return newWrites(j, "").describe() }

// describe is DescribeWrites of w's writes.
func (w writes) describe() string {
	j := w.job
	o, ok := w.planOptions()
	if !ok {
		return ""
	}
	o = o.WithDefaults()
	how := fmt.Sprintf("global shuffle over %d shard keys (more for a large input, fewer for a small one)", o.Shards)
	p, _ := j.WriteOrder(w.deletes)
	switch p.NoShuffle {
	case migration.ShuffleNever:
		how = "no global shuffle (write.shuffle: never)"
	case migration.ReadInterleaved:
		how = fmt.Sprintf("no global shuffle (the JSON Lines source is read in %d or more interleaved ranges, a round of %d records at a time)", source.InterleavedRanges, p.Interleave)
	case migration.KeysScatter:
		how = fmt.Sprintf("no global shuffle (%s scatters the keys)", j.Spec.Strategy.Strategy)
	}
	what := "write"
	if w.deletes {
		what = "delete"
	}
	s := fmt.Sprintf("%s planning: %s; commits of up to %d records sorted from buffers of %d", what, how, o.BatchRows, o.Buffer)
	if !w.ramp.Off() {
		s += fmt.Sprintf("; ramp-up %s from %g ops/s, from the first data commit", w.ramp.Profile, w.ramp.Base)
	}
	return s
}

// plan orders the records' writes for a database target (see
// transforms/writeplan); the sinks then commit each planned batch on its
// own. Interleaved child rows are planned with their parents: the
// per-level split in writes.spanner comes after, so each level still
// waits for the one above.
func (w writes) plan(s beam.Scope, batches beam.PCollection) beam.PCollection {
	o, ok := w.planOptions()
	if !ok {
		return batches
	}
	return writeplan.Writes(s, o, batches)
}
