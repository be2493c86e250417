package pipeline

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/progress"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/plan/detect"
	"github.com/rekeyio/rekey/plan/sim"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms/sink"
	"github.com/rekeyio/rekey/transforms/source"
)

// spannerKind is a Spanner database as a source and as a target.
type spannerKind struct{}

// read reads the source table, and its interleaved children; the main
// table's rows only where the cohorts' filter (or o.filter) holds too. A
// read for a cleanup (o.keysOnly) reads the main table's key and user id
// columns only.
func (spannerKind) read(s beam.Scope, j *migration.Job, o readOptions) (beam.PCollection, []beam.PCollection, error) {
	filter := o.filter
	if filter == "" {
		filter = cohortFilter(j, o.cohorts)
	}
	if o.keysOnly {
		b, d := source.Spanner(s, spannerKeys(j, filter))
		return b, []beam.PCollection{d}, nil
	}
	main := spannerSource(j, filter)
	main.SpareFields = o.spare
	batches, dead := source.Spanner(s, main)
	all, deads := []beam.PCollection{batches}, []beam.PCollection{dead}
	for _, cfg := range spannerChildren(j) {
		cfg.SpareFields = o.spare
		if len(o.cohorts) > 0 {
			// The cohorts' rows of each child: its rows carry the user id
			// column of the main table's key (cutover.NewSpanner).
			cfg.Filter = cohortFilterOn(j, j.Spanner.Children[cfg.Table], o.cohorts)
		}
		cb, cd := source.Spanner(s.Scope(cfg.Table), cfg)
		all = append(all, cb)
		deads = append(deads, cd)
	}
	if len(all) == 1 {
		return batches, deads, nil
	}
	return beam.Flatten(s, all...), deads, nil
}

// spannerKeys is the read of a cleanup: the main table's rows where
// filter holds, their key and user id columns only.
func spannerKeys(j *migration.Job, filter string) source.SpannerConfig {
	cfg := spannerSource(j, filter)
	t := j.Spanner.Source
	cfg.Columns = nil
	for _, c := range t.Key.Columns {
		cfg.Columns = append(cfg.Columns, c.Name)
	}
	if u, ok, _ := j.Cohort.UserSpec(); ok && t.Key.Index(u.Name) < 0 {
		cfg.Columns = append(cfg.Columns, t.Column(u.Name).Name)
	}
	return cfg
}

// estimate is a COUNT(*) of the main table (with the filter) and of each
// interleaved child.
func (spannerKind) estimate(ctx context.Context, j *migration.Job) (progress.Total, bool) {
	n, err := source.CountSpanner(ctx, spannerSource(j, ""))
	if err != nil {
		return progress.Total{}, false
	}
	for _, cfg := range spannerChildren(j) {
		m, err := source.CountSpanner(ctx, cfg)
		if err != nil {
			return progress.Total{}, false
		}
		n += m
	}
	return progress.Total{N: n, From: "COUNT(*)"}, true
}

// countCohorts is a COUNT(*) of the cohorts' rows, where the query can
// tell them.
func (spannerKind) countCohorts(ctx context.Context, j *migration.Job, cohorts []cohort.Range) (progress.Total, bool) {
	f := cohortFilter(j, cohorts)
	if f == "" {
		return progress.Total{}, false
	}
	n, err := source.CountSpanner(ctx, spannerSource(j, f))
	if err != nil {
		return progress.Total{}, false
	}
	return progress.Total{N: n, From: "COUNT(*) of the cohorts"}, true
}

// planFilter samples in the query a table of more rows than n: the rows
// whose key's FARM_FINGERPRINT falls in a fraction of its range (a little
// more than n/rows, so that the uniform sample that follows has enough to
// choose from).
func (spannerKind) planFilter(ctx context.Context, j *migration.Job, n int) (string, int64, string, error) {
	rows, err := source.CountSpanner(ctx, spannerSource(j, ""))
	if err != nil || rows <= int64(n) {
		return "", rows, "", err
	}
	frac := math.Min(1, 1.2*float64(n)/float64(rows))
	method := fmt.Sprintf("uniform random sample of %s of %s rows: the query read the rows whose key's FARM_FINGERPRINT falls in %.4g%% of its range, then bottom-k of random priorities", detect.Thousands(int64(n)), detect.Thousands(rows), 100*frac)
	return sampleFilter(j.SourceKey, frac), rows, method, nil
}

func (spannerKind) peek(ctx context.Context, j *migration.Job, n int) ([]record.Record, error) {
	src := j.Source
	return source.PeekSpanner(ctx, source.SpannerConfig{Project: src.Project, Instance: src.Instance, Database: src.Database, Table: src.Table, Columns: src.Columns, Filter: src.Filter}, n)
}

func (spannerKind) describe(e config.Endpoint) string {
	return fmt.Sprintf("Spanner %s/%s table %s", e.Instance, e.Database, firstOf(e.Table, "?"))
}

// readNew reads the target tables (the main table and its interleaved
// children), the rows of b's cohorts where the user id is one of their
// columns as old's (not one the rewrite changes).
func (spannerKind) readNew(s beam.Scope, j *migration.Job, b *phases.Backfill) (beam.PCollection, []beam.PCollection) {
	t := j.Target
	var tables []*spannerdb.Table
	if j.Spanner != nil {
		tables = j.Spanner.Targets
	}
	if len(tables) == 0 {
		batches, dead := source.Spanner(s, source.SpannerConfig{Project: t.Project, Instance: t.Instance, Database: t.Database, Table: t.Table})
		return batches, []beam.PCollection{dead}
	}
	keeps := newKeepsUser(j)
	var all, deads []beam.PCollection
	for _, tt := range tables {
		filter := ""
		if keeps {
			filter = cohortFilterOn(j, tt, b.Cohorts())
		}
		batches, dead := source.Spanner(s.Scope(tt.Name), source.SpannerConfig{Project: t.Project, Instance: t.Instance, Database: t.Database, Table: tt.Name, Filter: filter})
		all, deads = append(all, batches), append(deads, dead)
	}
	if len(all) == 1 {
		return all[0], deads
	}
	return beam.Flatten(s, all...), deads
}

// newKeepsUser reports whether new rows hold the user id column as old
// rows do (the rewrite does not change it), so that a cohort filter on it
// selects the same users in new.
func newKeepsUser(j *migration.Job) bool {
	u, ok, err := j.Cohort.UserSpec()
	if err != nil || !ok || u.From != cohort.FromField {
		return false
	}
	rk, err := j.Spec.Build()
	return err == nil && rk.Keeps(u.Name)
}

func (spannerKind) simDefaults(nodes int) sim.Params { return sim.SpannerDefaults(nodes) }

func (spannerKind) entities() bool { return false }

// spannerChildren are the reads of the source's interleaved child tables,
// whole.
func spannerChildren(j *migration.Job) []source.SpannerConfig {
	src := j.Source
	var out []source.SpannerConfig
	for name := range j.Spanner.Children {
		out = append(out, source.SpannerConfig{Project: src.Project, Instance: src.Instance, Database: src.Database, Table: name, ReadTime: j.ReadTime})
	}
	return out
}

// spannerSource is the source's config: the main table's rows where the
// config's filter and cohorts (a SQL condition, "" for none) hold.
func spannerSource(j *migration.Job, cohorts string) source.SpannerConfig {
	src := j.Source
	return source.SpannerConfig{Project: src.Project, Instance: src.Instance, Database: src.Database, Table: src.Table, Columns: src.Columns, Filter: andFilter(src.Filter, cohorts), ReadTime: j.ReadTime}
}

func init() {
	register.DoFn3x1[record.Batch, func(record.Batch), func(record.Batch), error](&splitTableFn{})
	register.DoFn3x0[record.Batch, func(*string) bool, func(record.Batch)](&afterFn{})
	register.Iter1[string]()
}

// write writes the main table's rows, then each level of
// interleaved children once the level above is written (the emulator and
// Spanner reject a child whose parent row does not exist yet). Deletes
// go to the source's main table, its interleaved tables' rows going with
// its rows by their ON DELETE CASCADE (operator.CheckCleanup).
func (spannerKind) write(s beam.Scope, w writes, batches beam.PCollection) ([]beam.PCollection, error) {
	tgt, wc := w.endpoint(), w.job.Write
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

func (f *splitTableFn) ProcessElement(batch record.Batch, mine, others func(record.Batch)) error {
	var a, b []record.Record
	for _, r := range batch.Recs {
		if strings.EqualFold(r.Table, f.Table) {
			a = append(a, r)
		} else {
			b = append(b, r)
		}
	}
	if len(a) > 0 {
		mine(record.Batch{Recs: a})
	}
	if len(b) > 0 {
		others(record.Batch{Recs: b})
	}
	return nil
}

// afterFn passes its input on once its side input is complete.
type afterFn struct{}

func (f *afterFn) ProcessElement(batch record.Batch, _ func(*string) bool, emit func(record.Batch)) {
	emit(batch)
}
