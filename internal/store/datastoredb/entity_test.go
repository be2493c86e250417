package datastoredb

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

func dkey(ns string, path ...rewrite.PathElement) *rewrite.DatastoreKey {
	return &rewrite.DatastoreKey{Namespace: ns, Path: path}
}

// everyKind returns an entity record holding every property type, already
// in the normal form FromEntity returns (fields sorted by name, times in
// microseconds, NoIndex where Datastore forces it).
func everyKind() record.Record {
	ref := record.Key(*dkey("ns1", rewrite.PathElement{Kind: "Org", Name: "acme"}, rewrite.PathElement{Kind: "User", ID: 99}))
	return record.Record{
		Table: "Thing",
		Key:   dkey("ns1", rewrite.PathElement{Kind: "Parent", ID: 5}, rewrite.PathElement{Kind: "Thing", Name: "t1"}),
		Fields: []record.Field{
			{Name: "arr", Value: record.Value{Kind: record.KindArray, Array: []record.Value{
				record.Int(1), record.String("x"), {}, ref, {Kind: record.KindGeoPoint, Lat: 1, Lng: 2},
				{Kind: record.KindEntity, Entity: []record.Field{{Name: "e", Value: record.Bool(true)}}},
			}}},
			{Name: "b", Value: record.Bool(true)},
			{Name: "blob", Value: record.Bytes([]byte{0, 1, 2, 255})},
			{Name: "emb", Value: record.Value{Kind: record.KindEntity, Entity: []record.Field{
				{Name: EmbeddedKeyField, Value: record.Key(*dkey("ns1", rewrite.PathElement{Kind: "Inner"}))},
				{Name: "n", Value: record.Int(-3)},
				{Name: "s", Value: record.String("inner"), NoIndex: true},
			}}},
			{Name: "emptyArr", Value: record.Value{Kind: record.KindArray, Array: []record.Value{}}},
			{Name: "f", Value: record.Float(1.5)},
			{Name: "geo", Value: record.Value{Kind: record.KindGeoPoint, Lat: -33.8688, Lng: 151.2093}},
			{Name: "i", Value: record.Int(math.MinInt64)},
			{Name: "inf", Value: record.Float(math.Inf(-1))},
			{Name: "k", Value: ref},
			{Name: "long", Value: record.String(strings.Repeat("y", 2000)), NoIndex: true},
			{Name: "nan", Value: record.Float(math.Float64frombits(0x7ff8000000000000))},
			{Name: "negZero", Value: record.Float(math.Copysign(0, -1))},
			{Name: "noIdx", Value: record.Int(7), NoIndex: true},
			{Name: "null", Value: record.Value{}},
			{Name: "quietEmb", NoIndex: true, Value: record.Value{Kind: record.KindEntity, Entity: []record.Field{
				{Name: "q", Value: record.String("z"), NoIndex: true},
			}}},
			{Name: "s", Value: record.String("héllo, 世界")},
			{Name: "t", Value: record.Time(time.Date(2024, 2, 29, 23, 59, 58, 123456000, time.UTC))},
		},
	}
}

func TestToEntityTypes(t *testing.T) {
	rec := everyKind()
	key, props, err := ToEntity(&rec)
	if err != nil {
		t.Fatal(err)
	}
	wantKey := datastore.NameKey("Thing", "t1", datastore.IDKey("Parent", 5, nil))
	wantKey.Namespace, wantKey.Parent.Namespace = "ns1", "ns1"
	if !key.Equal(wantKey) {
		t.Errorf("key = %v, want %v", key, wantKey)
	}
	wantTypes := map[string]any{
		"arr": []any{}, "b": true, "blob": []byte{}, "emb": &datastore.Entity{}, "emptyArr": []any{},
		"f": 0.0, "geo": datastore.GeoPoint{}, "i": int64(0), "inf": 0.0, "k": &datastore.Key{},
		"long": "", "nan": 0.0, "negZero": 0.0, "noIdx": int64(0), "null": nil, "quietEmb": &datastore.Entity{},
		"s": "", "t": time.Time{},
	}
	if len(props) != len(wantTypes) {
		t.Fatalf("got %d properties, want %d", len(props), len(wantTypes))
	}
	for i, p := range props {
		if p.Name != rec.Fields[i].Name {
			t.Errorf("property %d is %q, want %q (record order kept)", i, p.Name, rec.Fields[i].Name)
		}
		if got, want := reflect.TypeOf(p.Value), reflect.TypeOf(wantTypes[p.Name]); got != want {
			t.Errorf("property %q has type %v, want %v", p.Name, got, want)
		}
		if p.NoIndex != rec.Fields[i].NoIndex {
			t.Errorf("property %q NoIndex = %v, want %v", p.Name, p.NoIndex, rec.Fields[i].NoIndex)
		}
	}
	emb := props[3].Value.(*datastore.Entity)
	if emb.Key == nil || emb.Key.Kind != "Inner" || !emb.Key.Incomplete() {
		t.Errorf("embedded key = %v, want an incomplete Inner key", emb.Key)
	}
	if len(emb.Properties) != 2 {
		t.Errorf("embedded properties = %v, want n and s (the key is not a property)", emb.Properties)
	}
}

func TestRoundTripEveryKind(t *testing.T) {
	rec := everyKind()
	key, props, err := ToEntity(&rec)
	if err != nil {
		t.Fatal(err)
	}
	// Datastore keeps no order: shuffle the properties like a read does.
	slices.Reverse(props)
	got, err := FromEntity(key, props)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(&rec) {
		t.Errorf("round trip:\n got %s\nwant %s", describe(&got), describe(&rec))
	}
	if a, b := record.AppendRecord(nil, &got), record.AppendRecord(nil, &rec); string(a) != string(b) {
		t.Errorf("round trip encodes differently")
	}
}

func describe(r *record.Record) string {
	var b strings.Builder
	b.WriteString(r.Table + " " + r.Key.String() + " {")
	for _, f := range r.Fields {
		s := f.Value.String()
		if len(s) > 60 {
			s = s[:60] + "..."
		}
		b.WriteString(" " + f.Name + "=" + s)
		if f.NoIndex {
			b.WriteString("(noindex)")
		}
	}
	return b.String() + " }"
}

func TestToEntityNormalises(t *testing.T) {
	key := dkey("", rewrite.PathElement{Kind: "K", ID: 1})
	ts := time.Date(2020, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", 3600))
	in := record.Record{Table: "Ignored", Key: key, Fields: []record.Field{
		{Name: "z", Value: record.Int(1)},
		{Name: "t", Value: record.Value{Kind: record.KindTimestamp, Time: ts}},
		{Name: "date", Value: record.Value{Kind: record.KindDate, Int: 19753}},
		{Name: "num", Value: record.Value{Kind: record.KindNumeric, Str: "1.50"}},
		{Name: "json", Value: record.Value{Kind: record.KindJSON, Str: `{"a":[1,2]}`}},
		{Name: "long", Value: record.String(strings.Repeat("x", MaxIndexedBytes+1))},
		{Name: "longBytes", Value: record.Bytes(make([]byte, MaxIndexedBytes+1))},
		{Name: "short", Value: record.String(strings.Repeat("x", MaxIndexedBytes))},
		{Name: "arrLong", Value: record.Value{Kind: record.KindArray, Array: []record.Value{record.String("a"), record.String(strings.Repeat("x", 1501))}}},
		{Name: "emptyNoIdx", NoIndex: true, Value: record.Value{Kind: record.KindArray}},
		{Name: "quiet", NoIndex: true, Value: record.Value{Kind: record.KindEntity, Entity: []record.Field{{Name: "a", Value: record.Int(1)}}}},
		{Name: "goNaN", Value: record.Float(math.NaN())},
	}}
	k, props, err := ToEntity(&in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromEntity(k, props)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		v       record.Value
		noIndex bool
	}{
		"z":          {record.Int(1), false},
		"t":          {record.Time(time.Date(2020, 1, 2, 2, 4, 5, 123456000, time.UTC)), false},
		"date":       {record.String("2024-01-31"), false},
		"num":        {record.String("1.50"), false},
		"json":       {record.String(`{"a":[1,2]}`), false},
		"long":       {record.String(strings.Repeat("x", 1501)), true},
		"longBytes":  {record.Bytes(make([]byte, 1501)), true},
		"short":      {record.String(strings.Repeat("x", 1500)), false},
		"arrLong":    {record.Value{Kind: record.KindArray, Array: []record.Value{record.String("a"), record.String(strings.Repeat("x", 1501))}}, true},
		"emptyNoIdx": {record.Value{Kind: record.KindArray, Array: []record.Value{}}, false},
		"quiet":      {record.Value{Kind: record.KindEntity, Entity: []record.Field{{Name: "a", Value: record.Int(1), NoIndex: true}}}, true},
		"goNaN":      {record.Float(math.Float64frombits(0x7ff8000000000000)), false},
	}
	if got.Table != "K" {
		t.Errorf("Table = %q, want the key's kind K", got.Table)
	}
	if len(got.Fields) != len(want) {
		t.Fatalf("got %d fields, want %d", len(got.Fields), len(want))
	}
	for i, f := range got.Fields {
		if i > 0 && got.Fields[i-1].Name >= f.Name {
			t.Errorf("fields not sorted: %q after %q", f.Name, got.Fields[i-1].Name)
		}
		w := want[f.Name]
		if !f.Value.Equal(w.v) || f.NoIndex != w.noIndex {
			t.Errorf("%s = %s noindex=%v, want %s noindex=%v", f.Name, trunc(f.Value.String()), f.NoIndex, trunc(w.v.String()), w.noIndex)
		}
	}
	// Truncation, not rounding: .999999999 stays in the same second.
	in = record.Record{Key: key, Fields: []record.Field{{Name: "t", Value: record.Time(time.Unix(10, 999999999))}}}
	_, props, err = ToEntity(&in)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := props[0].Value.(time.Time), time.Unix(10, 999999000).UTC(); !got.Equal(want) {
		t.Errorf("time = %v, want %v", got, want)
	}
}

func trunc(s string) string {
	if len(s) > 50 {
		return s[:50] + "..."
	}
	return s
}

func TestToEntityRefuses(t *testing.T) {
	ok := dkey("", rewrite.PathElement{Kind: "K", ID: 1})
	withField := func(f record.Field) record.Record {
		return record.Record{Key: ok, Fields: []record.Field{f}}
	}
	incomplete := *dkey("", rewrite.PathElement{Kind: "K"})
	tests := []struct {
		name string
		rec  record.Record
		want string
		is   error
	}{
		{"no key", record.Record{Table: "T"}, "no Datastore key", nil},
		{"slash in key name", record.Record{Key: dkey("", rewrite.PathElement{Kind: "K", Name: "a/b"})}, `name contains "/"`, rewrite.ErrInvalidKey},
		{"zero id", record.Record{Key: &incomplete}, "id is 0", rewrite.ErrInvalidKey},
		{"bad namespace", record.Record{Key: dkey("a b", rewrite.PathElement{Kind: "K", ID: 1})}, "namespace", rewrite.ErrInvalidKey},
		{"dotted property", withField(record.Field{Name: "a.b", Value: record.Int(1)}), `property "a.b": name contains "."`, nil},
		{"reserved property", withField(record.Field{Name: "__x__", Value: record.Int(1)}), "reserved", nil},
		{"empty property", withField(record.Field{Name: "", Value: record.Int(1)}), "empty name", nil},
		{"dotted embedded property", withField(record.Field{Name: "e", Value: record.Value{Kind: record.KindEntity, Entity: []record.Field{{Name: "x.y", Value: record.Int(1)}}}}), `property "x.y"`, nil},
		{"duplicate property", record.Record{Key: ok, Fields: []record.Field{{Name: "a", Value: record.Int(1)}, {Name: "a", Value: record.Int(2)}}}, `"a" appears twice`, nil},
		{"nested array", withField(record.Field{Name: "a", Value: record.Value{Kind: record.KindArray, Array: []record.Value{{Kind: record.KindArray}}}}), "array cannot contain an array", nil},
		{"bad geo", withField(record.Field{Name: "g", Value: record.Value{Kind: record.KindGeoPoint, Lat: 91}}), "geo point", nil},
		{"time too early", withField(record.Field{Name: "t", Value: record.Time(time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC))}), "outside Datastore's range", nil},
		{"time too late", withField(record.Field{Name: "t", Value: record.Time(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))}), "outside Datastore's range", nil},
		{"bad utf8", withField(record.Field{Name: "s", Value: record.String("\xff")}), "UTF-8", nil},
		{"incomplete key value", withField(record.Field{Name: "k", Value: record.Key(incomplete)}), "incomplete", nil},
		{"embedded key not a key", withField(record.Field{Name: "e", Value: record.Value{Kind: record.KindEntity, Entity: []record.Field{{Name: EmbeddedKeyField, Value: record.Int(1)}}}}), "must hold a key", nil},
		{"top-level __key__", withField(record.Field{Name: EmbeddedKeyField, Value: record.Key(*ok)}), "reserved", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ToEntity(&tt.rec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ToEntity error = %v, want one containing %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
		})
	}
}

func TestFromEntityRefuses(t *testing.T) {
	k := datastore.IDKey("K", 1, nil)
	tests := []struct {
		name  string
		key   *datastore.Key
		props []datastore.Property
		want  string
	}{
		{"no key", nil, nil, "no key"},
		{"slash in key name", datastore.NameKey("K", "a/b", nil), nil, `name contains "/"`},
		{"dotted name", k, []datastore.Property{{Name: "a.b", Value: int64(1)}}, `name contains "."`},
		{"dotted embedded name", k, []datastore.Property{{Name: "e", Value: &datastore.Entity{Properties: []datastore.Property{{Name: "c.d", Value: int64(1)}}}}}, `property "e": property "c.d"`},
		{"opaque value", k, []datastore.Property{{Name: "x", Value: int32(1)}}, "unsupported value type int32"},
		{"nested array", k, []datastore.Property{{Name: "x", Value: []any{[]any{int64(1)}}}}, "array inside an array"},
		{"duplicate", k, []datastore.Property{{Name: "x", Value: int64(1)}, {Name: "x", Value: int64(2)}}, "appears twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromEntity(tt.key, tt.props)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("FromEntity error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestFromEntityValues(t *testing.T) {
	ts := time.Date(2001, 2, 3, 4, 5, 6, 7000, time.FixedZone("y", -7200))
	ref := datastore.NameKey("Ref", "r", datastore.IDKey("P", 2, nil))
	props := []datastore.Property{
		{Name: "t", Value: ts},
		{Name: "nilKey", Value: (*datastore.Key)(nil)},
		{Name: "nilEntity", Value: (*datastore.Entity)(nil)},
		{Name: "ref", Value: ref, NoIndex: true},
		{Name: "emb", Value: &datastore.Entity{Properties: []datastore.Property{{Name: "b", Value: int64(2)}, {Name: "a", Value: int64(1)}}}},
	}
	got, err := FromEntity(datastore.IDKey("K", 3, nil), props)
	if err != nil {
		t.Fatal(err)
	}
	want := []record.Field{
		{Name: "emb", Value: record.Value{Kind: record.KindEntity, Entity: []record.Field{{Name: "a", Value: record.Int(1)}, {Name: "b", Value: record.Int(2)}}}},
		{Name: "nilEntity"},
		{Name: "nilKey"},
		{Name: "ref", Value: record.Key(KeyFromDatastore(ref)), NoIndex: true},
		{Name: "t", Value: record.Time(ts)},
	}
	wantRec := record.Record{Table: "K", Key: dkey("", rewrite.PathElement{Kind: "K", ID: 3}), Fields: want}
	if !got.Equal(&wantRec) {
		t.Errorf("FromEntity:\n got %s\nwant %s", describe(&got), describe(&wantRec))
	}
	if loc := got.Fields[4].Value.Time.Location(); loc != time.UTC {
		t.Errorf("time location = %v, want UTC", loc)
	}
}

func TestEntitySize(t *testing.T) {
	k := datastore.NameKey("Kind", "name", nil)
	small := EntitySize(k, datastore.PropertyList{{Name: "a", Value: int64(1)}})
	big := EntitySize(k, datastore.PropertyList{{Name: "a", Value: strings.Repeat("x", 1<<20)}})
	if small <= 0 || small > 200 {
		t.Errorf("small entity size = %d, want a few dozen bytes", small)
	}
	if big < 1<<20 || big > 1<<20+200 {
		t.Errorf("1 MiB string entity size = %d, want just over 1 MiB", big)
	}
	nested := EntitySize(k, datastore.PropertyList{{Name: "e", Value: &datastore.Entity{Properties: []datastore.Property{{Name: "s", Value: strings.Repeat("x", 1000)}}}}, {Name: "arr", Value: []any{strings.Repeat("y", 1000), int64(1)}}})
	if nested < 2000 {
		t.Errorf("nested entity size = %d, want over 2000", nested)
	}
}
