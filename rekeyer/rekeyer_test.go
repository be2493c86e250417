package rekeyer

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

func strategy(t *testing.T, name string, p rewrite.Params) rewrite.Strategy {
	t.Helper()
	s, err := rewrite.New(rewrite.StepConfig{Strategy: name, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func schema(t *testing.T, table, spec string) rewrite.KeySchema {
	t.Helper()
	s, err := rewrite.ParseKeySchema(table, spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func dsKey(elems ...any) rewrite.DatastoreKey {
	var k rewrite.DatastoreKey
	for i := 0; i < len(elems); i += 2 {
		e := rewrite.PathElement{Kind: elems[i].(string)}
		if id, ok := elems[i+1].(int); ok {
			e.ID = int64(id)
		} else {
			e.Name = elems[i+1].(string)
		}
		k.Path = append(k.Path, e)
	}
	return k
}

func TestSpannerRowsAndInterleavedChildren(t *testing.T) {
	rk, err := New(Options{
		Strategy: strategy(t, "shard", rewrite.Params{"n": 8, "mode": "abs"}), SourceStore: record.Spanner, TargetStore: record.Spanner,
		Table: "Singers", Key: schema(t, "Singers", "SingerId INT64"),
		Children:    map[string]rewrite.KeySchema{"Albums": schema(t, "Albums", "SingerId INT64, AlbumId INT64")},
		TargetTable: "SingersV2", KeepOriginalKey: "OldKey",
	})
	if err != nil {
		t.Fatal(err)
	}
	singer := record.Record{Table: "Singers", Fields: []record.Field{{Name: "SingerId", Value: record.Int(42)}, {Name: "Name", Value: record.String("Ann")}}}
	album := record.Record{Table: "Albums", Fields: []record.Field{{Name: "SingerId", Value: record.Int(42)}, {Name: "AlbumId", Value: record.Int(7)}}}
	if err := rk.Rewrite(&singer); err != nil {
		t.Fatal(err)
	}
	if err := rk.Rewrite(&album); err != nil {
		t.Fatal(err)
	}
	sShard, _ := singer.Get("ShardId")
	aShard, _ := album.Get("ShardId")
	if sShard.Kind != record.KindInt || !sShard.Equal(aShard) {
		t.Errorf("child shard %v differs from parent shard %v: children must land under their new parent", aShard, sShard)
	}
	if singer.Table != "SingersV2" || album.Table != "Albums" {
		t.Errorf("tables %s, %s", singer.Table, album.Table)
	}
	if old, _ := singer.Get("OldKey"); old.Str != "42" {
		t.Errorf("OldKey = %v", old)
	}
	if out, _ := rk.ChildOut("Albums"); out.String() != "PRIMARY KEY (ShardId, SingerId, AlbumId)" {
		t.Errorf("child out %s", out)
	}
	orphan := record.Record{Table: "Songs", Fields: []record.Field{{Name: "SingerId", Value: record.Int(1)}}}
	if err := rk.Rewrite(&orphan); err == nil || !strings.Contains(err.Error(), "not Singers and not one of its interleaved children") {
		t.Errorf("unknown table: %v", err)
	}
}

func TestSpannerTypelessKeysAreCoerced(t *testing.T) {
	rk, err := New(Options{Strategy: strategy(t, "swap", rewrite.Params{"order": "UserId"}), SourceStore: record.Spanner, TargetStore: record.Spanner,
		Table: "Logs", Key: schema(t, "Logs", "LastAccess TIMESTAMP, UserId STRING(36)")})
	if err != nil {
		t.Fatal(err)
	}
	rec := record.Record{Fields: []record.Field{{Name: "LastAccess", Value: record.String("2024-01-31T13:00:00+01:00")}, {Name: "UserId", Value: record.String("u1")}}}
	if err := rk.Rewrite(&rec); err != nil {
		t.Fatal(err)
	}
	if v, _ := rec.Get("LastAccess"); v.Kind != record.KindTimestamp || !v.Time.Equal(time.Date(2024, 1, 31, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("LastAccess = %v", v)
	}
	bad := record.Record{Fields: []record.Field{{Name: "LastAccess", Value: record.String("yesterday")}, {Name: "UserId", Value: record.String("u1")}}}
	if err := rk.Rewrite(&bad); err == nil || !strings.Contains(err.Error(), "key column LastAccess") {
		t.Errorf("bad timestamp: %v", err)
	}
	long := record.Record{Fields: []record.Field{{Name: "LastAccess", Value: record.Time(time.Unix(0, 0))}, {Name: "UserId", Value: record.String(strings.Repeat("x", 37))}}}
	if err := rk.Rewrite(&long); err == nil || !strings.Contains(err.Error(), "STRING(36)") {
		t.Errorf("too long: %v", err)
	}
}

func TestDatastoreReferencesAndRenames(t *testing.T) {
	rk, err := New(Options{Strategy: strategy(t, "hashprefix", rewrite.Params{"elements": "root"}), SourceStore: record.Datastore, TargetStore: record.Datastore,
		Kind: "Customer", TargetKind: "CustomerV2", TargetNamespace: "v2", References: []string{"Referrer", "Friends"}, KeepOriginalKey: "OldKey"})
	if err != nil {
		t.Fatal(err)
	}
	k := dsKey("Customer", "Customer1")
	rec := record.Record{Table: "Customer", Key: &k, Fields: []record.Field{
		{Name: "Referrer", Value: record.Key(dsKey("Customer", "Customer2"))},
		{Name: "Friends", Value: record.Value{Kind: record.KindArray, Array: []record.Value{record.Key(dsKey("Customer", "Customer3")), record.Key(dsKey("Store", "s1"))}}},
		{Name: "Plain", Value: record.Key(dsKey("Customer", "Customer4"))},
	}}
	if err := rk.Rewrite(&rec); err != nil {
		t.Fatal(err)
	}
	if got := rec.Key.String(); got != `ns="v2",CustomerV2:"becf-Customer1"` {
		t.Errorf("key %s", got)
	}
	ref, _ := rec.Get("Referrer")
	friends, _ := rec.Get("Friends")
	plain, _ := rec.Get("Plain")
	old, _ := rec.Get("OldKey")
	if ref.Key.String() != `ns="v2",CustomerV2:"0b02-Customer2"` {
		t.Errorf("referrer %s", ref.Key)
	}
	if friends.Array[0].Key.Leaf().Name == "Customer3" || friends.Array[1].Key.Leaf().Name != "s1" {
		t.Errorf("friends %v: customers rewritten, other kinds kept", friends)
	}
	if plain.Key.Leaf().Name != "Customer4" || old.Key.Leaf().Name != "Customer1" {
		t.Errorf("plain %v old %v", plain, old)
	}
	bad := dsKey("Customer", "a/b")
	if err := rk.Rewrite(&record.Record{Key: &bad}); err == nil || !strings.Contains(err.Error(), `name contains "/"`) {
		t.Errorf("bad key: %v", err)
	}
	k2 := dsKey("Customer", "c")
	if err := rk.Rewrite(&record.Record{Key: &k2, Fields: []record.Field{{Name: "a.b", Value: record.Int(1)}}}); err == nil || !strings.Contains(err.Error(), `name contains "."`) {
		t.Errorf("dotted property: %v", err)
	}
}

func TestDatastoreToSpannerAndBack(t *testing.T) {
	rk, err := New(Options{Strategy: strategy(t, "shard", rewrite.Params{"n": 4}), SourceStore: record.Datastore, TargetStore: record.Spanner,
		Table: "Orders", Key: schema(t, "Orders", "CustomerId STRING(MAX), OrderId INT64")})
	if err != nil {
		t.Fatal(err)
	}
	k := dsKey("Customer", "Customer1", "Order", 7)
	rec := record.Record{Key: &k, Fields: []record.Field{{Name: "Total", Value: record.Float(9.5)}, {Name: "Customer", Value: record.Key(dsKey("Customer", "Customer1"))}}}
	if err := rk.Rewrite(&rec); err != nil {
		t.Fatal(err)
	}
	if rec.Key != nil || rec.Table != "Orders" {
		t.Fatalf("row %s", rec.Describe())
	}
	for name, want := range map[string]record.Value{"CustomerId": record.String("Customer1"), "OrderId": record.Int(7), "Total": record.Float(9.5), "Customer": record.String(`{"path":["Customer","Customer1"]}`)} {
		if got, _ := rec.Get(name); !got.Equal(want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if _, ok := rec.Get("ShardId"); !ok {
		t.Errorf("no ShardId")
	}
	short := dsKey("Customer", "Customer1")
	if err := rk.Rewrite(&record.Record{Key: &short}); err == nil || !strings.Contains(err.Error(), "has 1 path elements") {
		t.Errorf("path length mismatch: %v", err)
	}

	back, err := New(Options{Strategy: strategy(t, "hashprefix", nil), SourceStore: record.Spanner, TargetStore: record.Datastore,
		Key: schema(t, "Users", "UserId STRING(MAX)"), Kind: "User"})
	if err != nil {
		t.Fatal(err)
	}
	row := record.Record{Table: "Users", Fields: []record.Field{{Name: "UserId", Value: record.String("u1")}, {Name: "Age", Value: record.Int(3)}}}
	if err := back.Rewrite(&row); err != nil {
		t.Fatal(err)
	}
	if row.Key == nil || row.Key.Leaf().Kind != "User" || !strings.HasSuffix(row.Key.Leaf().Name, "-u1") || len(row.Key.Path) != 1 {
		t.Errorf("entity key %v", row.Key)
	}
}

// TestInvertDatastoreToSpanner: a row of a Datastore → Spanner migration
// inverts into the entity it was made from, by name (shard) or by id
// (bitreverse), a NULL column left out; a two-element key cannot come
// back (its ancestors' kinds are not in the row).
func TestInvertDatastoreToSpanner(t *testing.T) {
	for _, c := range []struct {
		strategy, key string
		elem          rewrite.PathElement
	}{
		{"shard", "LogKey STRING(MAX)", rewrite.PathElement{Kind: "Log", Name: "u.1"}},
		{"shard", "LogKey STRING(MAX)", rewrite.PathElement{Kind: "Log", Name: "42"}},
		{"bitreverse", "LogId INT64", rewrite.PathElement{Kind: "Log", ID: 42}},
	} {
		params := rewrite.Params{}
		if c.strategy == "shard" {
			params["n"] = 4
		}
		rk, err := New(Options{Strategy: strategy(t, c.strategy, params), SourceStore: record.Datastore, TargetStore: record.Spanner,
			Table: "LogsX", Kind: "Log", Key: schema(t, "LogsX", c.key)})
		if err != nil {
			t.Fatal(err)
		}
		k := rewrite.DatastoreKey{Path: []rewrite.PathElement{c.elem}}
		orig := record.Record{Table: "Log", Key: &k, Fields: []record.Field{{Name: "Page", Value: record.String("p")}, {Name: "Hits", Value: record.Int(3)}}}
		row := orig
		kc := k.Clone()
		row.Key = &kc
		row.Fields = append([]record.Field(nil), orig.Fields...)
		if err := rk.Rewrite(&row); err != nil {
			t.Fatal(err)
		}
		row.Fields = append(row.Fields, record.Field{Name: "Note", Value: record.Value{}})
		if err := rk.Invert(&row); err != nil {
			t.Fatalf("%s %s: %v", c.strategy, c.elem, err)
		}
		if d := record.Diff(&row, &orig); d != "" || row.Key == nil || row.Key.String() != k.String() || row.Table != "Log" {
			t.Errorf("%s %s: inverted %s (%s), want %s", c.strategy, c.elem, row.Describe(), d, orig.Describe())
		}
	}
	rk, err := New(Options{Strategy: strategy(t, "shard", rewrite.Params{"n": 4}), SourceStore: record.Datastore, TargetStore: record.Spanner,
		Table: "Orders", Kind: "Order", Key: schema(t, "Orders", "CustomerId STRING(MAX), OrderId INT64")})
	if err != nil {
		t.Fatal(err)
	}
	k := dsKey("Customer", "c1", "Order", 7)
	rec := record.Record{Key: &k}
	if err := rk.Rewrite(&rec); err != nil {
		t.Fatal(err)
	}
	if err := rk.Invert(&rec); !errors.Is(err, ErrNotInvertible) {
		t.Errorf("a two-element key: %v, want ErrNotInvertible", err)
	}
}

// TestStrictColumns: with StrictColumns a Datastore entity whose property
// a column would keep only as text (a key, in an array too) is refused,
// naming the property, and left as it was; without it the key becomes its
// JSON notation.
func TestStrictColumns(t *testing.T) {
	o := Options{Strategy: strategy(t, "shard", rewrite.Params{"n": 4}), SourceStore: record.Datastore, TargetStore: record.Spanner,
		Table: "Logs", Key: schema(t, "Logs", "LogKey STRING(MAX)")}
	loose, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	o.StrictColumns = true
	strict, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	entity := func(v record.Value) record.Record {
		k := dsKey("Log", "u.1")
		return record.Record{Key: &k, Fields: []record.Field{{Name: "Page", Value: record.String("p")}, {Name: "Ref", Value: v}}}
	}
	ref := record.Key(dsKey("Page", "x"))
	for _, v := range []record.Value{ref, {Kind: record.KindArray, Array: []record.Value{record.Int(1), ref}}} {
		rec := entity(v)
		err := strict.Rewrite(&rec)
		if err == nil || !strings.Contains(err.Error(), "property Ref holds a key") {
			t.Errorf("strict, Ref %v: %v; want the property refused by name", v, err)
		}
		if rec.Key == nil || len(rec.Fields) != 2 {
			t.Errorf("strict: the refused record changed: %s", rec.Describe())
		}
	}
	rec := entity(record.String("plain"))
	if err := strict.Rewrite(&rec); err != nil {
		t.Errorf("strict, a plain property: %v", err)
	}
	rec = entity(ref)
	if err := loose.Rewrite(&rec); err != nil {
		t.Fatal(err)
	}
	if got, _ := rec.Get("Ref"); got.Kind != record.KindString {
		t.Errorf("not strict: Ref = %v, want the key's JSON notation", got)
	}
}

// An Invoice copied in its own run points at the Customer keys another
// run rewrote (with hashprefix, into namespace v2); a key of a migrated
// kind in a property with no mapping is counted as unmapped.
func TestReferencesToAnotherRun(t *testing.T) {
	spec := Spec{
		Strategy: rewrite.StepConfig{Strategy: "none"}, SourceStore: record.Datastore, TargetStore: record.Datastore, Kind: "Invoice",
		ReferencesTo: []ReferenceToSpec{{Property: "customer", Kind: "Customer", Strategy: rewrite.StepConfig{Strategy: "hashprefix"}, TargetNamespace: "v2"}},
	}
	rk, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	cust := dsKey("Customer", "Customer1")
	other := dsKey("Customer", "Customer2")
	inv := record.Record{Table: "Invoice", Key: ptr(dsKey("Invoice", 7)), Fields: []record.Field{
		{Name: "customer", Value: record.Key(cust)},
		{Name: "previous", Value: record.Key(other)}, // a Customer key with no mapping
		{Name: "total", Value: record.Int(3)},
	}}
	if n := rk.Unmapped(&inv); n != 1 {
		t.Errorf("Unmapped = %d, want 1 (previous)", n)
	}
	if err := rk.Rewrite(&inv); err != nil {
		t.Fatal(err)
	}
	st, _ := rewrite.New(rewrite.StepConfig{Strategy: "hashprefix"})
	ds, _ := st.Datastore()
	want, _ := ds.Rewrite(cust)
	want.Namespace = "v2"
	got, _ := inv.Get("customer")
	if got.Kind != record.KindKey || !got.Key.Equal(want) {
		t.Errorf("customer = %v, want %v", got, want)
	}
	if prev, _ := inv.Get("previous"); !prev.Key.Equal(other) {
		t.Errorf("previous = %v, want it unchanged", prev)
	}
}

func ptr[T any](v T) *T { return &v }

// TestKeeps: a shard rewrite keeps the key columns it puts a shard in
// front of; bitreverse changes the column it reverses; other columns are
// copied.
func TestKeeps(t *testing.T) {
	build := func(name string, p rewrite.Params, key string, target string) *Rekeyer {
		t.Helper()
		rk, err := New(Options{Strategy: strategy(t, name, p), SourceStore: target, TargetStore: target, Table: "T", Key: schema(t, "T", key), Kind: "T"})
		if err != nil {
			t.Fatal(err)
		}
		return rk
	}
	for _, tc := range []struct {
		rk     *Rekeyer
		column string
		want   bool
	}{
		{build("shard", rewrite.Params{"n": 8}, "UserId STRING(36), Seq INT64", record.Spanner), "UserId", true},
		{build("shard", rewrite.Params{"n": 8}, "UserId STRING(36), Seq INT64", record.Spanner), "Page", true},
		{build("bitreverse", nil, "CustomerId INT64", record.Spanner), "CustomerId", false},
		{build("bitreverse", nil, "CustomerId INT64", record.Spanner), "Name", true},
	} {
		if got := tc.rk.Keeps(tc.column); got != tc.want {
			t.Errorf("%s: Keeps(%s) = %v, want %v", tc.rk.o.Strategy.Info().Name, tc.column, got, tc.want)
		}
	}
}

// TestAdds: Adds counts what a Rewrite appends (shard's ShardId and the
// kept key here), so that a record sized by it takes the rewrite without
// growing.
func TestAdds(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Options
		rec  record.Record
		want int
	}{
		{"shard with the old key kept", Options{
			Strategy: strategy(t, "shard", rewrite.Params{"n": 8, "mode": "abs"}), SourceStore: record.Spanner, TargetStore: record.Spanner,
			Table: "Singers", Key: schema(t, "Singers", "SingerId INT64"), KeepOriginalKey: "OldKey",
		}, record.Record{Table: "Singers", Fields: []record.Field{{Name: "SingerId", Value: record.Int(42)}, {Name: "Name", Value: record.String("Ann")}}}, 2},
		{"bitreverse", Options{
			Strategy: strategy(t, "bitreverse", nil), SourceStore: record.Spanner, TargetStore: record.Spanner,
			Table: "Singers", Key: schema(t, "Singers", "SingerId INT64"),
		}, record.Record{Table: "Singers", Fields: []record.Field{{Name: "SingerId", Value: record.Int(42)}}}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			rk, err := New(c.o)
			if err != nil {
				t.Fatal(err)
			}
			if got := rk.Adds(); got != c.want {
				t.Errorf("Adds() = %d, want %d", got, c.want)
			}
			before := len(c.rec.Fields)
			if err := rk.Rewrite(&c.rec); err != nil {
				t.Fatal(err)
			}
			if got := len(c.rec.Fields) - before; got != c.want {
				t.Errorf("the rewrite appended %d fields, want %d (Adds)", got, c.want)
			}
		})
	}
}

// TestRewriteInSharesNothing: rows rewritten one after another with one
// Scratch (parents, interleaved children, a row that fails) come out as
// Rewrite makes them, and a later rewrite leaves the earlier rows' values
// alone: nothing a rewritten row holds points into the scratch.
func TestRewriteInSharesNothing(t *testing.T) {
	for _, name := range []string{"hashprefix", "uuid", "swap", "shard"} {
		t.Run(name, func(t *testing.T) {
			p := rewrite.Params{}
			switch name {
			case "swap":
				p["order"] = "Name, SingerId"
			case "uuid":
				p["keep"] = true
			}
			rk, err := New(Options{
				Strategy: strategy(t, name, p), SourceStore: record.Spanner, TargetStore: record.Spanner,
				Table: "Singers", Key: schema(t, "Singers", "SingerId STRING(MAX), Name STRING(MAX)"),
				Children: map[string]rewrite.KeySchema{"Albums": schema(t, "Albums", "SingerId STRING(MAX), Name STRING(MAX), AlbumId INT64")},
			})
			if err != nil {
				t.Fatal(err)
			}
			row := func(i int) record.Record {
				id := record.String("singer-" + strings.Repeat("x", i%5) + string(rune('a'+i%26)))
				if i%3 == 2 {
					return record.Record{Table: "Albums", Fields: []record.Field{{Name: "SingerId", Value: id}, {Name: "Name", Value: record.String("n")}, {Name: "AlbumId", Value: record.Int(int64(i))}}}
				}
				if i%7 == 6 { // no key column Name: refused
					return record.Record{Table: "Singers", Fields: []record.Field{{Name: "SingerId", Value: id}}}
				}
				return record.Record{Table: "Singers", Fields: []record.Field{{Name: "SingerId", Value: id}, {Name: "Name", Value: record.String("n" + string(rune('a'+i%26)))}}}
			}
			var scratch Scratch
			var got, want []record.Record
			var gotErr, wantErr []bool
			for i := range 40 {
				g, w := row(i), row(i)
				ge, we := rk.RewriteIn(&g, &scratch), rk.Rewrite(&w)
				got, want = append(got, g), append(want, w)
				gotErr, wantErr = append(gotErr, ge != nil), append(wantErr, we != nil)
			}
			for i := range got {
				if gotErr[i] != wantErr[i] {
					t.Fatalf("row %d: RewriteIn failed %v, Rewrite failed %v", i, gotErr[i], wantErr[i])
				}
				if !gotErr[i] && !got[i].Equal(&want[i]) {
					t.Errorf("row %d after 40 rewrites with one scratch: %s, want %s", i, got[i].Describe(), want[i].Describe())
				}
			}
			if !slices.Contains(wantErr, true) {
				t.Fatal("no row was refused: the test lost its failing case")
			}
		})
	}
}

// TestFailedRewriteWritesNoField: a row whose rewrite fails has nothing
// written into its fields' array, up to its capacity, so a caller that
// rewrites rows in place (transforms.RewriteOwning) dead-letters the row
// as it was read. The failures: a key column missing, a key value of the
// wrong type, a new key over Spanner's size limit, an interleaved child
// whose parent key does not rewrite, a row of an unknown table.
func TestFailedRewriteWritesNoField(t *testing.T) {
	rk, err := New(Options{
		Strategy: strategy(t, "hashprefix", rewrite.Params{"n": 4}), SourceStore: record.Spanner, TargetStore: record.Spanner,
		Table: "Singers", Key: schema(t, "Singers", "SingerId STRING(MAX)"),
		Children:        map[string]rewrite.KeySchema{"Albums": schema(t, "Albums", "SingerId STRING(MAX), AlbumId INT64")},
		KeepOriginalKey: "OldKey",
	})
	if err != nil {
		t.Fatal(err)
	}
	long := record.String(strings.Repeat("k", 8190))
	rows := map[string]record.Record{
		"no key column":  {Table: "Singers", Fields: []record.Field{{Name: "Name", Value: record.String("Ann")}}},
		"wrong key type": {Table: "Singers", Fields: []record.Field{{Name: "SingerId", Value: record.Float(1.5)}, {Name: "Name", Value: record.String("Ann")}}},
		"key too long":   {Table: "Singers", Fields: []record.Field{{Name: "SingerId", Value: long}}},
		"child too long": {Table: "Albums", Fields: []record.Field{{Name: "SingerId", Value: long}, {Name: "AlbumId", Value: record.Int(1)}}},
		"unknown table":  {Table: "Songs", Fields: []record.Field{{Name: "SingerId", Value: record.String("s")}}},
	}
	for name, r := range rows {
		r.Fields = append(make([]record.Field, 0, len(r.Fields)+3), r.Fields...)
		before := slices.Clone(r.Fields[:cap(r.Fields)])
		in := r
		if err := rk.Rewrite(&in); err == nil {
			t.Errorf("%s: rewritten, want an error", name)
			continue
		}
		for i, f := range r.Fields[:cap(r.Fields)] {
			if f.Name != before[i].Name || !f.Value.Equal(before[i].Value) {
				t.Errorf("%s: field %d of the array is %s=%v after the failed rewrite, was %s=%v", name, i, f.Name, f.Value, before[i].Name, before[i].Value)
			}
		}
	}
	ok := record.Record{Table: "Singers", Fields: append(make([]record.Field, 0, 4), record.Field{Name: "SingerId", Value: record.String("s")})}
	if err := rk.Rewrite(&ok); err != nil || len(ok.Fields) != 2 {
		t.Fatalf("the control row: %v, fields %v (want SingerId and OldKey)", err, ok.Fields)
	}
}
