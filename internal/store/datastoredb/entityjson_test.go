package datastoredb

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore/apiv1/datastorepb"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/entityjson")

// exportFile holds entities as the "Datastore to Cloud Storage Text"
// template writes them (JsonFormat.printer() of the v1 Entity without
// insignificant whitespace: fields in declaration order, int64 as strings,
// doubles as Java prints them, Gson's HTML-safe escapes), covering every
// value type; writtenFile is what AppendEntityJSON makes of them.
const (
	exportFile  = "testdata/entityjson/export.json"
	writtenFile = "testdata/entityjson/written.golden.json"
)

func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	return out
}

func unmarshalEntity(t *testing.T, line []byte) *datastorepb.Entity {
	t.Helper()
	var e datastorepb.Entity
	if err := protojson.Unmarshal(line, &e); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return &e
}

// TestEntityJSONRoundTrip reads every entity of the export and writes it
// again: the same entity (proto.Equal of the two parsed), and the written
// file as in the golden file (compared after normalising the JSON, since
// protojson's output is not byte-stable across versions).
func TestEntityJSONRoundTrip(t *testing.T) {
	var written []byte
	for i, line := range readLines(t, exportFile) {
		rec, err := ParseEntityJSON(line, "my-project")
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		out, err := AppendEntityJSON(nil, &rec, "my-project")
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if bytes.ContainsAny(out, "\n\t") || bytes.Contains(out, []byte(": ")) {
			t.Errorf("line %d: written with insignificant whitespace: %s", i+1, out)
		}
		if want, got := unmarshalEntity(t, line), unmarshalEntity(t, out); !proto.Equal(want, got) {
			t.Errorf("line %d changed:\n read  %s\n wrote %s", i+1, line, out)
		}
		written = append(append(written, out...), '\n')
	}
	if *update {
		if err := os.WriteFile(writtenFile, written, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden := readLines(t, writtenFile)
	got := bytes.Split(bytes.TrimSuffix(written, []byte("\n")), []byte("\n"))
	if len(golden) != len(got) {
		t.Fatalf("wrote %d lines, %s has %d (go test -update rewrites it)", len(got), writtenFile, len(golden))
	}
	for i := range got {
		if g, w := normalJSON(t, got[i]), normalJSON(t, golden[i]); g != w {
			t.Errorf("line %d differs from %s (go test -update rewrites it):\n got  %s\n want %s", i+1, writtenFile, g, w)
		}
	}
}

// normalJSON re-encodes a JSON text with sorted object keys, numbers as
// written.
func normalJSON(t *testing.T, b []byte) string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestEntityJSONValues checks the records the export reads as: each
// value's kind and exact value, index flags, keys with their database and
// namespace, properties sorted by name.
func TestEntityJSONValues(t *testing.T) {
	lines := readLines(t, exportFile)
	recs := make([]record.Record, len(lines))
	for i, l := range lines {
		var err error
		if recs[i], err = ParseEntityJSON(l, ""); err != nil {
			t.Fatal(err)
		}
	}
	c, o := recs[0], recs[1]
	if want := dkey("", rewrite.PathElement{Kind: "Customer", Name: "Zoë 東京"}); c.Table != "Customer" || !c.Key.Equal(*want) {
		t.Errorf("key %v table %s", c.Key, c.Table)
	}
	for i := 1; i < len(c.Fields); i++ {
		if c.Fields[i-1].Name >= c.Fields[i].Name {
			t.Errorf("fields not sorted: %s before %s", c.Fields[i-1].Name, c.Fields[i].Name)
		}
	}
	field := func(r record.Record, name string) record.Field {
		t.Helper()
		i := r.Index(name)
		if i < 0 {
			t.Fatalf("%s has no property %s", r.Key, name)
		}
		return r.Fields[i]
	}
	checks := []struct {
		name    string
		want    record.Value
		noIndex bool
	}{
		{"name", record.String("Zoë <b>& \"quoted\"\n"), false},
		{"visits", record.Int(1<<53 + 1), false},
		{"min", record.Int(math.MinInt64), false},
		{"big", record.Float(1e20), false},
		{"tiny", record.Float(2.5e-8), false},
		{"negzero", record.Float(math.Copysign(0, -1)), false},
		{"inf", record.Float(math.Inf(1)), false},
		{"neginf", record.Float(math.Inf(-1)), false},
		{"active", record.Bool(true), false},
		{"inactive", record.Bool(false), false},
		{"nothing", record.Value{}, false},
		{"seen", record.Time(time.Date(2024, 1, 31, 12, 0, 0, 123456789, time.UTC)), false},
		{"millis", record.Time(time.Date(2023, 6, 1, 8, 30, 15, 250e6, time.UTC)), false},
		{"avatar", record.Bytes([]byte{0, 1, 2, 3, 255}), true},
		{"empty", record.Bytes(nil), false},
		{"home", record.Value{Kind: record.KindGeoPoint, Lat: 52.52, Lng: 13.405}, false},
		{"straße", record.String("Hauptstraße 1"), false},
		{"referrer", record.Key(*dkey("", rewrite.PathElement{Kind: "Customer", ID: 42})), false},
		{"bio", record.String("a long text, not indexed"), true},
	}
	for _, ch := range checks {
		f := field(c, ch.name)
		if !f.Value.Equal(ch.want) || f.NoIndex != ch.noIndex {
			t.Errorf("%s = %v (noindex %t), want %v (noindex %t)", ch.name, f.Value, f.NoIndex, ch.want, ch.noIndex)
		}
	}
	if v := field(c, "nan").Value; v.Kind != record.KindFloat || !math.IsNaN(v.Float) {
		t.Errorf("nan = %v", v)
	}

	parent := rewrite.PathElement{Kind: "Customer", ID: 5629499534213120}
	if want := (rewrite.DatastoreKey{Database: "my-db", Namespace: "tenant-a", Path: []rewrite.PathElement{parent, {Kind: "Order", ID: 1}}}); !o.Key.Equal(want) {
		t.Errorf("order key %v, want %v", o.Key, want)
	}
	if f := field(o, "tags"); f.NoIndex || len(f.Value.Array) != 3 || !f.Value.Array[2].Equal(record.String("日本")) {
		t.Errorf("tags = %v (noindex %t)", f.Value, f.NoIndex)
	}
	if f := field(o, "notes"); !f.NoIndex || !f.Value.Array[1].Equal(record.Int(2)) {
		t.Errorf("notes = %v (noindex %t), want its excluded elements", f.Value, f.NoIndex)
	}
	if f := field(o, "none"); f.Value.Kind != record.KindArray || len(f.Value.Array) != 0 {
		t.Errorf("none = %v, want an empty array", f.Value)
	}
	ship := field(o, "shipping")
	if !ship.NoIndex || ship.Value.Kind != record.KindEntity {
		t.Fatalf("shipping = %v (noindex %t)", ship.Value, ship.NoIndex)
	}
	if inner := (record.Record{Fields: ship.Value.Entity}); field(inner, "city").NoIndex || !field(inner, "zip").NoIndex {
		t.Errorf("shipping's properties lost their own index flags: %v", ship.Value.Entity)
	}
	line := field(o, "lines").Value.Array[1].Entity
	if want := (rewrite.DatastoreKey{Database: "my-db", Namespace: "tenant-a", Path: []rewrite.PathElement{{Kind: "Line"}}}); line[0].Name != EmbeddedKeyField || !line[0].Value.Key.Equal(want) {
		t.Errorf("embedded entity fields %v, want its key %v first", line, want)
	}
	if ref := field(o, "refs").Value.Array[0]; !ref.Key.Equal(rewrite.DatastoreKey{Namespace: "tenant-a", Path: []rewrite.PathElement{{Kind: "Product", Name: "p/1"}}}) {
		t.Errorf("refs[0] = %v", ref)
	}
	if f := field(o, "until").Value; f.Time.Nanosecond() != 999999999 || f.Time.Year() != 9999 {
		t.Errorf("until = %v", f)
	}
	if b := recs[2]; len(b.Fields) != 0 || b.Key.Leaf().Name != "bare" {
		t.Errorf("bare entity = %s %v", b.Key, b.Fields)
	}
}

// TestEntityJSONRefused: lines that are not entities rekey can carry
// exactly, each refused with what is wrong.
func TestEntityJSONRefused(t *testing.T) {
	key := `"key":{"partitionId":{"projectId":"p"},"path":[{"kind":"A","name":"a"}]}`
	cases := []struct {
		name, line, project, want string
	}{
		{"not JSON", `{"key":`, "", "not a Datastore entity in JSON"},
		{"unknown field", `{` + key + `,"props":{}}`, "", `unknown field "props"`},
		{"no key", `{"properties":{"a":{"integerValue":"1"}}}`, "", "entity has no key"},
		{"incomplete key", `{"key":{"path":[{"kind":"A"}]}}`, "", "incomplete"},
		{"id and name", `{"key":{"path":[{"kind":"A","id":"1","name":"a"}]}}`, "", "not a Datastore entity"},
		{"integer not int64", `{` + key + `,"properties":{"a":{"integerValue":"9223372036854775808"}}}`, "", "not a Datastore entity"},
		{"bad timestamp", `{` + key + `,"properties":{"a":{"timestampValue":"2024-13-01T00:00:00Z"}}}`, "", "not a Datastore entity"},
		{"value without type", `{` + key + `,"properties":{"a":{"excludeFromIndexes":true}}}`, "", "value has no type"},
		{"two types", `{` + key + `,"properties":{"a":{"stringValue":"x","integerValue":"1"}}}`, "", "not a Datastore entity"},
		{"nested array", `{` + key + `,"properties":{"a":{"arrayValue":{"values":[{"arrayValue":{}}]}}}}`, "", "array inside an array"},
		{"flag on array", `{` + key + `,"properties":{"a":{"arrayValue":{"values":[{"stringValue":"x"}]},"excludeFromIndexes":true}}}`, "", "on the array's elements"},
		{"mixed element flags", `{` + key + `,"properties":{"a":{"arrayValue":{"values":[{"stringValue":"x"},{"stringValue":"y","excludeFromIndexes":true}]}}}}`, "", "element 1 has excludeFromIndexes true, element 0 false"},
		{"dotted name", `{` + key + `,"properties":{"a.b":{"integerValue":"1"}}}`, "", `"a.b"`},
		{"reference to another project", `{` + key + `,"properties":{"r":{"keyValue":{"partitionId":{"projectId":"q"},"path":[{"kind":"B","id":"1"}]}}}}`, "", `key in project "q", not "p"`},
		{"entity in another project", `{` + key + `}`, "src", `key in project "p", not "src"`},
		{"embedded key in another project", `{` + key + `,"properties":{"e":{"entityValue":{"key":{"partitionId":{"projectId":"q"},"path":[{"kind":"B"}]}}}}}`, "", `embedded entity key: key in project "q"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseEntityJSON([]byte(c.line), c.project)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestEntityJSONProject: the written project is the one given, in every
// key; none when it is empty. Keys naming no project are accepted
// whatever the project expected.
func TestEntityJSONProject(t *testing.T) {
	line := []byte(`{"key":{"path":[{"kind":"A","id":"7"}]},"properties":{"r":{"keyValue":{"partitionId":{"projectId":"p"},"path":[{"kind":"B","name":"b"}]}},"e":{"entityValue":{"key":{"path":[{"kind":"C"}]}}}}}`)
	rec, err := ParseEntityJSON(line, "p")
	if err != nil {
		t.Fatal(err)
	}
	for _, project := range []string{"", "other-project"} {
		out, err := AppendEntityJSON(nil, &rec, project)
		if err != nil {
			t.Fatal(err)
		}
		e := unmarshalEntity(t, out)
		keys := []*datastorepb.Key{e.Key, e.Properties["r"].GetKeyValue(), e.Properties["e"].GetEntityValue().GetKey()}
		for i, k := range keys {
			if got := k.GetPartitionId().GetProjectId(); got != project {
				t.Errorf("project %q: key %d written in project %q: %s", project, i, got, out)
			}
		}
		if project == "" && bytes.Contains(out, []byte("partitionId")) {
			t.Errorf("an empty partition was written: %s", out)
		}
	}
}

// TestEntityJSONFromRecords writes records of other sources: kinds only
// Spanner has become strings, as in ToEntity; what Datastore cannot hold
// is refused with the property at fault.
func TestEntityJSONFromRecords(t *testing.T) {
	k := dkey("", rewrite.PathElement{Kind: "A", Name: "a"})
	rec := record.Record{Key: k, Fields: []record.Field{
		{Name: "d", Value: record.Value{Kind: record.KindDate, Int: 19753}},
		{Name: "n", Value: record.Value{Kind: record.KindNumeric, Str: "1.50"}},
		{Name: "j", Value: record.Value{Kind: record.KindJSON, Str: `{"x":1}`}},
		{Name: "k", Value: record.Value{Kind: record.KindKey}},
	}}
	out, err := AppendEntityJSON(nil, &rec, "")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"key":{"path":[{"kind":"A","name":"a"}]},"properties":{"d":{"stringValue":"2024-01-31"},"j":{"stringValue":"{\"x\":1}"},"k":{"nullValue":null},"n":{"stringValue":"1.50"}}}`
	if normalJSON(t, out) != normalJSON(t, []byte(want)) {
		t.Errorf("wrote %s\nwant  %s", out, want)
	}

	bad := []struct {
		name string
		rec  record.Record
		want string
	}{
		{"a row", record.Record{Table: "T", Fields: []record.Field{{Name: "x", Value: record.Int(1)}}}, "record has no Datastore key"},
		{"invalid UTF-8", record.Record{Key: k, Fields: []record.Field{{Name: "s", Value: record.String("\xff")}}}, `property "s": string value is not valid UTF-8`},
		{"nested array", record.Record{Key: k, Fields: []record.Field{{Name: "a", Value: record.Value{Kind: record.KindArray, Array: []record.Value{{Kind: record.KindArray}}}}}}, "cannot contain an array"},
		{"duplicate", record.Record{Key: k, Fields: []record.Field{{Name: "a", Value: record.Int(1)}, {Name: "a", Value: record.Int(2)}}}, `property "a" appears twice`},
		{"year 10000", record.Record{Key: k, Fields: []record.Field{{Name: "t", Value: record.Time(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))}}}, "outside Datastore's range"},
		{"bad embedded key", record.Record{Key: k, Fields: []record.Field{{Name: "e", Value: record.Value{Kind: record.KindEntity, Entity: []record.Field{{Name: EmbeddedKeyField, Value: record.Int(1)}}}}}}, "must hold a key"},
	}
	for _, c := range bad {
		if _, err := AppendEntityJSON(nil, &c.rec, ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// TestEntityJSONThroughBatches: the records survive the batch encoding the
// pipeline's stages exchange them in, so a file read and written by a run
// keeps its entities.
func TestEntityJSONThroughBatches(t *testing.T) {
	lines := readLines(t, exportFile)
	recs := make([]record.Record, len(lines))
	for i, l := range lines {
		var err error
		if recs[i], err = ParseEntityJSON(l, ""); err != nil {
			t.Fatal(err)
		}
	}
	back, err := record.DecodeBatch(record.EncodeBatch(recs))
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		out, err := AppendEntityJSON(nil, &back[i], "my-project")
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(unmarshalEntity(t, lines[i]), unmarshalEntity(t, out)) {
			t.Errorf("line %d changed through a batch:\n read  %s\n wrote %s", i+1, lines[i], out)
		}
	}
}
