package record

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/rewrite"
)

func sampleRecords() []Record {
	k := rewrite.DatastoreKey{Namespace: "ns", Path: []rewrite.PathElement{{Kind: "Customer", Name: "Customer1"}, {Kind: "Order", ID: 7}}}
	ref := rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Customer", Name: "日本"}}}
	return []Record{
		{Table: "Order", Key: &k, Fields: []Field{
			{Name: "Total", Value: Float(12.5)},
			{Name: "Whole", Value: Float(3)},
			{Name: "Items", Value: Int(-9223372036854775808)},
			{Name: "Note", Value: String("a \"quoted\"\n\ttab \u0001 日本語 🙂"), NoIndex: true},
			{Name: "Paid", Value: Bool(true)},
			{Name: "Raw", Value: Bytes([]byte{0, 0xff, 'x'})},
			{Name: "At", Value: Time(time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC))},
			{Name: "Customer", Value: Key(ref)},
			{Name: "Where", Value: Value{Kind: KindGeoPoint, Lat: 52.5, Lng: -13.25}},
			{Name: "Tags", Value: Value{Kind: KindArray, Array: []Value{String("a"), Int(1), {}}}},
			{Name: "Empty", Value: Value{Kind: KindArray, Array: []Value{}}},
			{Name: "Address", Value: Value{Kind: KindEntity, Entity: []Field{{Name: "City", Value: String("Lisboa")}, {Name: "Zip", Value: Int(1000), NoIndex: true}}}},
			{Name: "Nothing", Value: Value{}},
			{Name: "Inf", Value: Float(math.Inf(-1))},
			{Name: "NaN", Value: Float(math.NaN())},
		}},
		{Table: "UserAccessLogs", Fields: []Field{
			{Name: "LastAccess", Value: Time(time.Date(2024, 1, 31, 12, 0, 0, 500, time.UTC))},
			{Name: "UserId", Value: String("u1")},
			{Name: "Day", Value: Value{Kind: KindDate, Int: 19753}},
			{Name: "Amount", Value: Value{Kind: KindNumeric, Str: "1.5"}},
			{Name: "Doc", Value: Value{Kind: KindJSON, Str: `{"a":[1,2]}`}},
		}},
		{Table: "Empty"},
	}
}

func TestJSONRoundTrip(t *testing.T) {
	for _, r := range sampleRecords() {
		line := AppendJSON(nil, &r, true)
		got, err := ParseJSON(line)
		if err != nil {
			t.Fatalf("ParseJSON(%s): %v", line, err)
		}
		if !got.Equal(&r) {
			t.Errorf("round trip changed the record:\n got %s\nwant %s\nline %s", got.Describe(), r.Describe(), line)
			for i := range r.Fields {
				if i < len(got.Fields) && !got.Fields[i].Value.Equal(r.Fields[i].Value) {
					t.Errorf("field %s: got %v want %v", r.Fields[i].Name, got.Fields[i].Value, r.Fields[i].Value)
				}
			}
		}
	}
}

func TestBatchRoundTrip(t *testing.T) {
	recs := sampleRecords()
	got, err := DecodeBatch(EncodeBatch(recs))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("got %d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		if !got[i].Equal(&recs[i]) {
			t.Errorf("record %d: got %s, want %s", i, got[i].Describe(), recs[i].Describe())
		}
	}
	b := EncodeBatch(recs)
	for cut := 1; cut < len(b); cut += 7 {
		if _, err := DecodeBatch(b[:cut]); err == nil {
			t.Fatalf("truncated batch (%d of %d bytes) decoded without error", cut, len(b))
		}
	}
}

func TestParsePlainJSON(t *testing.T) {
	r, err := ParseJSON([]byte(`{"LastAccess":"2024-01-31T12:00:00.082+01:00","UserId":"u00486","Bytes":51950,"Ratio":0.5,"Big":12345678901234567890,"Esc":"\u00e9\ud83d\ude42"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Field{
		{Name: "LastAccess", Value: String("2024-01-31T12:00:00.082+01:00")},
		{Name: "UserId", Value: String("u00486")},
		{Name: "Bytes", Value: Int(51950)},
		{Name: "Ratio", Value: Float(0.5)},
		{Name: "Big", Value: Float(12345678901234567890)},
		{Name: "Esc", Value: String("é🙂")},
	}
	if !fieldsEqual(r.Fields, want) {
		t.Errorf("got %v", r.Fields)
	}
	for _, bad := range []string{``, `[]`, `{"a":}`, `{"a":1,}`, `{"a":"x}`, `{"a":1} x`, `{"__key__":{"path":["A"]}}`, `{"t":{"$timestamp":"yesterday"}}`, `{"a":tru}`, "{\"a\":\"\x01\"}"} {
		if _, err := ParseJSON([]byte(bad)); err == nil {
			t.Errorf("ParseJSON(%q) accepted", bad)
		}
	}
}

func TestCoerce(t *testing.T) {
	for _, tc := range []struct {
		v    Value
		t    rewrite.Type
		want Value
		err  string
	}{
		{String("2024-01-31T12:00:00+01:00"), rewrite.TypeTimestamp, Time(time.Date(2024, 1, 31, 11, 0, 0, 0, time.UTC)), ""},
		{String("2024-01-31"), rewrite.TypeDate, Value{Kind: KindDate, Int: 19753}, ""},
		{String("AP8="), rewrite.TypeBytes, Bytes([]byte{0, 0xff}), ""},
		{Int(3), rewrite.TypeFloat64, Float(3), ""},
		{Float(3), rewrite.TypeInt64, Int(3), ""},
		{String("42"), rewrite.TypeInt64, Int(42), ""},
		{Int(2), rewrite.TypeNumeric, Value{Kind: KindNumeric, Str: "2"}, ""},
		{String("1.50"), rewrite.TypeNumeric, Value{Kind: KindNumeric, Str: "1.5"}, ""},
		{Float(3.5), rewrite.TypeInt64, Value{}, "cannot convert float 3.5 to INT64"},
		{String("soon"), rewrite.TypeTimestamp, Value{}, `cannot convert string "soon" to TIMESTAMP`},
		{Int(1), rewrite.TypeString, Value{}, "cannot convert int 1 to STRING"},
	} {
		got, err := Coerce(tc.v, tc.t)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Coerce(%v, %s) error %v, want %q", tc.v, tc.t, err, tc.err)
			}
			continue
		}
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("Coerce(%v, %s) = %v, %v; want %v", tc.v, tc.t, got, err, tc.want)
		}
	}
}

func FuzzParseJSON(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(AppendJSON(nil, &r, true))
	}
	f.Add([]byte(`{"a":[1,{"b":null}],"c":"\ud800"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := ParseJSON(line)
		if err != nil {
			return
		}
		again := AppendJSON(nil, &r, true)
		r2, err := ParseJSON(again)
		if err != nil {
			t.Fatalf("%q parsed, but its encoding %q does not: %v", line, again, err)
		}
		if !r2.Equal(&r) {
			t.Fatalf("%q: encode/parse changed the record: %s vs %s", line, r.Describe(), r2.Describe())
		}
		got, err := DecodeBatch(EncodeBatch([]Record{r}))
		if err != nil || !got[0].Equal(&r) {
			t.Fatalf("%q: batch round trip failed: %v", line, err)
		}
	})
}
