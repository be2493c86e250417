package spannerexport

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2/ocf"
	"github.com/linkedin/goavro/v2"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/testkit/golden"
	"github.com/rekeyio/rekey/record"
)

// testDDL is a table with every type rekey converts, a DEFAULT, a
// generated column and a commit-timestamp column, interleaved in a
// parent, and an index on it.
const testDDL = `
CREATE TABLE Users (
  ShardId INT64 NOT NULL,
  UserId STRING(36) NOT NULL,
) PRIMARY KEY (ShardId, UserId);
CREATE TABLE Logs (
  ShardId INT64 NOT NULL,
  UserId STRING(36) NOT NULL,
  Seq INT64 NOT NULL,
  Ratio FLOAT64,
  Small FLOAT32,
  Ok BOOL,
  Raw BYTES(MAX),
  At TIMESTAMP OPTIONS (allow_commit_timestamp=true),
  Day DATE,
  Amount NUMERIC,
  Doc JSON,
  Tags ARRAY<STRING(MAX)>,
  Nums ARRAY<INT64>,
  Page STRING(MAX) NOT NULL DEFAULT ("none"),
  Len INT64 AS (CHAR_LENGTH(Page)) STORED,
) PRIMARY KEY (ShardId, UserId, Seq DESC),
  INTERLEAVE IN PARENT Users ON DELETE CASCADE;
CREATE INDEX LogsByDay ON Logs (Day) STORING (Page);
`

func testTables(t *testing.T) (*spannerdb.Table, []string) {
	t.Helper()
	s, err := spannerdb.ParseSchema(testDDL)
	if err != nil {
		t.Fatal(err)
	}
	var ix []string
	for _, i := range s.Indexes {
		ix = append(ix, i.DDL())
	}
	return s.Tables["logs"], ix
}

// TestSchemaGolden pins the Avro schema of a table: the properties the
// import reads (primary key, parent, delete action, indexes, sqlType,
// generation and default expressions) and the types the export uses.
func TestSchemaGolden(t *testing.T) {
	tbl, ix := testTables(t)
	s, err := Schema(tbl, ix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := goavro.NewCodec(s); err != nil {
		t.Fatalf("goavro refuses the schema: %v", err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(s), "", "  "); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/logs.avsc", pretty.String()+"\n")
	if strings.Contains(s, `\u003c`) {
		t.Errorf("the schema escapes < in %s", s)
	}
}

func testRecord() record.Record {
	return record.Record{Table: "Logs", Fields: []record.Field{
		{Name: "ShardId", Value: record.Int(3)},
		{Name: "UserId", Value: record.String("ü-1")},
		{Name: "Seq", Value: record.Int(-7)},
		{Name: "Ratio", Value: record.Float(0.25)},
		{Name: "Small", Value: record.Float(1.5)},
		{Name: "Ok", Value: record.Bool(true)},
		{Name: "Raw", Value: record.Bytes([]byte{0, 0xff})},
		{Name: "At", Value: record.Time(time.Date(2024, 1, 31, 12, 0, 0, 123456789, time.UTC))},
		{Name: "Day", Value: record.Value{Kind: record.KindDate, Int: 19753}},
		{Name: "Amount", Value: record.Value{Kind: record.KindNumeric, Str: "-12.000000001"}},
		{Name: "Doc", Value: record.Value{Kind: record.KindJSON, Str: `{"a":1}`}},
		{Name: "Tags", Value: record.Value{Kind: record.KindArray, Array: []record.Value{record.String("x"), {}}}},
		{Name: "Page", Value: record.String("p")},
	}}
}

// TestDatumIndependentReader writes rows with goavro and reads them back
// with another Avro implementation (hamba/avro): every value is what the
// export format says (strings for TIMESTAMP, DATE and JSON, decimal
// bytes for NUMERIC, unions for nullable columns and array elements).
func TestDatumIndependentReader(t *testing.T) {
	tbl, ix := testTables(t)
	schema, err := Schema(tbl, ix)
	if err != nil {
		t.Fatal(err)
	}
	full := testRecord()
	sparse := record.Record{Table: "Logs", Fields: []record.Field{
		{Name: "ShardId", Value: record.Int(0)}, {Name: "UserId", Value: record.String("u")},
		{Name: "Seq", Value: record.Int(1)}, {Name: "Page", Value: record.String("")},
	}}
	var data []any
	tt, err := NewTable(tbl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []record.Record{full, sparse} {
		d, err := tt.Datum(&r)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, d)
	}
	var buf bytes.Buffer
	w, err := goavro.NewOCFWriter(goavro.OCFConfig{W: &buf, Schema: schema, CompressionName: Codec})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(data); err != nil {
		t.Fatal(err)
	}
	dec, err := ocf.NewDecoder(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got := dec.Metadata()["avro.codec"]; string(got) != "deflate" {
		t.Errorf("codec %q, want deflate", got)
	}
	var rows []map[string]any
	for dec.HasNext() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, m)
	}
	if err := dec.Error(); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("read %d rows, want 2", len(rows))
	}
	r := rows[0]
	amount, _ := new(big.Rat).SetString("-12.000000001")
	checks := []struct {
		col  string
		want any
	}{
		{"ShardId", int64(3)}, {"UserId", "ü-1"}, {"Seq", int64(-7)},
		{"Ratio", 0.25}, {"Small", float32(1.5)}, {"Ok", true}, {"Raw", []byte{0, 0xff}},
		{"At", "2024-01-31T12:00:00.123456789Z"}, {"Day", "2024-01-31"},
		{"Doc", `{"a":1}`}, {"Page", "p"}, {"Nums", nil}, {"Len", nil},
	}
	for _, c := range checks {
		if got := r[c.col]; !equalAny(got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.col, got, c.want)
		}
	}
	if got, ok := r["Amount"].(*big.Rat); !ok || got.Cmp(amount) != 0 {
		t.Errorf("Amount = %#v, want %s", r["Amount"], amount.FloatString(9))
	}
	tags := r["Tags"]
	if m, ok := tags.(map[string]any); ok { // a union branch, as hamba/avro decodes it into any
		tags = m["array"]
	}
	if tags, ok := tags.([]any); !ok || len(tags) != 2 || tags[0] != "x" || tags[1] != nil {
		t.Errorf("Tags = %#v, want [x <nil>]", r["Tags"])
	}
	for _, col := range []string{"Ratio", "Small", "Ok", "Raw", "At", "Day", "Amount", "Doc", "Tags"} {
		if v := rows[1][col]; v != nil {
			t.Errorf("sparse row %s = %#v, want null", col, v)
		}
	}
}

func equalAny(a, b any) bool {
	if ab, ok := a.([]byte); ok {
		bb, ok := b.([]byte)
		return ok && bytes.Equal(ab, bb)
	}
	return a == b
}

// TestDatumRefuses gives the reasons a row is a dead letter: what the
// Spanner sink refuses, and a NOT NULL column with a DEFAULT left out.
func TestDatumRefuses(t *testing.T) {
	tbl, _ := testTables(t)
	tt, err := NewTable(tbl)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*record.Record)
		want string
	}{
		{"unknown column", func(r *record.Record) {
			r.Fields = append(r.Fields, record.Field{Name: "Nope", Value: record.Int(1)})
		}, "column Nope not in table Logs"},
		{"too long", func(r *record.Record) { r.Fields[1].Value = record.String(strings.Repeat("x", 37)) }, "longer than STRING(36)"},
		{"missing key", func(r *record.Record) { r.Fields = r.Fields[1:] }, "ShardId of table Logs is NOT NULL"},
		{"default left out", func(r *record.Record) { r.Fields = r.Fields[:len(r.Fields)-1] }, "NOT NULL with a DEFAULT"},
	} {
		r := testRecord()
		c.edit(&r)
		if _, err := tt.Datum(&r); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}
