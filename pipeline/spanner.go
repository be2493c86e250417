package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"cloud.google.com/go/spanner"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/internal/config"
	"github.com/rekeyio/rekey/internal/spannerdb"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms/sink"
	"github.com/rekeyio/rekey/transforms/source"
)

// spannerPlan holds the Spanner schemas a plan resolved.
type spannerPlan struct {
	source   *spannerdb.Table            // main source table (Spanner sources)
	children map[string]*spannerdb.Table // interleaved source child tables
	// targets are the target tables, parents before children.
	targets []*spannerdb.Table
	// exists says which target tables already exist.
	exists map[string]bool
}

func databasePath(e config.Endpoint) string {
	return fmt.Sprintf("projects/%s/instances/%s/databases/%s", e.Project, e.Instance, e.Database)
}

func spannerClient(ctx context.Context, e config.Endpoint) (*spanner.Client, error) {
	c, err := spanner.NewClientWithConfig(ctx, databasePath(e), spanner.ClientConfig{SessionPoolConfig: spanner.SessionPoolConfig{MinOpened: 1}})
	if err != nil {
		return nil, fmt.Errorf("spanner %s: %w", databasePath(e), err)
	}
	return c, nil
}

// resolveSpannerSource reads the source table's schema and those of its
// interleaved children named in the config.
func (p *Plan) resolveSpannerSource(ctx context.Context) error {
	src := p.Config.Source
	c, err := spannerClient(ctx, src)
	if err != nil {
		return err
	}
	defer c.Close()
	t, err := spannerdb.ReadTable(ctx, c, src.Table)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	sp := p.ensureSpanner()
	sp.source = t
	sp.children = map[string]*spannerdb.Table{}
	p.SourceKey = t.Key
	p.Spec.Children = map[string]string{}
	for _, name := range p.Config.Interleaved {
		ct, err := spannerdb.ReadTable(ctx, c, name)
		if err != nil {
			return fmt.Errorf("interleaved: %w", err)
		}
		if !interleavedUnder(ct, src.Table, sp.children) {
			return fmt.Errorf("interleaved: table %s is not interleaved in %s", name, src.Table)
		}
		sp.children[ct.Name] = ct
		p.Spec.Children[ct.Name] = ct.Key.Text()
	}
	return nil
}

// interleavedUnder reports whether t's parent is root or one of the
// children already known (children are listed parents first).
func interleavedUnder(t *spannerdb.Table, root string, known map[string]*spannerdb.Table) bool {
	if strings.EqualFold(t.Parent, root) {
		return true
	}
	for name := range known {
		if strings.EqualFold(t.Parent, name) {
			return true
		}
	}
	return false
}

func (p *Plan) ensureSpanner() *spannerPlan {
	if p.spanner == nil {
		p.spanner = &spannerPlan{exists: map[string]bool{}}
	}
	return p.spanner
}

// resolveSpannerTarget works out the target tables: from the source
// schema under the new key (Spanner sources), or as they exist in the
// target database (other sources), whose key must then be the rewritten
// key.
func (p *Plan) resolveSpannerTarget(ctx context.Context) error {
	tgt := p.Config.Target
	sp := p.ensureSpanner()
	c, err := spannerClient(ctx, tgt)
	if err != nil {
		return err
	}
	defer c.Close()
	name := firstNonEmpty(tgt.Table, p.Spec.Table)
	existing, err := spannerdb.ReadTable(ctx, c, name)
	if err != nil && !errors.Is(err, spannerdb.ErrTableNotFound) {
		return fmt.Errorf("target: %w", err)
	}
	var extra []spannerdb.Column
	if p.Config.KeepOriginalKey != "" {
		extra = append(extra, spannerdb.Column{Name: p.Config.KeepOriginalKey, Type: "STRING(MAX)"})
	}
	var main *spannerdb.Table
	switch {
	case existing != nil:
		sp.exists[strings.ToLower(name)] = true
		if existing.Key.String() != p.TargetKey.String() || !sameKeyTypes(existing, p) {
			return fmt.Errorf("target table %s exists with %s, but the rewrite gives %s", name, "("+existing.Key.Text()+")", "("+p.TargetKey.Text()+")")
		}
		main = existing
	case sp.source != nil:
		main = sp.source.WithKey(p.TargetKey, extra)
		main.Name = name
		main.Key.Table = name
		main.Parent = "" // the target is a new root table
	default:
		return fmt.Errorf("target table %s does not exist; create it first (rekey can derive it only from a Spanner source); its primary key must be %s", name, "("+p.TargetKey.Text()+")")
	}
	sp.targets = []*spannerdb.Table{main}
	// Children, parents first, interleaved under their new parents.
	names := make([]string, 0, len(sp.children))
	for n := range sp.children {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return depth(sp.children, names[i]) < depth(sp.children, names[j]) })
	for _, n := range names {
		ct := sp.children[n]
		out := p.Children[n]
		t := ct.WithKey(out, extra)
		if strings.EqualFold(ct.Parent, sp.source.Name) {
			t.Parent = main.Name
		}
		if ex, err := spannerdb.ReadTable(ctx, c, t.Name); err == nil {
			if ex.Key.String() != out.String() {
				return fmt.Errorf("target child table %s exists with %s, but the rewrite gives %s", t.Name, ex.Key, out)
			}
			sp.exists[strings.ToLower(t.Name)] = true
		}
		sp.targets = append(sp.targets, t)
	}
	p.TargetDDL = nil
	for _, t := range sp.targets {
		p.TargetDDL = append(p.TargetDDL, t.CreateDDL(t.Name))
	}
	return nil
}

func sameKeyTypes(t *spannerdb.Table, p *Plan) bool {
	for i, c := range t.Key.Columns {
		if i >= len(p.TargetKey.Columns) || c.Type != p.TargetKey.Columns[i].Type {
			return false
		}
	}
	return true
}

func depth(children map[string]*spannerdb.Table, name string) int {
	d := 0
	for t := children[name]; t != nil && d < 16; t = children[t.Parent] {
		d++
	}
	return d
}

func (p *Plan) readSpanner(s beam.Scope) (beam.PCollection, []beam.PCollection, error) {
	src := p.Config.Source
	cfg := source.SpannerConfig{Project: src.Project, Instance: src.Instance, Database: src.Database, Table: src.Table, Columns: src.Columns, Filter: src.Filter}
	batches, dead := source.Spanner(s, cfg)
	all, deads := []beam.PCollection{batches}, []beam.PCollection{dead}
	for name := range p.spanner.children {
		cb, cd := source.Spanner(s.Scope(name), source.SpannerConfig{Project: src.Project, Instance: src.Instance, Database: src.Database, Table: name})
		all = append(all, cb)
		deads = append(deads, cd)
	}
	if len(all) == 1 {
		return batches, deads, nil
	}
	return beam.Flatten(s, all...), deads, nil
}

func init() {
	register.DoFn3x1[[]byte, func([]byte), func([]byte), error](&splitTableFn{})
	register.DoFn3x0[[]byte, func(*string) bool, func([]byte)](&afterFn{})
	register.Iter1[string]()
}

// writeSpanner writes the main table's rows, then each level of
// interleaved children once the level above is written (the emulator and
// Spanner reject a child whose parent row does not exist yet).
func (p *Plan) writeSpanner(s beam.Scope, batches beam.PCollection) ([]beam.PCollection, error) {
	tgt := p.Config.Target
	cfg := sink.SpannerSinkConfig{Project: tgt.Project, Instance: tgt.Instance, Database: tgt.Database,
		Table: p.spanner.targets[0].Name, Mode: p.Config.Write.Mode,
		MaxMutations: p.Config.Write.BatchMutations, MaxBytes: p.Config.Write.BatchBytes, MaxRows: p.Config.Write.BatchRows,
		CommitPerElement: true, Parallelism: p.Config.Write.Parallelism, Guard: p.Guard()} // one planned batch, one commit
	if len(p.spanner.targets) == 1 {
		return []beam.PCollection{sink.Spanner(s, cfg, batches)}, nil
	}
	var deads []beam.PCollection
	rest := batches
	for i, t := range p.spanner.targets {
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
