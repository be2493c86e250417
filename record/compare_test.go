package record_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

func TestDiff(t *testing.T) {
	ts := time.Date(2024, 1, 31, 12, 0, 0, 0, time.UTC)
	row := func(fields ...record.Field) *record.Record { return &record.Record{Table: "Logs", Fields: fields} }
	f := func(name string, v record.Value) record.Field { return record.Field{Name: name, Value: v} }
	key := &rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Customer", Name: "c1"}}}
	other := &rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Customer", Name: "c2"}}}
	entity := func(k *rewrite.DatastoreKey, fields ...record.Field) *record.Record {
		return &record.Record{Table: "Customer", Key: k, Fields: fields}
	}
	for _, tc := range []struct {
		name      string
		got, want *record.Record
		diff      string // "" for same, else a part of the message
	}{
		{"same row", row(f("Id", record.Int(1)), f("At", record.Time(ts))), row(f("Id", record.Int(1)), f("At", record.Time(ts))), ""},
		{"fields in another order", row(f("At", record.Time(ts)), f("Id", record.Int(1))), row(f("Id", record.Int(1)), f("At", record.Time(ts))), ""},
		{"Spanner names in another case", &record.Record{Table: "LOGS", Fields: []record.Field{f("ID", record.Int(1))}}, row(f("Id", record.Int(1))), ""},
		{"timestamps by instant", row(f("At", record.Value{Kind: record.KindTimestamp, Time: ts.In(time.FixedZone("x", 3600))})), row(f("At", record.Time(ts))), ""},
		{"JSON as values", row(f("J", record.Value{Kind: record.KindJSON, Str: `{"b":1, "a":[1,2]}`})), row(f("J", record.Value{Kind: record.KindJSON, Str: `{"a":[1,2],"b":1}`})), ""},
		{"JSON in arrays", row(f("J", record.Value{Kind: record.KindArray, Array: []record.Value{{Kind: record.KindJSON, Str: `{ }`}}})), row(f("J", record.Value{Kind: record.KindArray, Array: []record.Value{{Kind: record.KindJSON, Str: `{}`}}})), ""},
		{"another value", row(f("Id", record.Int(2))), row(f("Id", record.Int(1))), "Id = 2"},
		{"another type", row(f("Id", record.String("1"))), row(f("Id", record.Int(1))), `Id = "1" (string), want 1 (int)`},
		{"floats bit for bit", row(f("F", record.Float(math.Copysign(0, -1)))), row(f("F", record.Float(0))), "F ="},
		{"NaN is NaN", row(f("F", record.Float(math.NaN()))), row(f("F", record.Float(math.NaN()))), ""},
		{"missing field", row(f("Id", record.Int(1))), row(f("Id", record.Int(1)), f("Name", record.String("n"))), "Name missing"},
		{"extra field", row(f("Id", record.Int(1)), f("Name", record.String("n"))), row(f("Id", record.Int(1))), "unexpected Name"},
		{"another table", &record.Record{Table: "Other"}, row(), `table "Other"`},
		{"same entity", entity(key, f("n", record.Int(1))), entity(key, f("n", record.Int(1))), ""},
		{"Datastore names are exact", entity(key, f("N", record.Int(1))), entity(key, f("n", record.Int(1))), "n missing"},
		{"another key", entity(other), entity(key), "key"},
		{"NoIndex", entity(key, record.Field{Name: "n", Value: record.Int(1), NoIndex: true}), entity(key, f("n", record.Int(1))), "NoIndex true"},
		{"embedded entities by field", entity(key, f("e", record.Value{Kind: record.KindEntity, Entity: []record.Field{f("b", record.Int(2)), f("a", record.Int(1))}})),
			entity(key, f("e", record.Value{Kind: record.KindEntity, Entity: []record.Field{f("a", record.Int(1)), f("b", record.Int(2))}})), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := record.Diff(tc.got, tc.want)
			switch {
			case tc.diff == "" && d != "":
				t.Errorf("Diff = %q, want same", d)
			case tc.diff != "" && !strings.Contains(d, tc.diff):
				t.Errorf("Diff = %q, want it to say %q", d, tc.diff)
			}
			if record.Same(tc.got, tc.want) != (tc.diff == "") {
				t.Errorf("Same = %v, Diff = %q", !(tc.diff == ""), d)
			}
		})
	}
}

func TestFieldsDiffSkips(t *testing.T) {
	got := []record.Field{{Name: "Id", Value: record.Int(1)}, {Name: "Old", Value: record.String("x")}}
	want := []record.Field{{Name: "Id", Value: record.Int(1)}}
	if d := record.FieldsDiff(got, want, "old"); d != "" {
		t.Errorf("FieldsDiff with skip = %q", d)
	}
	if d := record.FieldsDiff(got, want); !strings.Contains(d, "unexpected Old") {
		t.Errorf("FieldsDiff = %q", d)
	}
}

func TestJSONEqual(t *testing.T) {
	if !record.JSONEqual(`{"b":1,"a":[1,2]}`, `{"a": [1, 2], "b": 1}`) {
		t.Error("same JSON values differ")
	}
	if record.JSONEqual(`{"a":1}`, `{"a":2}`) || record.JSONEqual(`1.0`, `1`) {
		t.Error("different JSON values are equal")
	}
	if !record.JSONEqual(`not json`, `not json`) || record.JSONEqual(`not json`, `not  json`) {
		t.Error("non-JSON text is not compared as text")
	}
}
