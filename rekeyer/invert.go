package rekeyer

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// ErrNotInvertible is wrapped by Invert's errors for a record whose old
// key cannot be computed: the strategy has no inverse and no original key
// was kept, or the migration maps references or crosses stores.
var ErrNotInvertible = rewrite.ErrNotInvertible

// Invert turns a rewritten record (of the main Spanner table, or of the
// migrated kind) back into the record it was rewritten from, in place: the
// strategy's inverse gives the old key, or, where the strategy has none,
// the original key kept in KeepOriginalKey; the columns the rewrite added
// (and the kept key) are dropped and the old table or kind restored. A
// Datastore record's namespace is left for the caller to set (the source
// namespace), as is its database; its references are inverted
// (InvertReferences). A row of an interleaved child table gets its
// root's old key back in front of its own columns. Invert(Rewrite(r))
// holds r's content. A row of a Datastore → Spanner migration becomes
// its entity again (rowToOldEntity). Migrations from Spanner to
// Datastore or that map references to another run's kinds are not
// inverted (ErrNotInvertible).
func (rk *Rekeyer) Invert(rec *record.Record) error {
	if rk.o.SourceStore == record.Datastore && rk.o.TargetStore == record.Spanner {
		if len(rk.refs) > 0 || len(rk.foreign) > 0 || len(rk.children) > 0 {
			return fmt.Errorf("%w: rows with references or children back into entities", ErrNotInvertible)
		}
		if err := rk.invertRow(rec); err != nil {
			return err
		}
		return rk.rowToOldEntity(rec)
	}
	if rk.o.SourceStore != rk.o.TargetStore {
		return fmt.Errorf("%w: the migration goes from %s to %s", ErrNotInvertible, rk.o.SourceStore, rk.o.TargetStore)
	}
	if err := rk.InvertReferences(rec); err != nil {
		return err
	}
	if rk.o.TargetStore == record.Spanner {
		return rk.invertRow(rec)
	}
	return rk.invertEntity(rec)
}

func (rk *Rekeyer) invertRow(rec *record.Record) error {
	in, out := rk.o.Key, rk.sp.Out()
	t := rk.o.TargetTable
	main := rec.Table == "" || strings.EqualFold(rec.Table, t) || strings.EqualFold(rec.Table, rk.o.Table)
	if !main {
		c, ok := rk.children[strings.ToLower(rec.Table)]
		if !ok {
			return fmt.Errorf("%w: row of table %s, not of %s or one of its interleaved children", ErrNotInvertible, rec.Table, firstNonEmpty(t, rk.o.Table))
		}
		in, out = c.in, c.out
	}
	var old []rewrite.Value
	if rk.sp.Invertible() {
		nk, err := keyValues(rec, out)
		if err != nil {
			return err
		}
		// A child's key is its root's new key, then its own columns.
		root := len(rk.sp.Out().Columns)
		if old, err = rk.sp.Invert(nil, nk[:root]); err != nil {
			return err
		}
		old = append(old, nk[root:]...)
	} else if rk.o.KeepOriginalKey != "" {
		v, ok := rec.Get(rk.o.KeepOriginalKey)
		if !ok || v.Kind != record.KindString {
			return fmt.Errorf("%w: the row has no original key in %s", ErrNotInvertible, rk.o.KeepOriginalKey)
		}
		text := v.Str
		if len(in.Columns) == 1 && !strings.HasPrefix(strings.TrimSpace(text), "[") {
			text = "[" + text + "]"
		}
		pk, err := rewrite.ParseKey(text, &in)
		if err != nil {
			return fmt.Errorf("the original key %s in %s: %w", v.Str, rk.o.KeepOriginalKey, err)
		}
		old = pk.Values
	} else {
		return fmt.Errorf("%w: strategy %s has no inverse and keep_original_key is not set", ErrNotInvertible, rk.o.Strategy.Info().Name)
	}
	// Drop what the rewrite added: the new key columns that are not old
	// ones, and the kept key.
	drop := func(name string) bool {
		if rk.o.KeepOriginalKey != "" && strings.EqualFold(name, rk.o.KeepOriginalKey) {
			return true
		}
		if in.Index(name) >= 0 {
			return false
		}
		return out.Index(name) >= 0
	}
	fields := rec.Fields[:0:0]
	for _, f := range rec.Fields {
		if !drop(f.Name) {
			fields = append(fields, f)
		}
	}
	rec.Fields = fields
	for i, c := range in.Columns {
		rec.Set(c.Name, record.FromKeyValue(old[i]))
	}
	if main {
		rec.Table = rk.o.Table // a child keeps its table's name
	}
	return nil
}

// rowToOldEntity turns rec, a row of a Datastore → Spanner migration
// with its old key columns back (invertRow), into the entity it was
// made from (entityToRow's inverse): a key of kind Kind whose one path
// element is the key column's id (INT64) or name (STRING, in its text
// form), the other columns as properties, NULL ones left out (a property
// absent and one holding null both come back absent). A path of more
// than one element cannot come back: the ancestors' kinds are not in the
// row. The namespace and database are left for the caller to set.
func (rk *Rekeyer) rowToOldEntity(rec *record.Record) error {
	cols := rk.o.Key.Columns
	if len(cols) != 1 || rk.o.Kind == "" {
		return fmt.Errorf("%w: a row keyed by %d columns back into an entity of kind %q", ErrNotInvertible, len(cols), rk.o.Kind)
	}
	v, ok := rec.Get(cols[0].Name)
	if !ok {
		return fmt.Errorf("row has no key column %s", cols[0].Name)
	}
	var e rewrite.PathElement
	switch {
	case v.Kind == record.KindInt && cols[0].Type == rewrite.TypeInt64:
		e = rewrite.PathElement{Kind: rk.o.Kind, ID: v.Int}
	case v.Kind == record.KindString && cols[0].Type == rewrite.TypeString:
		var err error
		if e, err = rewrite.ElementFromText(rk.o.Kind, v.Str); err != nil {
			return fmt.Errorf("key column %s: %w", cols[0].Name, err)
		}
	default:
		return fmt.Errorf("key column %s holds %s, not a key element", cols[0].Name, v)
	}
	fields := make([]record.Field, 0, len(rec.Fields))
	for _, f := range rec.Fields {
		if f.Value.Kind != record.KindNull && !strings.EqualFold(f.Name, cols[0].Name) {
			fields = append(fields, f)
		}
	}
	rec.Key = &rewrite.DatastoreKey{Path: []rewrite.PathElement{e}}
	rec.Table = rk.o.Kind
	rec.Fields = fields
	return nil
}

func (rk *Rekeyer) invertEntity(rec *record.Record) error {
	if rec.Key == nil {
		return errors.New("entity has no key")
	}
	nk := rec.Key.Clone()
	if rk.o.TargetKind != "" && rk.o.Kind != "" {
		for i := range nk.Path {
			if nk.Path[i].Kind == rk.o.TargetKind {
				nk.Path[i].Kind = rk.o.Kind
			}
		}
	}
	var old rewrite.DatastoreKey
	fields := rec.Fields
	kept := -1
	if rk.o.KeepOriginalKey != "" {
		kept = rec.Index(rk.o.KeepOriginalKey)
	}
	switch {
	case rk.ds.Invertible():
		var err error
		if old, err = rk.ds.Invert(nk); err != nil {
			return err
		}
	case kept >= 0 && fields[kept].Value.Kind == record.KindKey && fields[kept].Value.Key != nil:
		old = fields[kept].Value.Key.Clone()
	default:
		return fmt.Errorf("%w: strategy %s has no inverse and the entity keeps no original key", ErrNotInvertible, rk.o.Strategy.Info().Name)
	}
	if kept >= 0 {
		fields = append(fields[:kept:kept], fields[kept+1:]...)
	}
	old.Namespace, old.Database = rec.Key.Namespace, rec.Key.Database
	rec.Key = &old
	rec.Table = old.Leaf().Kind
	rec.Fields = fields
	return nil
}

// InvertReferences turns the keys a rewritten entity's reference
// properties (Options.References, and ReferencesTo with the other run's
// rewrite) hold back into the keys they were rewritten from, in place:
// the strategy's inverse of each key that points at a migrated entity
// (its kind renamed back), moved back from the target namespace to the
// source's. A strategy without an inverse cannot give them back
// (ErrNotInvertible); other properties are left. The record's fields are
// replaced, not changed: a shallow copy of the record keeps the
// rewritten values.
func (rk *Rekeyer) InvertReferences(rec *record.Record) error {
	if len(rk.refs) == 0 && len(rk.foreign) == 0 {
		return nil
	}
	rec.Fields = append([]record.Field(nil), rec.Fields...)
	own := referenceTo{ds: rk.ds, strategy: rk.o.Strategy, kind: rk.o.Kind, targetKind: rk.o.TargetKind,
		targetNamespace: rk.o.TargetNamespace, sourceNamespace: rk.o.SourceNamespace, descendants: rk.o.DescendantKinds}
	for i := range rec.Fields {
		name := rec.Fields[i].Name
		var r referenceTo
		switch f := rk.foreign[name]; {
		case f != nil:
			r = f.inv
		case rk.refs[name]:
			r = own
		default:
			continue
		}
		v, err := mapKeys(rec.Fields[i].Value, func(k rewrite.DatastoreKey) (rewrite.DatastoreKey, bool, error) {
			return r.invert(name, k)
		})
		if err != nil {
			return err
		}
		rec.Fields[i].Value = v
	}
	return nil
}

// referenceTo is what inverting a reference needs of the rewrite of the
// kind it points at: this run's (References) or another run's
// (ReferencesTo, foreign).
type referenceTo struct {
	ds                               *rewrite.DatastoreRewriter
	strategy                         rewrite.Strategy
	kind, targetKind                 string
	targetNamespace, sourceNamespace string
	descendants                      []string
	foreign                          bool
}

// invert turns key k of reference property prop back, if it points at
// the rewritten kind (false if it does not).
func (r referenceTo) invert(prop string, k rewrite.DatastoreKey) (rewrite.DatastoreKey, bool, error) {
	leaf := k.Leaf().Kind
	newKind := firstNonEmpty(r.targetKind, r.kind)
	switch {
	case r.foreign && (leaf != newKind || r.targetNamespace != "" && k.Namespace != r.targetNamespace):
		// Rewrite rewrote only keys of the kind, and moved them all.
		return k, false, nil
	case !r.foreign && newKind != "" && leaf != newKind && !slices.Contains(r.descendants, leaf):
		return k, false, nil
	}
	if !r.ds.Invertible() {
		return k, false, fmt.Errorf("%w: reference property %s: strategy %s has no inverse", ErrNotInvertible, prop, r.strategy.Info().Name)
	}
	nk := k.Clone()
	if r.targetKind != "" && r.kind != "" {
		for j := range nk.Path {
			if nk.Path[j].Kind == r.targetKind {
				nk.Path[j].Kind = r.kind
			}
		}
	}
	old, err := r.ds.Invert(nk)
	if err != nil {
		return k, false, fmt.Errorf("reference property %s: %w", prop, err)
	}
	old.Namespace, old.Database = k.Namespace, k.Database
	if r.targetNamespace != "" && k.Namespace == r.targetNamespace {
		old.Namespace = r.sourceNamespace
	}
	return old, true, nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
