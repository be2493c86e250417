package spannerdb_test

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/civil"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/store/spannerdb/spannerdbtest"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// allTypes is the schema of spannerdbtest.AllTypesDDL("T"), written by
// hand so the conversions are tested without an emulator.
func allTypes() *spannerdb.Table {
	t := &spannerdb.Table{Name: "T", Key: rewrite.KeySchema{Table: "T", Columns: []rewrite.Column{{Name: "Id", Type: rewrite.TypeInt64}}}}
	t.Columns = append(t.Columns, spannerdb.Column{Name: "Id", Type: "INT64", NotNull: true})
	for _, c := range strings.Split("I INT64,F FLOAT64,F32 FLOAT32,S STRING(MAX),S5 STRING(5),B BOOL,Byt BYTES(MAX),Ts TIMESTAMP,D DATE,N NUMERIC,J JSON,"+
		"AI ARRAY<INT64>,AF ARRAY<FLOAT64>,AF32 ARRAY<FLOAT32>,AS_ ARRAY<STRING(MAX)>,AB ARRAY<BOOL>,AByt ARRAY<BYTES(MAX)>,ATs ARRAY<TIMESTAMP>,AD ARRAY<DATE>,AN ARRAY<NUMERIC>,AJ ARRAY<JSON>", ",") {
		name, typ, _ := strings.Cut(c, " ")
		t.Columns = append(t.Columns, spannerdb.Column{Name: name, Type: typ})
	}
	t.Columns = append(t.Columns, spannerdb.Column{Name: "G", Type: "INT64", Generated: true, Expression: "MOD(Id, 7)", Stored: true})
	return t
}

// TestRoundTripWithoutEmulator converts records to Spanner values
// (ConvertRow), lets the client encode them into a row as it would on
// the wire (spanner.NewRow), decodes the row (RowToRecord) and expects
// the normalized record back, for 200 rows of edge values.
func TestRoundTripWithoutEmulator(t *testing.T) {
	tbl := allTypes()
	for i := range 200 {
		rec := spannerdbtest.Row("T", i)
		cols, vals, err := spannerdb.ConvertRow(&rec, tbl)
		if err != nil {
			t.Fatalf("row %d: ConvertRow: %v", i, err)
		}
		row, err := spanner.NewRow(cols, vals)
		if err != nil {
			t.Fatalf("row %d: NewRow: %v", i, err)
		}
		got, err := spannerdb.RowToRecord(row, tbl)
		if err != nil {
			t.Fatalf("row %d: RowToRecord: %v", i, err)
		}
		want, err := spannerdb.Normalize(&rec, tbl)
		if err != nil {
			t.Fatal(err)
		}
		if d := spannerdbtest.Diff(&got, &want); d != "" {
			t.Fatalf("row %d: %s", i, d)
		}
		// Values of the fixture are already of their column's kind, so
		// normalizing changes nothing but FLOAT32 rounding.
		if d := spannerdbtest.Diff(&want, &rec); d != "" && !strings.HasPrefix(d, "F32") && !strings.HasPrefix(d, "AF32") {
			t.Errorf("row %d: Normalize changed %s", i, d)
		}
	}
}

func TestRowToRecordTypes(t *testing.T) {
	ts := time.Date(2024, 1, 31, 12, 0, 0, 500, time.UTC)
	row, err := spanner.NewRow(
		[]string{"i", "f", "s", "b", "by", "ts", "d", "n", "j", "ai", "nul", "nullarr", "f32"},
		[]any{int64(-7), 2.5, "x", true, []byte{1, 2}, ts, civil.Date{Year: 2024, Month: 2, Day: 29},
			spanner.NullNumeric{Numeric: *ratOf("1.50"), Valid: true}, spanner.NullJSON{Value: map[string]int{"a": 1}, Valid: true},
			[]int64{1, 2}, spanner.NullString{}, []spanner.NullInt64(nil), float32(0.5)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := spannerdb.RowToRecord(row, &spannerdb.Table{Name: "X"})
	if err != nil {
		t.Fatal(err)
	}
	want := record.Record{Table: "X", Fields: []record.Field{
		{Name: "i", Value: record.Int(-7)},
		{Name: "f", Value: record.Float(2.5)},
		{Name: "s", Value: record.String("x")},
		{Name: "b", Value: record.Bool(true)},
		{Name: "by", Value: record.Bytes([]byte{1, 2})},
		{Name: "ts", Value: record.Time(ts)},
		{Name: "d", Value: record.Value{Kind: record.KindDate, Int: rewrite.Date(2024, 2, 29).Int}},
		{Name: "n", Value: record.Value{Kind: record.KindNumeric, Str: "1.5"}},
		{Name: "j", Value: record.Value{Kind: record.KindJSON, Str: `{"a":1}`}},
		{Name: "ai", Value: record.Value{Kind: record.KindArray, Array: []record.Value{record.Int(1), record.Int(2)}}},
		{Name: "nul", Value: record.Value{}},
		{Name: "nullarr", Value: record.Value{}},
		{Name: "f32", Value: record.Float(0.5)},
	}}
	if !got.Equal(&want) {
		t.Errorf("got %v\nwant %v", got.Fields, want.Fields)
	}

	// An unsupported type is an error naming the column; the others come back.
	row, err = spanner.NewRow([]string{"ok", "st"}, []any{int64(1), struct{ A int64 }{A: 1}})
	if err != nil {
		t.Fatal(err)
	}
	got, err = spannerdb.RowToRecord(row, &spannerdb.Table{Name: "X"})
	if err == nil || !strings.Contains(err.Error(), "column st: Spanner type STRUCT is not supported") {
		t.Errorf("STRUCT column: error %v, want one naming column st", err)
	}
	if len(got.Fields) != 1 || got.Fields[0].Name != "ok" {
		t.Errorf("STRUCT row: the other columns did not come back: %v", got.Fields)
	}
}

func ratOf(s string) *big.Rat {
	r, _ := new(big.Rat).SetString(s)
	return r
}

// TestTypelessConversions: strings and numbers from JSON Lines or CSV
// become the column's type, NULLs become typed NULLs.
func TestTypelessConversions(t *testing.T) {
	tbl := allTypes()
	rec := record.Record{Table: "T", Fields: []record.Field{
		{Name: "Id", Value: record.String("12")},
		{Name: "F", Value: record.Int(3)},
		{Name: "F32", Value: record.String("0.1")},
		{Name: "Ts", Value: record.String("2024-01-31T12:00:00.5+01:00")},
		{Name: "D", Value: record.String("2024-01-31")},
		{Name: "Byt", Value: record.String("AP8=")},
		{Name: "N", Value: record.String("001.50")},
		{Name: "J", Value: record.Value{Kind: record.KindEntity, Entity: []record.Field{{Name: "a", Value: record.Int(1)}}}},
		{Name: "B", Value: record.String("true")},
		{Name: "AI", Value: record.Value{Kind: record.KindArray, Array: []record.Value{record.String("5"), {}}}},
		{Name: "S", Value: record.Value{}},
		{Name: "AS_", Value: record.Value{}},
		{Name: "G", Value: record.Int(99)}, // generated: skipped, not an error
	}}
	cols, vals, err := spannerdb.ConvertRow(&rec, tbl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for i, c := range cols {
		got[c] = vals[i]
	}
	if _, ok := got["G"]; ok {
		t.Error("generated column G was written")
	}
	date := civil.Date{Year: 2024, Month: 1, Day: 31}
	for col, want := range map[string]any{
		"Id":  spanner.NullInt64{Int64: 12, Valid: true},
		"F":   spanner.NullFloat64{Float64: 3, Valid: true},
		"F32": spanner.NullFloat32{Float32: 0.1, Valid: true},
		"Ts":  spanner.NullTime{Time: time.Date(2024, 1, 31, 11, 0, 0, 5e8, time.UTC), Valid: true},
		"D":   spanner.NullDate{Date: date, Valid: true},
		"Byt": []byte{0, 0xff},
		"B":   spanner.NullBool{Bool: true, Valid: true},
		"AI":  []spanner.NullInt64{{Int64: 5, Valid: true}, {}},
		"S":   spanner.NullString{},
		"AS_": []spanner.NullString(nil),
	} {
		if !equalAny(got[col], want) {
			t.Errorf("%s = %#v, want %#v", col, got[col], want)
		}
	}
	if n := got["N"].(spanner.NullNumeric); !n.Valid || spanner.NumericString(&n.Numeric) != "1.500000000" {
		t.Errorf("N = %v", n)
	}
	if j := got["J"].(spanner.NullJSON); !j.Valid || string(j.Value.(json.RawMessage)) != `{"a":1}` {
		t.Errorf("J = %#v", j)
	}
	m, err := spannerdb.MutationFor(&rec, tbl, "")
	if err != nil || m == nil {
		t.Fatalf("MutationFor: %v", err)
	}
}

func equalAny(a, b any) bool {
	switch x := a.(type) {
	case []byte:
		y, ok := b.([]byte)
		return ok && string(x) == string(y) && (x == nil) == (y == nil)
	case spanner.NullTime:
		y, ok := b.(spanner.NullTime)
		return ok && x.Valid == y.Valid && x.Time.Equal(y.Time)
	case []spanner.NullInt64:
		y, ok := b.([]spanner.NullInt64)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	case []spanner.NullString:
		y, ok := b.([]spanner.NullString)
		return ok && len(x) == len(y) && (x == nil) == (y == nil)
	}
	return a == b
}

func TestConvertRowRefuses(t *testing.T) {
	tbl := allTypes()
	tbl.Columns = append(tbl.Columns, spannerdb.Column{Name: "Req", Type: "STRING(10)", NotNull: true},
		spannerdb.Column{Name: "WithDefault", Type: "INT64", NotNull: true, Default: "0"})
	base := func(extra ...record.Field) *record.Record {
		r := &record.Record{Table: "T", Fields: []record.Field{{Name: "Id", Value: record.Int(1)}, {Name: "Req", Value: record.String("r")}}}
		r.Fields = append(r.Fields, extra...)
		return r
	}
	if _, _, err := spannerdb.ConvertRow(base(), tbl); err != nil {
		t.Fatalf("valid record refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		rec  *record.Record
		want string
	}{
		{"unknown column", base(record.Field{Name: "Nope", Value: record.Int(1)}), "column Nope not in table T"},
		{"twice", base(record.Field{Name: "i", Value: record.Int(1)}, record.Field{Name: "I", Value: record.Int(2)}), "column I of table T given twice"},
		{"not null missing", &record.Record{Table: "T", Fields: []record.Field{{Name: "Id", Value: record.Int(1)}}}, "column Req of table T is NOT NULL, but the record has no value"},
		{"not null null", base(record.Field{Name: "WithDefault", Value: record.Value{}}), "column WithDefault of table T is NOT NULL, but the value is NULL"},
		{"too long", base(record.Field{Name: "S5", Value: record.String("abcdef")}), "column S5: string of 6 characters is longer than STRING(5) allows"},
		{"bad utf8", base(record.Field{Name: "S", Value: record.String("a\xffb")}), "not valid UTF-8"},
		{"bad int", base(record.Field{Name: "I", Value: record.Float(1.5)}), "column I: cannot convert float 1.5 to INT64"},
		{"bad time", base(record.Field{Name: "Ts", Value: record.String("yesterday")}), `column Ts: cannot convert string "yesterday" to TIMESTAMP`},
		{"bad json", base(record.Field{Name: "J", Value: record.String("{nope")}), "is not valid JSON text"},
		{"scalar for array", base(record.Field{Name: "AI", Value: record.Int(1)}), "cannot convert int 1 to ARRAY<INT64>"},
		{"bad element", base(record.Field{Name: "AD", Value: record.Value{Kind: record.KindArray, Array: []record.Value{record.String("x")}}}), "column AD: element 0"},
		{"float32 range", base(record.Field{Name: "F32", Value: record.Float(1e300)}), "out of the FLOAT32 range"},
		{"numeric scale", base(record.Field{Name: "N", Value: record.String("0.0000000001")}), "more than 9 digits"},
		{"time range", base(record.Field{Name: "Ts", Value: record.Time(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))}), "outside 0001-01-01..9999-12-31"},
	} {
		_, _, err := spannerdb.ConvertRow(tc.rec, tbl)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
	if _, err := spannerdb.MutationFor(base(), tbl, "replace"); err == nil || !strings.Contains(err.Error(), `write mode "replace"`) {
		t.Errorf("bad mode: %v", err)
	}
	for _, mode := range []string{"", storewrite.ModeUpsert, storewrite.ModeInsert} {
		if _, err := spannerdb.MutationFor(base(), tbl, mode); err != nil {
			t.Errorf("mode %q: %v", mode, err)
		}
	}
}

func TestKeyOf(t *testing.T) {
	tbl := &spannerdb.Table{Name: "L", Columns: []spannerdb.Column{{Name: "LastAccess", Type: "TIMESTAMP"}, {Name: "UserId", Type: "STRING(36)"}}}
	tbl.Key, _ = rewrite.ParseKeySchema("L", "LastAccess TIMESTAMP, UserId STRING(36) DESC")
	rec := record.Record{Table: "L", Fields: []record.Field{{Name: "userid", Value: record.String("u1")}, {Name: "LastAccess", Value: record.String("2024-01-31T12:00:00Z")}}}
	key, err := spannerdb.KeyOf(&rec, tbl)
	if err != nil {
		t.Fatal(err)
	}
	want := []rewrite.Value{rewrite.Timestamp(time.Date(2024, 1, 31, 12, 0, 0, 0, time.UTC)), rewrite.String("u1")}
	if len(key) != 2 || !key[0].Equal(want[0]) || !key[1].Equal(want[1]) {
		t.Errorf("KeyOf = %v, want %v", key, want)
	}
	sk, err := spannerdb.SpannerKey(&rec, tbl)
	if err != nil || len(sk) != 2 || sk.String() != `("2024-01-31T12:00:00Z","u1")` {
		t.Errorf("SpannerKey = %v, %v", sk, err)
	}
	rec.Fields = rec.Fields[:1]
	if _, err := spannerdb.KeyOf(&rec, tbl); err == nil || !strings.Contains(err.Error(), "key column LastAccess of table L missing") {
		t.Errorf("missing key column: %v", err)
	}
}

func TestParseColumnType(t *testing.T) {
	for in, want := range map[string]spannerdb.ColumnType{
		"INT64":                            {Base: "INT64"},
		"string(36)":                       {Base: "STRING", MaxLen: 36},
		"STRING(MAX)":                      {Base: "STRING"},
		"ARRAY<BYTES(10)>":                 {Base: "BYTES", Array: true, MaxLen: 10},
		"ARRAY<FLOAT32>(vector_length=>3)": {Base: "FLOAT32", Array: true},
		"JSON":                             {Base: "JSON"},
	} {
		got, err := spannerdb.ParseColumnType(in)
		if err != nil || got != want {
			t.Errorf("ParseColumnType(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	if got := (spannerdb.ColumnType{Base: "STRING", Array: true}).String(); got != "ARRAY<STRING(MAX)>" {
		t.Errorf("String() = %s", got)
	}
	for _, bad := range []string{"STRUCT<a INT64>", "UUID", "TOKENLIST", "INT64(3)", "STRING(0)", "ARRAY<INT64", "PROTO<x.Y>"} {
		if _, err := spannerdb.ParseColumnType(bad); err == nil {
			t.Errorf("ParseColumnType(%q) accepted", bad)
		}
	}
}

// Rows as Spanner stores them compare equal with record.Same: names in
// any case, JSON as values.
func TestSameAsSpannerStores(t *testing.T) {
	a := record.Record{Fields: []record.Field{
		{Name: "Id", Value: record.Int(1)},
		{Name: "J", Value: record.Value{Kind: record.KindJSON, Str: `{"b":1,"a":2}`}},
		{Name: "AJ", Value: record.Value{Kind: record.KindArray, Array: []record.Value{{Kind: record.KindJSON, Str: `[1, 2]`}}}},
	}}
	b := record.Record{Fields: []record.Field{
		{Name: "id", Value: record.Int(1)},
		{Name: "J", Value: record.Value{Kind: record.KindJSON, Str: `{"a":2,"b":1}`}},
		{Name: "AJ", Value: record.Value{Kind: record.KindArray, Array: []record.Value{{Kind: record.KindJSON, Str: `[1,2]`}}}},
	}}
	if !record.Same(&a, &b) {
		t.Error("records equal as Spanner stores them are not the same")
	}
	b.Fields[0].Value = record.Int(2)
	if record.Same(&a, &b) {
		t.Error("different ids are the same")
	}
}
