package migration

import (
	"github.com/rekeyio/rekey/internal/write/writeorder"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
)

// WriteOrder is how the writes of a job (or a cohort cleanup's deletes)
// are planned, resolved from write.* and the job once, for the graph to
// take as it is.
type WriteOrder struct {
	// Options are the write planner's options for the store written (its
	// key, interleaved children, batch bound, whether to shuffle
	// globally). Spill is left to the runner, which knows where its
	// workers share a disk.
	Options writeorder.Options
	// NoShuffle says why there is no global shuffle when Options.Local
	// is set: write.shuffle is never, the rewrite scatters the keys, or
	// the source is read in interleaved ranges.
	NoShuffle NoShuffleReason
	// Interleave is, when NoShuffle is ReadInterleaved, the number of
	// records a round of the source's interleaved read takes from all its
	// ranges: the planner's buffer, so that each sorted buffer holds a
	// piece of every range; 0 otherwise.
	Interleave int
}

// NoShuffleReason says why write planning skips the global shuffle.
type NoShuffleReason int

const (
	Shuffled        NoShuffleReason = iota // a global shuffle
	ShuffleNever                           // write.shuffle: never
	KeysScatter                            // the rewrite scatters the target keys (Job.Scatters)
	ReadInterleaved                        // the JSON Lines source is read in interleaved ranges
)

// WriteOrder resolves how the job's writes are planned: to its target, or
// with deletes to its source by the source's key (a cohort cleanup); false
// for a store that is not a database (files are written in the order
// records come).
func (j *Job) WriteOrder(deletes bool) (WriteOrder, bool) {
	wc := j.Write
	o := writeorder.Options{Shards: wc.Shards, Buffer: wc.Buffer, BatchRows: wc.BatchRows}
	k := kindOf(j.Target.Type)
	if deletes {
		k = kindOf(j.Source.Type)
	}
	switch {
	case k.spannerDB():
		o.Store = record.Spanner
		o.Key = j.TargetKey.Text()
		if deletes {
			o.Key = j.SourceKey.Text()
		} else if j.Spanner != nil && len(j.Spanner.Targets) > 1 {
			o.Children = map[string]string{}
			for _, t := range j.Spanner.Targets[1:] {
				o.Children[t.Name] = t.Key.Text()
			}
		}
	case k.datastoreDB():
		o.Store = record.Datastore
		if wc.BatchMutations > 0 && wc.BatchMutations < o.BatchRows {
			o.BatchRows = wc.BatchMutations // the sink's entity bound
		}
	default:
		return WriteOrder{}, false
	}
	p := WriteOrder{}
	switch {
	case wc.Shuffle == config.ShuffleNever:
		p.NoShuffle = ShuffleNever
	case wc.Shuffle != config.ShuffleAuto || deletes:
		// Deletes go by the old keys, which the source reads in their
		// order: only a global shuffle spreads them.
	case j.Scatters():
		p.NoShuffle = KeysScatter
	case j.interleavable():
		p.NoShuffle = ReadInterleaved
	}
	o.Local = p.NoShuffle != Shuffled
	if p.NoShuffle == ReadInterleaved {
		p.Interleave = o.WithDefaults().Buffer
	}
	p.Options = o
	return p, true
}

// interleavable reports whether the job's source can be read in
// interleaved ranges, a JSON Lines file read from the start of the run,
// so that write planning needs no global shuffle when the rewrite keeps
// the input's order.
func (j *Job) interleavable() bool {
	return kindOf(j.Source.Type).ranges && j.RedriveFrom == ""
}
