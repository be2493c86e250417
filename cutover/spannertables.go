package cutover

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"cloud.google.com/go/spanner"
	"google.golang.org/api/iterator"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// spannerTable is one table of a Spanner migration on both sides: the
// main table (the root) or one of its interleaved children, whose new
// table is interleaved under the new root the same way (its key is the
// new root's key followed by its own columns). A child row belongs to
// its root row's user and cohort (see the package doc, "Interleaved
// tables").
type spannerTable struct {
	old, new         *spannerdb.Table
	oldCols, newCols []string
	oldKeyCols       map[string]bool // the old table's key columns
	parent           *spannerTable   // nil for the root
	children         []*spannerTable // the tables interleaved directly in this one
}

// spannerTables reads the old and new tables of job: the main table and
// its interleaved children (migration.SpannerSchemas.Children), each
// child's new table by the same name in new's database. A migration with
// children must find a record's user in a column every child has (a
// column of the main table's key), so that a child row routes as its
// root row does.
func spannerTables(ctx context.Context, oldC, newC *spanner.Client, job *migration.Job, user cohort.User) (root *spannerTable, byName map[string]*spannerTable, err error) {
	cfg := job.Config
	newName := job.Spec.TargetTable
	if newName == "" {
		newName = cfg.Source.Table
	}
	read := func(oldName, newName string) (*spannerTable, error) {
		t := &spannerTable{}
		if t.old, err = spannerdb.ReadTable(ctx, oldC, oldName); err != nil {
			return nil, err
		}
		if t.new, err = spannerdb.ReadTable(ctx, newC, newName); err != nil {
			return nil, err
		}
		t.oldCols, t.newCols = t.old.ColumnNames(), t.new.ColumnNames()
		t.oldKeyCols = map[string]bool{}
		for _, kc := range t.old.Key.Columns {
			t.oldKeyCols[kc.Name] = true
		}
		return t, nil
	}
	if root, err = read(cfg.Source.Table, newName); err != nil {
		return nil, nil, err
	}
	byName = map[string]*spannerTable{strings.ToLower(root.old.Name): root}
	var children []string
	if job.Spanner != nil {
		for name := range job.Spanner.Children {
			children = append(children, name)
		}
	}
	// Parents before children: a child's parent is the root or a child
	// read before it.
	for len(children) > 0 {
		var rest []string
		for _, name := range children {
			ot := job.Spanner.Children[name]
			parent := byName[strings.ToLower(ot.Parent)]
			if parent == nil {
				rest = append(rest, name)
				continue
			}
			if user.From != cohort.FromField || ot.Column(user.Name) == nil {
				return nil, nil, fmt.Errorf("cutover.NewSpanner: interleaved table %s has no column %s: with interleaved tables, cohort.user must be a column of %s's key, which every child row carries", name, user, root.old.Name)
			}
			t, err := read(ot.Name, ot.Name)
			if err != nil {
				return nil, nil, err
			}
			if !strings.EqualFold(t.new.Parent, parent.new.Name) {
				return nil, nil, fmt.Errorf("cutover.NewSpanner: new table %s is interleaved in %q, not in %s", t.new.Name, t.new.Parent, parent.new.Name)
			}
			t.parent = parent
			parent.children = append(parent.children, t)
			byName[strings.ToLower(t.old.Name)] = t
		}
		if len(rest) == len(children) {
			return nil, nil, fmt.Errorf("cutover.NewSpanner: interleaved tables %s are not under %s", strings.Join(rest, ", "), root.old.Name)
		}
		children = rest
	}
	return root, byName, nil
}

// descendants are the tables interleaved in t, at every level.
func (t *spannerTable) descendants() []*spannerTable {
	var out []*spannerTable
	for _, c := range t.children {
		out = append(append(out, c), c.descendants()...)
	}
	return out
}

// ancestors are t's parent, its parent's, ..., the root last.
func (t *spannerTable) ancestors() []*spannerTable {
	var out []*spannerTable
	for p := t.parent; p != nil; p = p.parent {
		out = append(out, p)
	}
	return out
}

// keyText is the text of an old row's key (values in t's key order) as
// the library names it in messages and the repair log: rekey's key
// notation, after the table's name for a child ("Orders[7,1]").
func (t *spannerTable) keyText(vals []rewrite.Value) string {
	return phases.SpannerKeyText(t.old.Name, t.parent != nil, vals)
}

// touchedKey is the text of new record nr's key (a row of t) in the
// touched marks: the root's as it always was, a child's after its table's
// name.
func (t *spannerTable) touchedKey(nr *record.Record) (string, error) {
	k, err := spannerdb.KeyOf(nr, t.new)
	if err != nil {
		return "", err
	}
	return phases.SpannerKeyText(t.new.Name, t.new.Parent != "", k), nil
}

// table is the table of rec (the root when rec names none).
func (s *Spanner) table(rec *record.Record) (*spannerTable, error) {
	if rec.Table == "" {
		rec.Table = s.root.old.Name
	}
	t := s.tables[strings.ToLower(rec.Table)]
	if t == nil {
		return nil, fmt.Errorf("cutover: a row of table %s, which is neither %s nor one of its interleaved tables", rec.Table, s.root.old.Name)
	}
	return t, nil
}

// parseOldKey reads a key as keyText wrote it for an old row: the table
// and the record of its key columns.
func (s *Spanner) parseOldKey(text string) (*spannerTable, record.Record, error) {
	t, keyText := s.root, text
	if i := strings.IndexByte(text, '['); i > 0 {
		t = s.tables[strings.ToLower(text[:i])]
		keyText = text[i:]
		if t == nil || t.parent == nil {
			return nil, record.Record{}, fmt.Errorf("no interleaved table %s", text[:i])
		}
	}
	pk, err := rewrite.ParseKey(keyText, &t.old.Key)
	if err != nil || pk.IsDatastore || len(pk.Values) != len(t.old.Key.Columns) {
		return nil, record.Record{}, fmt.Errorf("its key is not one of %s (%v)", t.old.Name, err)
	}
	key := record.Record{Table: t.old.Name}
	for i, kc := range t.old.Key.Columns {
		key.Fields = append(key.Fields, record.Field{Name: kc.Name, Value: record.FromKeyValue(pk.Values[i])})
	}
	return t, key, nil
}

// placeholders are the new side's writes that make sure the ancestors of
// nr (a new row of child table t) exist in new: an InsertOrUpdate of each
// ancestor's key columns alone, which creates the row where it is missing
// (its other columns NULL until the backfill copies it) and changes
// nothing where it exists. A call writes them only where old is written
// first (old took the row, so its ancestors are there; new may not hold
// them yet before the backfill).
func placeholders(t *spannerTable, nr *record.Record) ([]*spanner.Mutation, error) {
	var out []*spanner.Mutation
	anc := t.ancestors()
	for i := len(anc) - 1; i >= 0; i-- {
		a := anc[i].new
		k, err := spannerdb.SpannerKey(nr, a)
		if err != nil {
			return nil, err
		}
		cols := make([]string, len(a.Key.Columns))
		for j, c := range a.Key.Columns {
			cols[j] = c.Name
		}
		out = append(out, spanner.InsertOrUpdate(a.Name, cols, []any(k)))
	}
	return out, nil
}

// subtreeDeletes are the deletes, on one side, of every row interleaved
// under the row whose key is k (of table t, old's or new's by isNew): one
// key range per descendant table. They go in the transaction of the row's
// own delete, whatever its tables' ON DELETE.
func subtreeDeletes(t *spannerTable, k spanner.Key, isNew bool) []*spanner.Mutation {
	var out []*spanner.Mutation
	for _, d := range t.descendants() {
		name := d.old.Name
		if isNew {
			name = d.new.Name
		}
		out = append(out, spanner.Delete(name, spanner.KeyRange{Start: k, End: k, Kind: spanner.ClosedClosed}))
	}
	return out
}

// subtreeMarks returns the touched keys of the rows interleaved under
// the row deleted by the call (table t; oldKey its key in old, newKey in
// new), as old and new hold them now: each gets a mark of the delete, so
// that a backfill that read one before does not bring it back.
func (s *Spanner) subtreeMarks(ctx context.Context, t *spannerTable, oldKey, newKey spanner.Key) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(tk string) {
		if !seen[tk] {
			seen[tk] = true
			out = append(out, tk)
		}
	}
	for _, d := range t.descendants() {
		// Old's rows, rewritten to their new keys.
		err := readKeys(ctx, s.oldC, d.old, oldKey, func(rec record.Record) error {
			nr, err := s.newRecord(&rec)
			if err != nil {
				return err
			}
			tk, err := d.touchedKey(nr)
			if err == nil {
				add(tk)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		err = readKeys(ctx, s.newC, d.new, newKey, func(rec record.Record) error {
			tk, err := d.touchedKey(&rec)
			if err == nil {
				add(tk)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readKeys reads, strongly, the key columns of the rows of t under key
// prefix k.
func readKeys(ctx context.Context, c *spanner.Client, t *spannerdb.Table, k spanner.Key, each func(record.Record) error) error {
	cols := make([]string, len(t.Key.Columns))
	for i, kc := range t.Key.Columns {
		cols[i] = kc.Name
	}
	it := c.Single().Read(ctx, t.Name, spanner.KeyRange{Start: k, End: k, Kind: spanner.ClosedClosed}, cols)
	defer it.Stop()
	for {
		row, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cutover: reading the rows of %s under %s: %w", t.Name, k, err)
		}
		rec, err := spannerdb.RowToRecord(row, t)
		if err != nil {
			return err
		}
		if err := each(rec); err != nil {
			return err
		}
	}
}
