package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// This file is rekey's one comparison of records by content, as a store
// keeps them: what the demo, the verify job, the writers' read-backs and
// the tests use to decide whether a row or an entity arrived intact.

// Same reports whether two records hold the same content (Diff is "").
func Same(a, b *Record) bool { return Diff(a, b) == "" }

// Diff describes how got differs from want, or returns "" when they hold
// the same content:
//
//   - the same table or kind (case-insensitively for Spanner rows, whose
//     identifiers are) and the same Datastore key;
//   - the same fields, matched by name regardless of order (Datastore
//     returns properties sorted by name; Spanner rows match names
//     case-insensitively), with the same NoIndex;
//   - equal values (SameValue): by type and value, floats bit for bit,
//     timestamps by instant, JSON as JSON values, arrays and embedded
//     entities element by element.
func Diff(got, want *Record) string {
	row := got.Key == nil && want.Key == nil
	if got.Table != want.Table && !(row && strings.EqualFold(got.Table, want.Table)) {
		return fmt.Sprintf("table %q, want %q", got.Table, want.Table)
	}
	switch {
	case (got.Key == nil) != (want.Key == nil):
		return fmt.Sprintf("key %v, want %v", got.Key, want.Key)
	case got.Key != nil && !got.Key.Equal(*want.Key):
		return fmt.Sprintf("key %s, want %s", got.Key, want.Key)
	}
	return fieldsDiff(got.Fields, want.Fields, row, nil)
}

// FieldsDiff compares fields as Diff does (names exactly), leaving out
// the names in skip on both sides (case-insensitively); "" when equal.
func FieldsDiff(got, want []Field, skip ...string) string {
	return fieldsDiff(got, want, false, skip)
}

func fieldsDiff(got, want []Field, fold bool, skip []string) string {
	skipped := func(name string) bool {
		return slices.ContainsFunc(skip, func(s string) bool { return strings.EqualFold(s, name) })
	}
	find := func(fs []Field, name string) int {
		if i := slices.IndexFunc(fs, func(f Field) bool { return f.Name == name }); i >= 0 || !fold {
			return i
		}
		return slices.IndexFunc(fs, func(f Field) bool { return strings.EqualFold(f.Name, name) })
	}
	var diffs []string
	for _, w := range want {
		if skipped(w.Name) {
			continue
		}
		i := find(got, w.Name)
		switch {
		case i < 0:
			diffs = append(diffs, fmt.Sprintf("%s missing (want %v)", w.Name, w.Value))
		case got[i].NoIndex != w.NoIndex:
			diffs = append(diffs, fmt.Sprintf("%s: NoIndex %t, want %t", w.Name, got[i].NoIndex, w.NoIndex))
		case !SameValue(got[i].Value, w.Value):
			diffs = append(diffs, fmt.Sprintf("%s = %v (%s), want %v (%s)", w.Name, got[i].Value, got[i].Value.Kind, w.Value, w.Value.Kind))
		}
	}
	for _, g := range got {
		if !skipped(g.Name) && find(want, g.Name) < 0 {
			diffs = append(diffs, fmt.Sprintf("unexpected %s = %v", g.Name, g.Value))
		}
	}
	if len(diffs) > 3 {
		diffs = append(diffs[:3], fmt.Sprintf("and %d more", len(diffs)-3))
	}
	return strings.Join(diffs, "; ")
}

// SameValue compares values by type and value: bit for bit
// (Value.Equal: floats by their bits, timestamps by instant), except JSON,
// compared as JSON values (Spanner normalizes JSON text), and arrays and
// embedded entities, compared element by element in the same way.
func SameValue(a, b Value) bool {
	switch {
	case a.Kind == KindJSON && b.Kind == KindJSON:
		return JSONEqual(a.Str, b.Str)
	case a.Kind == KindArray && b.Kind == KindArray:
		if len(a.Array) != len(b.Array) {
			return false
		}
		for i := range a.Array {
			if !SameValue(a.Array[i], b.Array[i]) {
				return false
			}
		}
		return true
	case a.Kind == KindEntity && b.Kind == KindEntity:
		return fieldsDiff(a.Entity, b.Entity, false, nil) == ""
	}
	return a.Equal(b)
}

// JSONEqual reports whether two JSON texts hold the same value (object
// keys in any order, numbers compared as written); texts that are not
// JSON are compared as text.
func JSONEqual(a, b string) bool {
	var x, y any
	da := json.NewDecoder(bytes.NewReader([]byte(a)))
	da.UseNumber()
	db := json.NewDecoder(bytes.NewReader([]byte(b)))
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return a == b
	}
	return reflect.DeepEqual(x, y)
}
