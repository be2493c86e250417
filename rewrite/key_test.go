package rewrite_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/rewrite"
	"github.com/rekeyio/rekey/rewrite/rewritetest"
)

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// TestSpannerEncodingMatchesCompare checks, over every pair of edge keys
// of every test schema, that the byte encoding orders keys exactly as
// CompareSpanner does.
func TestSpannerEncodingMatchesCompare(t *testing.T) {
	for _, s := range rewritetest.Schemas() {
		keys := rewritetest.SpannerKeys(s)
		for _, a := range keys {
			ea := rewrite.AppendSpannerKey(nil, s, a)
			for _, b := range keys {
				eb := rewrite.AppendSpannerKey(nil, s, b)
				if c, e := rewrite.CompareSpanner(s, a, b), bytes.Compare(ea, eb); sign(c) != e {
					t.Fatalf("%s: Compare(%s, %s) = %d but encodings compare %d", s, rewrite.FormatSpannerKey(s, a), rewrite.FormatSpannerKey(s, b), c, e)
				}
			}
		}
	}
}

func TestSpannerOrder(t *testing.T) {
	asc := mustSchema(t, "K INT64")
	desc := mustSchema(t, "K INT64 DESC")
	null := []rewrite.Value{rewrite.Null(rewrite.TypeInt64)}
	one := []rewrite.Value{rewrite.Int64(1)}
	two := []rewrite.Value{rewrite.Int64(2)}
	if rewrite.CompareSpanner(asc, null, one) >= 0 || rewrite.CompareSpanner(asc, one, two) >= 0 {
		t.Errorf("ASC: want NULL < 1 < 2")
	}
	if rewrite.CompareSpanner(desc, two, one) >= 0 || rewrite.CompareSpanner(desc, one, null) >= 0 {
		t.Errorf("DESC: want 2 < 1 < NULL")
	}
	f := mustSchema(t, "F FLOAT64")
	vals := []float64{math.Inf(1), 0, math.NaN(), -1, math.Inf(-1), math.Copysign(0, -1), 1e300}
	keys := make([][]rewrite.Value, len(vals))
	for i, v := range vals {
		keys[i] = []rewrite.Value{rewrite.Float64(v)}
	}
	sort.SliceStable(keys, func(i, j int) bool {
		return bytes.Compare(rewrite.AppendSpannerKey(nil, f, keys[i]), rewrite.AppendSpannerKey(nil, f, keys[j])) < 0
	})
	if !math.IsNaN(keys[0][0].Float) || !math.IsInf(keys[1][0].Float, -1) || !math.IsInf(keys[6][0].Float, 1) {
		t.Errorf("FLOAT64 order: want NaN, -Inf, ..., +Inf; got %v", keys)
	}
	n1, _ := rewrite.Numeric("-1.5")
	n2, _ := rewrite.Numeric("0.000000001")
	n3, _ := rewrite.Numeric("10")
	ns := mustSchema(t, "N NUMERIC")
	e := func(v rewrite.Value) []byte { return rewrite.AppendSpannerKey(nil, ns, []rewrite.Value{v}) }
	if bytes.Compare(e(n1), e(n2)) >= 0 || bytes.Compare(e(n2), e(n3)) >= 0 {
		t.Errorf("NUMERIC order wrong")
	}
}

func TestNumericCanonical(t *testing.T) {
	for in, want := range map[string]string{"1.50": "1.5", "+007": "7", "-0": "0", "1e3": "1000", "-0.000000001": "-0.000000001", ".5": "0.5"} {
		v, err := rewrite.Numeric(in)
		if err != nil || v.Str != want {
			t.Errorf("Numeric(%q) = %q, %v; want %q", in, v.Str, err, want)
		}
	}
	for _, bad := range []string{"1e-10", "abc", "1/2", "100000000000000000000000000000"} {
		if _, err := rewrite.Numeric(bad); err == nil {
			t.Errorf("Numeric(%q) accepted", bad)
		}
	}
}

// TestDatastoreOrder checks Datastore's real key order: kind, then ids
// before names, ids numerically, ancestors before descendants.
func TestDatastoreOrder(t *testing.T) {
	want := []rewrite.DatastoreKey{
		dsKey("A", 1),
		dsKey("A", 2),
		dsKey("A", 2, "B", 1),
		dsKey("A", 2, "B", "x"),
		dsKey("A", 10),
		dsKey("A", math.MaxInt64),
		dsKey("A", ""+"1"),
		dsKey("A", "10"),
		dsKey("A", "2"),
		dsKey("A", "a"),
		dsKey("A", "a", "A", 1),
		dsKey("A", "b"),
		dsKey("B", 1),
		dsKey("a", 1),
	}
	ns := rewrite.DatastoreKey{Namespace: "n", Path: []rewrite.PathElement{{Kind: "A", ID: 1}}}
	want = append(want, ns)
	got := append([]rewrite.DatastoreKey(nil), want...)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
	sort.Slice(got, func(i, j int) bool { return rewrite.CompareDatastore(got[i], got[j]) < 0 })
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Fatalf("position %d: got %s, want %s", i, got[i], want[i])
		}
	}
	for i := range want {
		for j := range want {
			c := rewrite.CompareDatastore(want[i], want[j])
			e := bytes.Compare(rewrite.AppendDatastoreKey(nil, want[i]), rewrite.AppendDatastoreKey(nil, want[j]))
			if sign(c) != e || sign(c) != sign(i-j) {
				t.Errorf("%s vs %s: compare %d, encoding %d, want %d", want[i], want[j], c, e, sign(i-j))
			}
		}
	}
}

func TestValidateDatastoreKey(t *testing.T) {
	for _, tc := range []struct {
		k    rewrite.DatastoreKey
		want string // "" = valid
	}{
		{dsKey("Customer", "Customer1"), ""},
		{dsKey("Customer", 1, "Order", "o/1"), `key Customer:1/Order:"o/1": path element 2 (Order:"o/1"): name contains "/"`},
		{dsKey("Cust/omer", 1), `kind contains "/"`},
		{dsKey("Customer", 0), "id is 0"},
		{dsKey("Customer", -5), "id -5 is negative"},
		{dsKey("Customer", "a\xffb"), "name is not valid UTF-8"},
		{dsKey("Customer", "__x__"), "reserved"},
		{dsKey("Customer", strings.Repeat("n", 1501)), "name is 1501 bytes, more than 1500"},
		{rewrite.DatastoreKey{Namespace: "bad ns", Path: dsKey("A", 1).Path}, "namespace"},
		{rewrite.DatastoreKey{}, "empty path"},
	} {
		err := rewrite.ValidateDatastoreKey(tc.k)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tc.k, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want it to contain %q", tc.k, err, tc.want)
		}
	}
	if err := rewrite.ValidatePropertyName("a.b"); err == nil || !strings.Contains(err.Error(), `property "a.b": name contains "."`) {
		t.Errorf("dotted property name: %v", err)
	}
	if err := rewrite.ValidatePropertyName("Total"); err != nil {
		t.Errorf("Total: %v", err)
	}
}

func TestValidateSpannerKey(t *testing.T) {
	s := mustSchema(t, "Code STRING(3), Raw BYTES(2), Id INT64")
	ok := []rewrite.Value{rewrite.String("日本語"), rewrite.Bytes([]byte{1, 2}), rewrite.Int64(1)}
	if err := rewrite.ValidateSpannerKey(s, ok); err != nil {
		t.Errorf("valid key refused: %v", err)
	}
	for _, tc := range []struct {
		vals []rewrite.Value
		want string
	}{
		{[]rewrite.Value{rewrite.String("abcd"), rewrite.Bytes(nil), rewrite.Int64(1)}, "column Code is STRING(3), value has 4 characters"},
		{[]rewrite.Value{rewrite.String("a"), rewrite.Bytes([]byte{1, 2, 3}), rewrite.Int64(1)}, "column Raw is BYTES(2), value has 3 bytes"},
		{[]rewrite.Value{rewrite.String("a"), rewrite.Bytes(nil), rewrite.String("1")}, "column Id is INT64, got a STRING value"},
		{[]rewrite.Value{rewrite.String("a\xff"), rewrite.Bytes(nil), rewrite.Int64(1)}, "not valid UTF-8"},
		{[]rewrite.Value{rewrite.String("a")}, "has 1 values, table T has 3 key columns"},
	} {
		if err := rewrite.ValidateSpannerKey(s, tc.vals); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.vals, err, tc.want)
		}
	}
	big := mustSchema(t, "K STRING(MAX)")
	if err := rewrite.ValidateSpannerKey(big, []rewrite.Value{rewrite.String(strings.Repeat("x", 8193))}); err == nil || !strings.Contains(err.Error(), "more than Spanner's 8192") {
		t.Errorf("8193-byte key: %v", err)
	}
	// The message shortens a long value at a character boundary.
	wide := strings.Repeat("é", 4097)
	err := rewrite.ValidateSpannerKey(big, []rewrite.Value{rewrite.String(wide)})
	if err == nil || !strings.Contains(err.Error(), `T("`+strings.Repeat("é", 30)+`...")`) || strings.Contains(err.Error(), `\x`) {
		t.Errorf("8194-byte key of two-byte characters: %v", err)
	}
}

func TestNotationRoundTrip(t *testing.T) {
	schema := mustSchema(t, "At TIMESTAMP, Raw BYTES(MAX), D DATE, F FLOAT64, N NUMERIC, B BOOL, S STRING(MAX), I INT64")
	line := `["2016-01-25T15:10:10.555555Z","AP8=","2024-02-29","NaN","1.5",true,"日本\"語",9223372036854775807]`
	pk, err := rewrite.ParseKey(line, &schema)
	if err != nil {
		t.Fatal(err)
	}
	if got := rewrite.FormatKey(pk.Values, pk.Bare); got != line {
		t.Errorf("round trip:\n got %s\nwant %s", got, line)
	}
	if pk.Values[0].Time != time.Date(2016, 1, 25, 15, 10, 10, 555555000, time.UTC) {
		t.Errorf("timestamp = %v", pk.Values[0].Time)
	}
	ds := `{"path":["Customer","Customer1","Order",5],"namespace":"ns"}`
	pk, err = rewrite.ParseKey(ds, nil)
	if err != nil || !pk.IsDatastore || rewrite.FormatDatastoreKey(pk.Datastore) != ds {
		t.Errorf("datastore round trip: %+v %v", pk, err)
	}
	for _, bad := range []string{`{"path":["A"]}`, `[1,`, `{"path":["A",1.5]}`, `{"x":1}`, `null`, `[[1]]`, `1 2`} {
		if _, err := rewrite.ParseKey(bad, nil); err == nil {
			t.Errorf("ParseKey(%s) accepted", bad)
		}
	}
	pk, _ = rewrite.ParseKey(`42`, nil)
	if !pk.Bare || pk.Values[0].Int != 42 || rewrite.FormatKey(pk.Values, true) != "42" {
		t.Errorf("bare int: %+v", pk)
	}
}

func TestParseKeySchema(t *testing.T) {
	s, err := rewrite.ParseKeySchema("T", "LastAccess TIMESTAMP DESC, UserId STRING(36), Raw bytes(max)")
	if err != nil {
		t.Fatal(err)
	}
	if s.String() != "PRIMARY KEY (LastAccess DESC, UserId, Raw)" || s.Columns[1].MaxLen != 36 || s.Columns[2].SQLType() != "BYTES(MAX)" {
		t.Errorf("parsed %s %+v", s, s.Columns)
	}
	for _, bad := range []string{"A", "A INT65", "A INT64 UP", "A STRING(0)", "A INT64, a INT64"} {
		if _, err := rewrite.ParseKeySchema("T", bad); err == nil {
			t.Errorf("ParseKeySchema(%q) accepted", bad)
		}
	}
}

// TestParseDatastoreKeyText: String's form reads back to the same key.
func TestParseDatastoreKeyText(t *testing.T) {
	for _, k := range []rewrite.DatastoreKey{
		{Path: []rewrite.PathElement{{Kind: "Log", Name: "cc-1-4.0"}}},
		{Namespace: "ns-1", Path: []rewrite.PathElement{{Kind: "Customer", Name: "a/b:\"c\""}, {Kind: "Order", ID: -5}}},
		{Database: "db", Namespace: "n", Path: []rewrite.PathElement{{Kind: "K:ind", ID: 42}, {Kind: "Child", Name: "ü\n"}}},
	} {
		got, err := rewrite.ParseDatastoreKeyText(k.String())
		if err != nil || got.String() != k.String() {
			t.Errorf("%s: read back %s, %v", k, got, err)
		}
	}
	for _, bad := range []string{"", "Log", "Log:x", `ns="a"Log:1`, `Log:1Child:2`} {
		if _, err := rewrite.ParseDatastoreKeyText(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// A key far too long is not echoed whole by its error.
func TestKeyErrorShort(t *testing.T) {
	k := rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "K", Name: strings.Repeat("é", 2<<20)}}}
	err := rewrite.ValidateDatastoreKey(k)
	if err == nil || len(err.Error()) > 1000 || !strings.Contains(err.Error(), "bytes, more than 1500") || !strings.Contains(err.Error(), "(4194308 bytes)") {
		t.Errorf("%.500v (%d bytes)", err, len(err.Error()))
	}
}
