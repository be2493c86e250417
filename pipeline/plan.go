package pipeline

import (
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/internal/config"
	"github.com/rekeyio/rekey/internal/throttle"
	"github.com/rekeyio/rekey/rekeyer"
	"github.com/rekeyio/rekey/rewrite"
	"github.com/rekeyio/rekey/transforms/sink"
	"github.com/rekeyio/rekey/transforms/writeplan"
)

// Guard is the sinks' retry policy and adaptive throttle (write.retry,
// write.adaptive_throttle).
func (p *Plan) Guard() sink.Guard {
	w := p.Config.Write
	return sink.Guard{Retry: w.Retry.Policy(), AdaptiveOff: w.AdaptiveThrottle.Disabled,
		AdaptiveK: w.AdaptiveThrottle.K, AdaptiveWindow: w.AdaptiveThrottle.Window, Ramp: p.Ramp()}
}

// Ramp is the ramp-up (zero when none), starting when it was first asked
// for, as the pipeline is built: the planner and the sinks share it.
func (p *Plan) Ramp() throttle.Ramp {
	r := p.Config.Ramp
	ramp := throttle.Ramp{Profile: r.Profile, Base: r.Base, Growth: r.Growth, IntervalSeconds: r.IntervalSeconds}
	if ramp.Off() {
		return throttle.Ramp{}
	}
	if p.rampStart == 0 {
		p.rampStart = time.Now().UnixNano()
	}
	ramp.StartUnixNano = p.rampStart
	return ramp
}

// PlanOptions are the write-planning options for the plan's target, and
// false for targets that are not databases (files are written in the
// order records come).
func (p *Plan) PlanOptions() (writeplan.Options, bool) {
	w := p.Config.Write
	o := writeplan.Options{Shards: w.Shards, Buffer: w.Buffer, BatchRows: w.BatchRows, Ramp: p.Ramp()}
	switch p.Config.Target.Type {
	case config.TypeSpanner:
		o.Store = writeplan.StoreSpanner
		o.Key = p.TargetKey.Text()
		if p.spanner != nil && len(p.spanner.targets) > 1 {
			o.Children = map[string]string{}
			for _, t := range p.spanner.targets[1:] {
				o.Children[t.Name] = t.Key.Text()
			}
		}
	case config.TypeDatastore:
		o.Store = writeplan.StoreDatastore
		if w.BatchMutations > 0 && w.BatchMutations < o.BatchRows {
			o.BatchRows = w.BatchMutations // the sink's entity bound
		}
	default:
		return writeplan.Options{}, false
	}
	switch w.Shuffle {
	case config.ShuffleNever:
		o.Local = true
	case config.ShuffleAuto:
		o.Local = o.Ramp.Off() && p.Scatters()
	}
	return o, true
}

// WritePlanning describes in one line how the writes are planned (for
// `rekey run` to print), or "" for targets that are not databases.
func (p *Plan) WritePlanning() string {
	o, ok := p.PlanOptions()
	if !ok {
		return ""
	}
	o = o.WithDefaults()
	how := fmt.Sprintf("global shuffle over %d shard keys (more for a large input, fewer for a small one)", o.Shards)
	switch {
	case o.Local && p.Config.Write.Shuffle == config.ShuffleNever:
		how = "no global shuffle (write.shuffle: never)"
	case o.Local:
		how = fmt.Sprintf("no global shuffle (%s scatters the keys)", p.Spec.Strategy.Strategy)
	}
	s := fmt.Sprintf("write planning: %s; commits of up to %d records sorted from buffers of %d", how, o.BatchRows, o.Buffer)
	if !o.Ramp.Off() {
		s += fmt.Sprintf("; ramp-up %s from %g ops/s", o.Ramp.Profile, o.Ramp.Base)
	}
	return s
}

// Scatters reports whether the plan's rewrite scatters the target keys
// (rewrite.Scatters), so write planning can skip the global shuffle: the
// source and target hold the same kind of key, and the strategy hashes
// or bit-reverses its leading part.
func (p *Plan) Scatters() bool {
	if p.Spec.SourceStore != p.Spec.TargetStore {
		return false
	}
	st, err := rewrite.New(p.Spec.Strategy)
	if err != nil {
		return false
	}
	return rewrite.Scatters(st, p.SourceKey, p.Spec.TargetStore == rekeyer.Datastore)
}

// planWrites orders the records' writes for a database target (see
// transforms/writeplan); the sinks then commit each planned batch on its own.
// Interleaved child rows are planned with their parents: the per-level
// split in writeSpanner comes after, so each level still waits for the
// one above.
func planWrites(s beam.Scope, p *Plan, batches beam.PCollection) beam.PCollection {
	o, ok := p.PlanOptions()
	if !ok {
		return batches
	}
	return writeplan.Writes(s, o, batches)
}
