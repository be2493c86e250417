// Package rekeyer rewrites whole records: the key with a rewrite strategy,
// and everything that must follow it — interleaved Spanner child rows
// (whose key starts with the parent key), Datastore key-valued properties
// that point at migrated entities, the optional copy of the old key — and
// converts between Datastore entities and Spanner rows when the source and
// target stores differ. It is pure (no Beam, no clients): the pipeline's
// rewrite stage, the planner and the cutover library share it.
package rekeyer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// Options configure a Rekeyer.
type Options struct {
	Strategy rewrite.Strategy
	// SourceStore and TargetStore are Spanner or Datastore (a file source
	// holds records of its target's shape, so it uses the target store).
	SourceStore, TargetStore string

	// Table is the Spanner source table (rows of other tables are
	// children, see Children); Key is its primary key. For a Datastore
	// source going to Spanner, Key names the Spanner key columns the key
	// path maps to: one column per path element, root first, holding the
	// element's id (INT64) or name (STRING).
	Table string
	Key   rewrite.KeySchema
	// Children are interleaved child tables, by name, with their primary
	// keys; each starts with the parent's key columns.
	Children map[string]rewrite.KeySchema
	// TargetTable renames the table (Spanner) of the main table's rows.
	TargetTable string

	// Kind is the Datastore kind migrated (source kind, or target kind for
	// rows going to Datastore); TargetKind renames it ("" keeps it), and
	// TargetNamespace moves entities to another namespace ("" keeps it).
	Kind, TargetKind, TargetNamespace string
	// SourceNamespace is the namespace TargetNamespace moves entities
	// from: a reference Invert finds in TargetNamespace goes back to it.
	SourceNamespace string
	// DescendantKinds are the kinds of migrated descendant entities.
	DescendantKinds []string
	// References are properties holding keys of migrated entities (of Kind
	// or a descendant kind); their keys are rewritten like the entities'
	// own keys.
	References []string
	// KeepOriginalKey, if set, is the property or column that receives the
	// old key (a key value in Datastore, its JSON notation in Spanner).
	KeepOriginalKey string
	// ReferencesTo are properties holding keys of a kind migrated in
	// another run, each with the rewrite that kind got there (Datastore
	// targets).
	ReferencesTo []ReferenceTo
	// StrictColumns, for a Datastore source going to Spanner, refuses an
	// entity with a property a column keeps only as text (a key, an
	// embedded entity, a geo point) instead of flattening it: a staged
	// cutover reads new rows back as entities, and could not give such a
	// property back.
	StrictColumns bool
}

// ReferenceTo is a property whose key values point at entities of Kind,
// migrated in another run with Strategy (and that run's kind and
// namespace renames, "" for none).
type ReferenceTo struct {
	Property        string
	Kind            string
	Strategy        rewrite.Strategy
	TargetKind      string
	TargetNamespace string
	// SourceNamespace is the namespace that run moved the kind's entities
	// from to TargetNamespace: where Invert moves a reference back.
	SourceNamespace string
}

// Rekeyer rewrites records. It is safe for concurrent use.
type Rekeyer struct {
	o        Options
	sp       *rewrite.SpannerRewriter
	children map[string]childRewriter
	ds       *rewrite.DatastoreRewriter
	refs     map[string]bool
	foreign  map[string]*foreignRef // ReferencesTo by property
}

type foreignRef struct {
	ReferenceTo
	ds  *rewrite.DatastoreRewriter
	inv referenceTo // what InvertReferences needs of it
}

type childRewriter struct {
	in, out rewrite.KeySchema
	parent  int // number of leading parent key columns
}

// New checks the options and binds the strategy.
func New(o Options) (*Rekeyer, error) {
	rk := &Rekeyer{o: o, refs: map[string]bool{}, foreign: map[string]*foreignRef{}}
	for _, r := range o.References {
		rk.refs[r] = true
	}
	var err error
	for _, r := range o.ReferencesTo {
		f := &foreignRef{ReferenceTo: r}
		if f.ds, err = r.Strategy.Datastore(); err != nil {
			return nil, fmt.Errorf("reference %s to %s: %w", r.Property, r.Kind, err)
		}
		f.inv = referenceTo{ds: f.ds, strategy: r.Strategy, kind: r.Kind, targetKind: r.TargetKind,
			targetNamespace: r.TargetNamespace, sourceNamespace: r.SourceNamespace, foreign: true}
		rk.foreign[r.Property] = f
	}
	switch o.TargetStore {
	case record.Spanner:
		if len(o.Key.Columns) == 0 {
			return nil, fmt.Errorf("the Spanner key of %s is unknown (set source.key)", o.Table)
		}
		if rk.sp, err = o.Strategy.Spanner(o.Key); err != nil {
			return nil, err
		}
		rk.children = map[string]childRewriter{}
		for name, ck := range o.Children {
			if len(ck.Columns) < len(o.Key.Columns) {
				return nil, fmt.Errorf("child table %s: its key %s does not start with the key of %s", name, ck, o.Table)
			}
			for i, c := range o.Key.Columns {
				if !strings.EqualFold(ck.Columns[i].Name, c.Name) || ck.Columns[i].Type != c.Type {
					return nil, fmt.Errorf("child table %s: its key %s does not start with the key of %s %s", name, ck, o.Table, o.Key)
				}
			}
			out := rewrite.KeySchema{Table: name, Columns: append(append([]rewrite.Column(nil), rk.sp.Out().Columns...), ck.Columns[len(o.Key.Columns):]...)}
			rk.children[strings.ToLower(name)] = childRewriter{in: ck, out: out, parent: len(o.Key.Columns)}
		}
	case record.Datastore:
		if rk.ds, err = o.Strategy.Datastore(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown target store %q", o.TargetStore)
	}
	return rk, nil
}

// SpannerOut is the target key of the main table (Spanner targets).
func (rk *Rekeyer) SpannerOut() rewrite.KeySchema {
	if rk.sp == nil {
		return rewrite.KeySchema{}
	}
	return rk.sp.Out()
}

// ChildOut is the target key of an interleaved child table.
func (rk *Rekeyer) ChildOut(table string) (rewrite.KeySchema, bool) {
	c, ok := rk.children[strings.ToLower(table)]
	return c.out, ok
}

// Adds is how many fields a Rewrite may append to a record at most: the
// target key's columns the source key lacks, and the kept original key.
// It only sizes records (the rewrite stage's copies of their fields,
// record.DecodeBatchSpare): a record given less room grows as usual.
func (rk *Rekeyer) Adds() int {
	n := 0
	if rk.o.KeepOriginalKey != "" {
		n++
	}
	if rk.o.TargetStore == record.Spanner && rk.sp != nil {
		extra := len(rk.sp.Out().Columns) - len(rk.o.Key.Columns)
		if rk.o.SourceStore == record.Datastore { // every key column is new
			extra = len(rk.sp.Out().Columns)
		}
		for _, c := range rk.children {
			extra = max(extra, len(c.out.Columns)-len(c.in.Columns))
		}
		n += max(extra, 0)
	}
	return n
}

// Rewrite rewrites rec in place. On error rec is unchanged where it
// matters (the caller dead-letters the original), and nothing has been
// written into the array of rec.Fields: every check comes before the first
// write to it, so a caller that rewrites records in place
// (transforms.RewriteOwning) still holds the record as it was
// (TestFailedRewriteWritesNoField).
func (rk *Rekeyer) Rewrite(rec *record.Record) error { return rk.RewriteIn(rec, nil) }

// Scratch holds the key values a rewrite works with, for a caller that
// rewrites many records in one goroutine to reuse (RewriteIn): a Spanner
// row's old and new key, two allocations a row otherwise. The zero value
// is ready; a Scratch is not safe for concurrent use. Nothing a rewritten
// record holds points into it.
type Scratch struct{ old, new []rewrite.Value }

// RewriteIn is Rewrite with s's buffers (nil: new ones).
func (rk *Rekeyer) RewriteIn(rec *record.Record, s *Scratch) error {
	if rk.o.SourceStore == record.Datastore && rk.o.TargetStore == record.Spanner {
		if err := rk.entityToRow(rec); err != nil {
			return err
		}
	}
	if rk.o.SourceStore == record.Spanner && rk.o.TargetStore == record.Datastore {
		if err := rk.rowToEntity(rec); err != nil {
			return err
		}
	}
	if rk.o.TargetStore == record.Spanner {
		if s == nil {
			s = &Scratch{}
		}
		return rk.rewriteRow(rec, s)
	}
	return rk.rewriteEntity(rec)
}

func (rk *Rekeyer) rewriteRow(rec *record.Record, s *Scratch) error {
	in, out := rk.o.Key, rk.sp.Out()
	parent := 0
	main := rec.Table == "" || strings.EqualFold(rec.Table, rk.o.Table)
	if !main {
		c, ok := rk.children[strings.ToLower(rec.Table)]
		if !ok {
			return fmt.Errorf("row of table %s: not %s and not one of its interleaved children", rec.Table, rk.o.Table)
		}
		in, out, parent = c.in, c.out, c.parent
	}
	old, err := appendKeyValues(s.old[:0], rec, in)
	if err != nil {
		return err
	}
	s.old = old
	var newKey []rewrite.Value
	if main {
		newKey, err = rk.sp.Rewrite(s.new[:0], old)
	} else {
		newKey, err = rk.sp.Rewrite(s.new[:0], old[:parent])
		if err == nil {
			newKey = append(newKey, old[parent:]...)
			err = rewrite.ValidateSpannerKey(out, newKey)
		}
	}
	if err != nil {
		return err
	}
	s.new = newKey
	if rk.o.KeepOriginalKey != "" {
		rec.Set(rk.o.KeepOriginalKey, record.String(rewrite.FormatKey(old, len(old) == 1)))
	}
	for i, c := range out.Columns {
		rec.Set(c.Name, record.FromKeyValue(newKey[i]))
	}
	if main && rk.o.TargetTable != "" {
		rec.Table = rk.o.TargetTable
	} else if main && rec.Table == "" {
		rec.Table = rk.o.Table
	}
	return nil
}

// keyValues reads the values of the key columns of s from a row.
func keyValues(rec *record.Record, s rewrite.KeySchema) ([]rewrite.Value, error) {
	return appendKeyValues(make([]rewrite.Value, 0, len(s.Columns)), rec, s)
}

// appendKeyValues appends the values of the key columns of s in rec to dst.
func appendKeyValues(dst []rewrite.Value, rec *record.Record, s rewrite.KeySchema) ([]rewrite.Value, error) {
	for _, c := range s.Columns {
		v, ok := rec.Get(c.Name)
		if !ok {
			return nil, fmt.Errorf("row has no key column %s", c.Name)
		}
		kv, err := record.KeyValue(v, c.Type)
		if err != nil {
			return nil, fmt.Errorf("key column %s: %w", c.Name, err)
		}
		dst = append(dst, kv)
	}
	return dst, nil
}

func (rk *Rekeyer) rewriteEntity(rec *record.Record) error {
	if rec.Key == nil {
		return fmt.Errorf("entity has no key")
	}
	old := *rec.Key
	if err := rewrite.ValidateDatastoreKey(old); err != nil {
		return err
	}
	nk, err := rk.rekeyDatastore(old)
	if err != nil {
		return err
	}
	fields := rec.Fields
	if len(rk.refs) > 0 || len(rk.foreign) > 0 {
		fields = make([]record.Field, len(rec.Fields))
		copy(fields, rec.Fields)
		for i := range fields {
			var v record.Value
			var err error
			switch f := rk.foreign[fields[i].Name]; {
			case f != nil:
				v, err = mapKeys(fields[i].Value, func(k rewrite.DatastoreKey) (rewrite.DatastoreKey, bool, error) {
					if k.Leaf().Kind != f.Kind {
						return k, false, nil
					}
					nk, err := rekeyWith(f.ds, k, f.Kind, f.TargetKind, f.TargetNamespace)
					return nk, true, err
				})
			case rk.refs[fields[i].Name]:
				v, err = rk.rekeyValue(fields[i].Value)
			default:
				continue
			}
			if err != nil {
				return fmt.Errorf("reference property %s: %w", fields[i].Name, err)
			}
			fields[i].Value = v
		}
	}
	for _, f := range fields {
		if err := rewrite.ValidatePropertyName(f.Name); err != nil {
			return err
		}
	}
	if rk.o.KeepOriginalKey != "" {
		fields = append(fields[:len(fields):len(fields)], record.Field{Name: rk.o.KeepOriginalKey, Value: record.Key(old)})
	}
	rec.Key = &nk
	rec.Table = nk.Leaf().Kind
	rec.Fields = fields
	return nil
}

// rekeyDatastore rewrites a Datastore key and applies the kind and
// namespace renames.
func (rk *Rekeyer) rekeyDatastore(k rewrite.DatastoreKey) (rewrite.DatastoreKey, error) {
	return rekeyWith(rk.ds, k, rk.o.Kind, rk.o.TargetKind, rk.o.TargetNamespace)
}

// rekeyWith rewrites k with ds, then renames kind to targetKind and moves
// the key to targetNamespace ("" for no rename, no move).
func rekeyWith(ds *rewrite.DatastoreRewriter, k rewrite.DatastoreKey, kind, targetKind, targetNamespace string) (rewrite.DatastoreKey, error) {
	nk, err := ds.Rewrite(k)
	if err != nil {
		return nk, err
	}
	if targetKind != "" && kind != "" {
		nk = nk.Clone()
		for i := range nk.Path {
			if nk.Path[i].Kind == kind {
				nk.Path[i].Kind = targetKind
			}
		}
	}
	if targetNamespace != "" {
		nk.Namespace = targetNamespace
	}
	return nk, rewrite.ValidateDatastoreKey(nk)
}

// rekeyValue rewrites the keys in a reference value (a key, or an array
// of keys) that point at the migrated entities; other values pass
// unchanged.
func (rk *Rekeyer) rekeyValue(v record.Value) (record.Value, error) {
	return mapKeys(v, func(k rewrite.DatastoreKey) (rewrite.DatastoreKey, bool, error) {
		if !rk.points(k) {
			return k, false, nil
		}
		nk, err := rk.rekeyDatastore(k)
		return nk, true, err
	})
}

// mapKeys applies f to the key of a key value, or to each key of an
// array; f says whether it changed the key. Other values pass unchanged.
func mapKeys(v record.Value, f func(rewrite.DatastoreKey) (rewrite.DatastoreKey, bool, error)) (record.Value, error) {
	switch v.Kind {
	case record.KindKey:
		if v.Key == nil {
			return v, nil
		}
		nk, changed, err := f(*v.Key)
		if err != nil || !changed {
			return v, err
		}
		return record.Key(nk), nil
	case record.KindArray:
		out := make([]record.Value, len(v.Array))
		for i, e := range v.Array {
			ne, err := mapKeys(e, f)
			if err != nil {
				return v, err
			}
			out[i] = ne
		}
		return record.Value{Kind: record.KindArray, Array: out}, nil
	}
	return v, nil
}

// Unmapped counts the key values of rec (an entity before its rewrite)
// that point at a migrated kind — this run's kind or a descendant kind,
// or a kind of ReferencesTo — through a property that is neither in
// References nor in ReferencesTo: left as they are, they keep pointing at
// the old keys.
func (rk *Rekeyer) Unmapped(rec *record.Record) int {
	if rec.Key == nil || rk.o.TargetStore != record.Datastore || (rk.o.Kind == "" && len(rk.o.ReferencesTo) == 0) {
		return 0
	}
	n := 0
	for _, f := range rec.Fields {
		if k := f.Value.Kind; k != record.KindKey && k != record.KindArray {
			continue // the common case: no key inside, nothing to look at
		}
		if rk.refs[f.Name] || rk.foreign[f.Name] != nil || f.Name == rk.o.KeepOriginalKey {
			continue
		}
		_, _ = mapKeys(f.Value, func(k rewrite.DatastoreKey) (rewrite.DatastoreKey, bool, error) {
			leaf := k.Leaf().Kind
			if (rk.o.Kind != "" && rk.points(k)) || slices.ContainsFunc(rk.o.ReferencesTo, func(r ReferenceTo) bool { return r.Kind == leaf }) {
				n++
			}
			return k, false, nil
		})
	}
	return n
}

// points reports whether a referenced key is one of the migrated
// entities: its kind is the migrated kind or a migrated descendant kind
// (any kind if none is set).
func (rk *Rekeyer) points(k rewrite.DatastoreKey) bool {
	leaf := k.Leaf().Kind
	return rk.o.Kind == "" || leaf == rk.o.Kind || slices.Contains(rk.o.DescendantKinds, leaf)
}

// entityToRow turns a Datastore entity into a Spanner row: the key path's
// ids and names fill the key columns (one per element, root first), the
// properties become columns.
func (rk *Rekeyer) entityToRow(rec *record.Record) error {
	if rec.Key == nil {
		return fmt.Errorf("entity has no key")
	}
	k := *rec.Key
	cols := rk.o.Key.Columns
	if len(k.Path) != len(cols) {
		return fmt.Errorf("key %s has %d path elements, the Spanner key %s has %d columns", k, len(k.Path), rk.o.Key, len(cols))
	}
	fields := make([]record.Field, 0, len(cols)+len(rec.Fields))
	for i, e := range k.Path {
		var v record.Value
		switch {
		case cols[i].Type == rewrite.TypeInt64 && !e.IsName():
			v = record.Int(e.ID)
		case cols[i].Type == rewrite.TypeString:
			// The element's text form keeps id 42 ("42") and name "42"
			// ("'42") apart.
			v = record.String(rewrite.ElementText(e))
		default:
			return fmt.Errorf("key %s: element %s does not fit key column %s %s", k, e, cols[i].Name, cols[i].SQLType())
		}
		fields = append(fields, record.Field{Name: cols[i].Name, Value: v})
	}
	for _, f := range rec.Fields {
		if what := Flattened(f.Value); what != "" && rk.o.StrictColumns {
			return fmt.Errorf("property %s holds %s, which a Spanner column keeps only as text: the staged cutover could not read it back from new", f.Name, what)
		}
		fields = append(fields, record.Field{Name: f.Name, Value: flatten(f.Value)})
	}
	rec.Fields = fields
	rec.Key = nil
	rec.Table = rk.o.Table
	return nil
}

// Flattened names what v holds that a Spanner column keeps only as text
// or JSON (a key, an embedded entity, a geo point, in v or an element of
// it), "" for a value a column holds as it is.
func Flattened(v record.Value) string {
	switch v.Kind {
	case record.KindKey:
		return "a key"
	case record.KindEntity:
		return "an embedded entity"
	case record.KindGeoPoint:
		return "a geo point"
	case record.KindArray:
		for _, e := range v.Array {
			if what := Flattened(e); what != "" {
				return what
			}
		}
	}
	return ""
}

// flatten turns Datastore-only values into what a Spanner column holds:
// keys as their JSON notation, embedded entities and geo points as JSON.
func flatten(v record.Value) record.Value {
	switch v.Kind {
	case record.KindKey:
		if v.Key == nil {
			return record.Value{}
		}
		return record.String(rewrite.FormatDatastoreKey(*v.Key))
	case record.KindEntity, record.KindGeoPoint:
		return record.Value{Kind: record.KindJSON, Str: string(record.AppendJSONValue(nil, v))}
	case record.KindArray:
		out := make([]record.Value, len(v.Array))
		for i, e := range v.Array {
			out[i] = flatten(e)
		}
		return record.Value{Kind: record.KindArray, Array: out}
	}
	return v
}

// rowToEntity turns a Spanner row into a Datastore entity of kind Kind: a
// one-column INT64 key becomes the id, a STRING key the name; other key
// shapes use the key's JSON notation as the name. Every column, key
// columns included, becomes a property.
func (rk *Rekeyer) rowToEntity(rec *record.Record) error {
	if rk.o.Kind == "" {
		return fmt.Errorf("no target kind for rows of %s", rec.Table)
	}
	vals := make([]rewrite.Value, len(rk.o.Key.Columns))
	for i, c := range rk.o.Key.Columns {
		v, ok := rec.Get(c.Name)
		if !ok {
			return fmt.Errorf("row has no key column %s", c.Name)
		}
		kv, err := record.KeyValue(v, c.Type)
		if err != nil {
			return fmt.Errorf("key column %s: %w", c.Name, err)
		}
		vals[i] = kv
	}
	e := rewrite.PathElement{Kind: rk.o.Kind}
	switch {
	case len(vals) == 1 && vals[0].Type == rewrite.TypeInt64 && !vals[0].Null:
		e.ID = vals[0].Int
	case len(vals) == 1 && vals[0].Type == rewrite.TypeString && !vals[0].Null:
		// The inverse of entityToRow's text form: digits are an id, a
		// leading ' marks a name.
		pe, err := rewrite.ElementFromText(rk.o.Kind, vals[0].Str)
		if err != nil {
			return fmt.Errorf("key column %s: %w", rk.o.Key.Columns[0].Name, err)
		}
		e = pe
	default:
		e.Name = rewrite.FormatKey(vals, false)
	}
	rec.Key = &rewrite.DatastoreKey{Path: []rewrite.PathElement{e}}
	rec.Table = rk.o.Kind
	return nil
}

// Keeps reports whether the rewrite leaves the value of column (a column
// of a Spanner source table's key, or any other column, which it copies)
// as it is in the rows it writes: so a new row holds its old value, and a
// query of new on it selects what the same query of old does. It rewrites
// two probe keys of distinct values and compares; false for a Datastore
// target or a column the rewrite drops.
func (rk *Rekeyer) Keeps(column string) bool {
	if rk.o.TargetStore != record.Spanner || rk.o.Key.Index(column) < 0 {
		return rk.o.TargetStore == record.Spanner
	}
	for _, seed := range []int64{1234567, 7654321987} {
		rec := record.Record{Table: rk.o.Table}
		var want record.Value
		for i, c := range rk.o.Key.Columns {
			v := probeValue(c.Type, seed+int64(i))
			rec.Fields = append(rec.Fields, record.Field{Name: c.Name, Value: record.FromKeyValue(v)})
			if strings.EqualFold(c.Name, column) {
				want = record.FromKeyValue(v)
			}
		}
		if err := rk.Rewrite(&rec); err != nil {
			return false
		}
		got, ok := rec.Get(column)
		if !ok || !got.Equal(want) {
			return false
		}
	}
	return true
}

// probeValue is a value of type t made from n, distinct for distinct n.
func probeValue(t rewrite.Type, n int64) rewrite.Value {
	switch t {
	case rewrite.TypeString, rewrite.TypeNumeric:
		return rewrite.Value{Type: t, Str: strconv.FormatInt(n, 10)}
	case rewrite.TypeBytes:
		return rewrite.Bytes([]byte(strconv.FormatInt(n, 10)))
	case rewrite.TypeTimestamp:
		return rewrite.Value{Type: t, Time: time.Unix(n, 0).UTC()}
	case rewrite.TypeFloat64:
		return rewrite.Value{Type: t, Float: float64(n) + 0.5}
	case rewrite.TypeBool:
		return rewrite.Bool(n%2 == 1)
	}
	return rewrite.Value{Type: t, Int: n} // INT64, DATE
}
