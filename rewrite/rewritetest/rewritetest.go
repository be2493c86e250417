// Package rewritetest is the conformance suite every rewrite strategy must
// pass. For each store a strategy supports it checks, on a corpus of edge
// keys (empty and maximal strings, non-ASCII and invalid UTF-8, INT64 min
// and max, zero, NaN, pre-1970 timestamps, deep ancestor paths, …):
//
//   - no panic: binding and rewriting return errors, never panic;
//   - the input key is not modified;
//   - every rewritten key is valid for the target (types, limits);
//   - deterministic strategies give the same new key every time;
//   - the rewrite is injective: distinct old keys give distinct new keys;
//   - invertible strategies round-trip: Invert(Rewrite(k)) == k.
package rewritetest

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/rewrite"
)

// Run runs the whole suite on s, for every store s supports.
func Run(t *testing.T, s rewrite.Strategy) {
	t.Helper()
	info := s.Info()
	if info.Spanner {
		t.Run("spanner", func(t *testing.T) {
			bound := 0
			for _, schema := range Schemas() {
				if ok := Spanner(t, s, schema, SpannerKeys(schema)); ok {
					bound++
				}
			}
			if bound == 0 {
				t.Errorf("%s claims Spanner support but binds to none of the test schemas", info.Name)
			}
		})
	} else if _, err := s.Spanner(Schemas()[0]); err == nil {
		t.Errorf("%s: Info says no Spanner support, but Spanner() succeeded", info.Name)
	}
	if info.Datastore {
		t.Run("datastore", func(t *testing.T) { Datastore(t, s, DatastoreKeys()) })
	} else if _, err := s.Datastore(); err == nil {
		t.Errorf("%s: Info says no Datastore support, but Datastore() succeeded", info.Name)
	}
}

// Schemas returns the key schemas the suite binds strategies to: one
// column of every type, and composite keys with ASC and DESC columns.
func Schemas() []rewrite.KeySchema {
	var out []rewrite.KeySchema
	for _, spec := range []string{
		"Id INT64", "Name STRING(MAX)", "Code STRING(40)", "Raw BYTES(MAX)", "At TIMESTAMP",
		"Day DATE", "Flag BOOL", "Score FLOAT64", "Amount NUMERIC",
		"LastAccess TIMESTAMP, UserId STRING(MAX)",
		"UserId INT64, LastAccess TIMESTAMP DESC, Name STRING(MAX)",
		"Tenant STRING(MAX), Seq INT64 DESC, Raw BYTES(MAX), Day DATE, Flag BOOL, Amount NUMERIC",
	} {
		s, err := rewrite.ParseKeySchema("T", spec)
		if err != nil {
			panic(err)
		}
		out = append(out, s)
	}
	return out
}

// EdgeValues returns edge values of type t (valid and a few invalid ones).
func EdgeValues(t rewrite.Type) []rewrite.Value {
	var vs []rewrite.Value
	switch t {
	case rewrite.TypeInt64:
		for _, n := range []int64{0, 1, -1, 2, 10, 12, 21, 120, 1 << 32, math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1, 1234567890123} {
			vs = append(vs, rewrite.Int64(n))
		}
	case rewrite.TypeString:
		for _, s := range Strings() {
			vs = append(vs, rewrite.String(s))
		}
	case rewrite.TypeBytes:
		for _, b := range [][]byte{{}, {0}, {0xff}, {0, 0xff, 0}, []byte("abc"), []byte("abc\x00"), bytes.Repeat([]byte{0xab}, 4000), []byte("|")} {
			vs = append(vs, rewrite.Bytes(b))
		}
	case rewrite.TypeTimestamp:
		for _, ts := range []time.Time{
			time.Unix(0, 0), time.Unix(-1, 999999500), time.Unix(1700000000, 123456789),
			time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
			time.Date(2016, 1, 25, 15, 10, 10, 555555000, time.FixedZone("PST", -8*3600)),
		} {
			vs = append(vs, rewrite.Timestamp(ts))
		}
	case rewrite.TypeDate:
		vs = append(vs, rewrite.Date(1, 1, 1), rewrite.Date(1969, 12, 31), rewrite.Date(1970, 1, 1), rewrite.Date(9999, 12, 31), rewrite.Date(2024, 2, 29))
	case rewrite.TypeBool:
		vs = append(vs, rewrite.Bool(false), rewrite.Bool(true))
	case rewrite.TypeFloat64:
		for _, f := range []float64{0, 1, -1, 1.5, math.Inf(1), math.Inf(-1), math.NaN(), math.MaxFloat64, math.SmallestNonzeroFloat64} {
			vs = append(vs, rewrite.Float64(f))
		}
	case rewrite.TypeNumeric:
		for _, s := range []string{"0", "1", "-1", "1.5", "0.000000001", "-0.000000001", "99999999999999999999999999999.999999999", "-99999999999999999999999999999.999999999"} {
			v, err := rewrite.Numeric(s)
			if err != nil {
				panic(err)
			}
			vs = append(vs, v)
		}
	}
	return append(vs, rewrite.Null(t))
}

// Strings returns edge strings, including invalid UTF-8 and one at the
// Spanner key size limit.
func Strings() []string {
	return []string{
		"", "a", "A", "Customer1", "Customer2", "Customer10", "日本語", "🙂👍🏽", "e\u0301", "a/b", "'", "'x", "x'", "''",
		"0", "00", "007", "120", "021", "9223372036854775807", "99999999999999999999", "-", "|", "a|b", "a-b", " ", "\x00", "a\x00b",
		strings.Repeat("x", 1500), strings.Repeat("é", 1000), strings.Repeat("k", rewrite.MaxSpannerKeyBytes),
		"\xff", "a\xc3", "\xc3\x28", // invalid UTF-8
	}
}

// SpannerKeys builds the edge-key corpus for schema s: each column runs
// through its edge values while the others hold their first value, plus a
// few combinations.
func SpannerKeys(s rewrite.KeySchema) [][]rewrite.Value {
	edges := make([][]rewrite.Value, len(s.Columns))
	for i, c := range s.Columns {
		edges[i] = EdgeValues(c.Type)
	}
	var keys [][]rewrite.Value
	for i := range s.Columns {
		for _, v := range edges[i] {
			k := make([]rewrite.Value, len(s.Columns))
			for j := range k {
				k[j] = edges[j][0]
			}
			k[i] = v
			keys = append(keys, k)
		}
	}
	for n := 0; n < 50; n++ {
		k := make([]rewrite.Value, len(s.Columns))
		for j := range k {
			k[j] = edges[j][(n*(j+3)+n/7)%len(edges[j])]
		}
		keys = append(keys, k)
	}
	return keys
}

// Spanner checks s on one schema and its keys. It reports whether s bound
// to the schema (a binding error is allowed: not every strategy applies to
// every key shape).
func Spanner(t *testing.T, s rewrite.Strategy, schema rewrite.KeySchema, keys [][]rewrite.Value) bool {
	t.Helper()
	var r *rewrite.SpannerRewriter
	var err error
	if !noPanic(t, fmt.Sprintf("Spanner(%s)", schema), func() { r, err = s.Spanner(schema) }) || err != nil {
		return false
	}
	info := s.Info()
	if info.Invertible != r.Invertible() {
		t.Errorf("%s on %s: Info().Invertible = %v, rewriter.Invertible() = %v", info.Name, schema, info.Invertible, r.Invertible())
	}
	seen := map[string]string{}
	for _, key := range keys {
		name := rewrite.FormatSpannerKey(schema, key)
		orig := append([]rewrite.Value(nil), key...)
		var out []rewrite.Value
		if !noPanic(t, "Rewrite "+name, func() { out, err = r.Rewrite(nil, key) }) {
			continue
		}
		if !sameValues(orig, key) {
			t.Errorf("Rewrite %s modified its input", name)
		}
		if err != nil {
			continue // refusing a key is allowed; the error is checked elsewhere
		}
		if verr := rewrite.ValidateSpannerKey(r.Out(), out); verr != nil {
			t.Errorf("Rewrite %s gave an invalid key: %v", name, verr)
			continue
		}
		if info.Deterministic {
			again, err2 := r.Rewrite(nil, key)
			if err2 != nil || !sameValues(out, again) {
				t.Errorf("Rewrite %s is not deterministic: %v then %v (err %v)", name, out, again, err2)
			}
		}
		enc := string(rewrite.AppendSpannerKey(nil, r.Out(), out))
		if prev, dup := seen[enc]; dup && prev != string(rewrite.AppendSpannerKey(nil, schema, key)) {
			t.Errorf("Rewrite is not injective: %s and an earlier key both give %s", name, rewrite.FormatSpannerKey(r.Out(), out))
		}
		seen[enc] = string(rewrite.AppendSpannerKey(nil, schema, key))
		if r.Invertible() {
			var back []rewrite.Value
			if !noPanic(t, "Invert "+name, func() { back, err = r.Invert(nil, out) }) {
				continue
			}
			if err != nil {
				t.Errorf("Invert(Rewrite(%s)) failed: %v", name, err)
			} else if !sameValues(back, key) {
				t.Errorf("Invert(Rewrite(%s)) = %s", name, rewrite.FormatSpannerKey(schema, back))
			}
		} else if _, err := r.Invert(nil, out); err == nil {
			t.Errorf("Invert succeeded on a non-invertible rewriter")
		}
	}
	return true
}

// DatastoreKeys returns the Datastore edge-key corpus (valid and invalid).
func DatastoreKeys() []rewrite.DatastoreKey {
	var keys []rewrite.DatastoreKey
	for _, id := range []int64{1, 2, 10, 120, 12, 21, math.MaxInt64, 1 << 40, 0, -1, math.MinInt64} {
		keys = append(keys, rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Customer", ID: id}}})
	}
	for _, n := range Strings() {
		keys = append(keys, rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Customer", Name: n}}})
	}
	deep := make([]rewrite.PathElement, 0, 100)
	for i := range 100 {
		deep = append(deep, rewrite.PathElement{Kind: "Level", ID: int64(i + 1)})
	}
	keys = append(keys,
		rewrite.DatastoreKey{Namespace: "tenant-1", Path: []rewrite.PathElement{{Kind: "Customer", Name: "Customer1"}}},
		rewrite.DatastoreKey{Database: "db2", Path: []rewrite.PathElement{{Kind: "Customer", Name: "Customer1"}}},
		rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Customer", Name: "Customer1"}, {Kind: "Order", ID: 1}}},
		rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Customer", Name: "Customer1"}, {Kind: "Order", Name: "1"}}},
		rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Customer", ID: 1}, {Kind: "Order", Name: "Customer1"}}},
		rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Customer", Name: "a"}, {Kind: "Order", ID: 7}, {Kind: "Line", Name: "日本"}}},
		rewrite.DatastoreKey{Path: deep},
		rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Bad/Kind", ID: 1}}},
		rewrite.DatastoreKey{},
	)
	return keys
}

// Datastore checks s's Datastore form on keys.
func Datastore(t *testing.T, s rewrite.Strategy, keys []rewrite.DatastoreKey) {
	t.Helper()
	var r *rewrite.DatastoreRewriter
	var err error
	if !noPanic(t, "Datastore()", func() { r, err = s.Datastore() }) {
		return
	}
	if err != nil {
		t.Fatalf("%s: Info says Datastore is supported, but Datastore() failed: %v", s.Info().Name, err)
	}
	info := s.Info()
	if info.Invertible != r.Invertible() {
		t.Errorf("%s: Info().Invertible = %v, rewriter.Invertible() = %v", info.Name, info.Invertible, r.Invertible())
	}
	seen := map[string]rewrite.DatastoreKey{}
	for _, key := range keys {
		name := key.String()
		orig := key.Clone()
		var out rewrite.DatastoreKey
		if !noPanic(t, "Rewrite "+name, func() { out, err = r.Rewrite(key) }) {
			continue
		}
		if !orig.Equal(key) {
			t.Errorf("Rewrite %s modified its input", name)
		}
		if err != nil {
			continue
		}
		if verr := rewrite.ValidateDatastoreKey(out); verr != nil {
			t.Errorf("Rewrite %s gave an invalid key: %v", name, verr)
			continue
		}
		if rewrite.ValidateDatastoreKey(key) != nil {
			// An invalid old key may only be rewritten if the result is valid
			// and the strategy is not claimed to round-trip it.
			continue
		}
		if info.Deterministic {
			again, err2 := r.Rewrite(key)
			if err2 != nil || !again.Equal(out) {
				t.Errorf("Rewrite %s is not deterministic: %s then %s (err %v)", name, out, again, err2)
			}
		}
		enc := string(rewrite.AppendDatastoreKey(nil, out))
		if prev, dup := seen[enc]; dup && !prev.Equal(key) {
			t.Errorf("Rewrite is not injective: %s and %s both give %s", prev, name, out)
		}
		seen[enc] = key
		if r.Invertible() {
			var back rewrite.DatastoreKey
			if !noPanic(t, "Invert "+name, func() { back, err = r.Invert(out) }) {
				continue
			}
			if err != nil {
				t.Errorf("Invert(Rewrite(%s)) failed: %v", name, err)
			} else if !back.Equal(key) {
				t.Errorf("Invert(Rewrite(%s)) = %s", name, back)
			}
		} else if _, err := r.Invert(out); err == nil {
			t.Errorf("Invert succeeded on a non-invertible rewriter")
		}
	}
}

func noPanic(t *testing.T, what string, f func()) (ok bool) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("%s panicked: %v", what, p)
			ok = false
		}
	}()
	f()
	return true
}

func sameValues(a, b []rewrite.Value) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}
