package source

import (
	"bytes"
	"testing"
	"time"

	"github.com/linkedin/goavro/v2"

	"github.com/rekeyio/rekey/record"
)

// An Avro schema shaped like Spanner's export of
// UserAccessLogs(LastAccess TIMESTAMP, UserId STRING(36), Day DATE,
// Amount NUMERIC, Doc JSON, Raw BYTES(MAX), Tags ARRAY<STRING(MAX)>, Bytes INT64, Ratio FLOAT64, Ok BOOL).
const exportSchema = `{
  "type": "record", "name": "UserAccessLogs", "namespace": "spannerexport",
  "googleStorage": "CloudSpanner", "spannerPrimaryKey_0": "LastAccess ASC", "spannerPrimaryKey_1": "UserId ASC",
  "fields": [
    {"name": "LastAccess", "type": "string", "sqlType": "TIMESTAMP"},
    {"name": "UserId", "type": "string", "sqlType": "STRING(36)"},
    {"name": "Day", "type": ["null", "string"], "sqlType": "DATE"},
    {"name": "Amount", "type": ["null", "string"], "sqlType": "NUMERIC"},
    {"name": "Doc", "type": ["null", "string"], "sqlType": "JSON"},
    {"name": "Raw", "type": ["null", "bytes"], "sqlType": "BYTES(MAX)"},
    {"name": "Tags", "type": ["null", {"type": "array", "items": ["null", "string"]}], "sqlType": "ARRAY<STRING(MAX)>"},
    {"name": "Bytes", "type": ["null", "long"], "sqlType": "INT64"},
    {"name": "Ratio", "type": ["null", "double"], "sqlType": "FLOAT64"},
    {"name": "Ok", "type": ["null", "boolean"], "sqlType": "BOOL"}
  ]}`

func TestReadAvroSpannerExport(t *testing.T) {
	var buf bytes.Buffer
	w, err := goavro.NewOCFWriter(goavro.OCFConfig{W: &buf, Schema: exportSchema})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Append([]any{
		map[string]any{
			"LastAccess": "2024-01-31T12:00:00.123456789Z", "UserId": "u1",
			"Day": goavro.Union("string", "2024-01-31"), "Amount": goavro.Union("string", "1.50"),
			"Doc": goavro.Union("string", `{"a":1}`), "Raw": goavro.Union("bytes", []byte{0, 0xff}),
			"Tags":  goavro.Union("array", []any{goavro.Union("string", "x"), nil}),
			"Bytes": goavro.Union("long", int64(42)), "Ratio": goavro.Union("double", 0.5), "Ok": goavro.Union("boolean", true),
		},
		map[string]any{"LastAccess": "2024-01-31T12:00:01Z", "UserId": "u2", "Day": nil, "Amount": nil, "Doc": nil, "Raw": nil, "Tags": nil, "Bytes": nil, "Ratio": nil, "Ok": nil},
		map[string]any{"LastAccess": "yesterday", "UserId": "u3", "Day": nil, "Amount": nil, "Doc": nil, "Raw": nil, "Tags": nil, "Bytes": nil, "Ratio": nil, "Ok": nil},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []record.Record
	var bad []string
	err = readAvro(&buf, "part-0.avro", func(r record.Record) { got = append(got, r) }, func(n int, raw string, err error) { bad = append(bad, err.Error()) })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(bad) != 1 {
		t.Fatalf("got %d records and %d bad (%v), want 2 and 1", len(got), len(bad), bad)
	}
	want := record.Record{Table: "UserAccessLogs", Fields: []record.Field{
		{Name: "LastAccess", Value: record.Time(time.Date(2024, 1, 31, 12, 0, 0, 123456789, time.UTC))},
		{Name: "UserId", Value: record.String("u1")},
		{Name: "Day", Value: record.Value{Kind: record.KindDate, Int: 19753}},
		{Name: "Amount", Value: record.Value{Kind: record.KindNumeric, Str: "1.5"}},
		{Name: "Doc", Value: record.Value{Kind: record.KindJSON, Str: `{"a":1}`}},
		{Name: "Raw", Value: record.Bytes([]byte{0, 0xff})},
		{Name: "Tags", Value: record.Value{Kind: record.KindArray, Array: []record.Value{record.String("x"), {}}}},
		{Name: "Bytes", Value: record.Int(42)},
		{Name: "Ratio", Value: record.Float(0.5)},
		{Name: "Ok", Value: record.Bool(true)},
	}}
	if !got[0].Equal(&want) {
		t.Errorf("got  %s\nwant %s", record.AppendJSON(nil, &got[0], true), record.AppendJSON(nil, &want, true))
	}
	if v, _ := got[1].Get("Bytes"); v.Kind != record.KindNull {
		t.Errorf("NULL column read as %v", v)
	}
	if len(bad) == 1 && !bytes.Contains([]byte(bad[0]), []byte("column LastAccess")) {
		t.Errorf("bad record reason %q does not name the column", bad[0])
	}
}
