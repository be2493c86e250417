package pipeline

import (
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms/sink"
	"github.com/rekeyio/rekey/transforms/source"
)

// readSpanner reads the source table, and its interleaved children; the
// main table's rows only where cohorts (a SQL condition, "" for none)
// holds too.
func readSpanner(s beam.Scope, j *migration.Job, cohorts string) (beam.PCollection, []beam.PCollection, error) {
	batches, dead := source.Spanner(s, spannerSource(j, cohorts))
	all, deads := []beam.PCollection{batches}, []beam.PCollection{dead}
	for _, cfg := range spannerChildren(j) {
		cb, cd := source.Spanner(s.Scope(cfg.Table), cfg)
		all = append(all, cb)
		deads = append(deads, cd)
	}
	if len(all) == 1 {
		return batches, deads, nil
	}
	return beam.Flatten(s, all...), deads, nil
}

// spannerChildren are the reads of the source's interleaved child tables,
// whole.
func spannerChildren(j *migration.Job) []source.SpannerConfig {
	src := j.Config.Source
	var out []source.SpannerConfig
	for name := range j.Spanner.Children {
		out = append(out, source.SpannerConfig{Project: src.Project, Instance: src.Instance, Database: src.Database, Table: name, ReadTime: j.ReadTime})
	}
	return out
}

// spannerSource is the source's config: the main table's rows where the
// config's filter and cohorts (a SQL condition, "" for none) hold.
func spannerSource(j *migration.Job, cohorts string) source.SpannerConfig {
	src := j.Config.Source
	return source.SpannerConfig{Project: src.Project, Instance: src.Instance, Database: src.Database, Table: src.Table, Columns: src.Columns, Filter: andFilter(src.Filter, cohorts), ReadTime: j.ReadTime}
}

func init() {
	register.DoFn3x1[[]byte, func([]byte), func([]byte), error](&splitTableFn{})
	register.DoFn3x0[[]byte, func(*string) bool, func([]byte)](&afterFn{})
	register.Iter1[string]()
}

// writeSpanner writes the main table's rows, then each level of
// interleaved children once the level above is written (the emulator and
// Spanner reject a child whose parent row does not exist yet). Deletes
// go to the source table, which has no children then (operator.CheckCleanup).
func (w writes) spanner(s beam.Scope, batches beam.PCollection) ([]beam.PCollection, error) {
	tgt, wc := w.endpoint(), w.job.Config.Write
	cfg := sink.SpannerSinkConfig{Project: tgt.Project, Instance: tgt.Instance, Database: tgt.Database,
		Mode: wc.Mode, MaxMutations: wc.BatchMutations, MaxBytes: wc.BatchBytes, MaxRows: wc.BatchRows,
		CommitPerElement: true, Parallelism: wc.Parallelism, Guard: w.guard(), Backfill: w.backfill} // one planned batch, one commit
	if w.deletes {
		cfg.Table, cfg.Mode = w.job.Spanner.Source.Name, storewrite.ModeDelete
		return []beam.PCollection{sink.Spanner(s, cfg, batches)}, nil
	}
	targets := w.job.Spanner.Targets
	cfg.Table = targets[0].Name
	if len(targets) == 1 {
		return []beam.PCollection{sink.Spanner(s, cfg, batches)}, nil
	}
	var deads []beam.PCollection
	rest := batches
	for i, t := range targets {
		level, next := beam.ParDo2(s.Scope(t.Name), &splitTableFn{Table: t.Name}, rest)
		if i > 0 {
			// Wait for the level above: its dead letters are a side input,
			// complete only when its writes are done.
			level = beam.ParDo(s.Scope(t.Name), &afterFn{}, level, beam.SideInput{Input: deads[i-1]})
		}
		c := cfg
		c.Table = t.Name
		deads = append(deads, sink.Spanner(s.Scope(t.Name), c, level))
		rest = next
	}
	return deads, nil
}

// splitTableFn sends the records of one table to its first output and the
// rest to the second.
type splitTableFn struct {
	Table string `json:"table"`
}

func (f *splitTableFn) ProcessElement(batch []byte, mine, others func([]byte)) error {
	recs, err := record.DecodeBatch(batch)
	if err != nil {
		return err
	}
	var a, b []record.Record
	for _, r := range recs {
		if strings.EqualFold(r.Table, f.Table) {
			a = append(a, r)
		} else {
			b = append(b, r)
		}
	}
	if len(a) > 0 {
		mine(record.EncodeBatch(a))
	}
	if len(b) > 0 {
		others(record.EncodeBatch(b))
	}
	return nil
}

// afterFn passes its input on once its side input is complete.
type afterFn struct{}

func (f *afterFn) ProcessElement(batch []byte, _ func(*string) bool, emit func([]byte)) {
	emit(batch)
}
