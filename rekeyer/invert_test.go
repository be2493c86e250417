package rekeyer

import (
	"errors"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// TestInvert checks that Invert(Rewrite(r)) is r, for a Spanner row
// (shard: a column added in front, a table rename) and a Datastore entity
// (hashprefix, a kind rename and a namespace move) and a row of an
// interleaved child (its root's key inverted in front), through the
// strategy's inverse, and through the kept original key where the
// strategy has none (uuid v5); without either it refuses.
func TestInvert(t *testing.T) {
	row := record.Record{Table: "Logs", Fields: []record.Field{{Name: "UserId", Value: record.String("u1")}, {Name: "Seq", Value: record.Int(3)}, {Name: "Page", Value: record.String("/a")}}}
	k := dsKey("Log", "u1.3")
	k.Namespace = "old"
	ent := record.Record{Table: "Log", Key: &k, Fields: []record.Field{{Name: "User", Value: record.String("u1")}, {Name: "Page", Value: record.String("/a")}}}
	order := record.Record{Table: "Orders", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(7)}, {Name: "OrderId", Value: record.Int(2)}, {Name: "Note", Value: record.String("n")}}}
	customers := func(strat string, p rewrite.Params, kept string) Options {
		return Options{Strategy: strategy(t, strat, p), SourceStore: record.Spanner, TargetStore: record.Spanner,
			Table: "Customers", Key: schema(t, "Customers", "CustomerId INT64"), KeepOriginalKey: kept,
			Children: map[string]rewrite.KeySchema{"Orders": schema(t, "Orders", "CustomerId INT64, OrderId INT64")}}
	}
	for _, tc := range []struct {
		name string
		o    Options
		rec  record.Record
	}{
		{"spanner shard", Options{Strategy: strategy(t, "shard", rewrite.Params{"n": 8, "mode": "abs"}), SourceStore: record.Spanner, TargetStore: record.Spanner,
			Table: "Logs", Key: schema(t, "Logs", "UserId STRING(36), Seq INT64"), TargetTable: "LogsV2"}, row},
		{"spanner uuid kept", Options{Strategy: strategy(t, "uuid", rewrite.Params{"version": 5, "namespace": "6ba7b810-9dad-11d1-80b4-00c04fd430c8"}), SourceStore: record.Spanner, TargetStore: record.Spanner,
			Table: "Logs", Key: schema(t, "Logs", "UserId STRING(36), Seq INT64"), TargetTable: "LogsV2", KeepOriginalKey: "OldKey"}, row},
		{"spanner child bitreverse", customers("bitreverse", nil, ""), order},
		{"spanner child shard", customers("shard", rewrite.Params{"n": 8, "mode": "abs"}, ""), order},
		{"spanner child uuid kept", customers("uuid", rewrite.Params{"version": 5, "namespace": "6ba7b810-9dad-11d1-80b4-00c04fd430c8"}, "OldKey"), order},
		{"datastore hashprefix", Options{Strategy: strategy(t, "hashprefix", nil), SourceStore: record.Datastore, TargetStore: record.Datastore,
			Kind: "Log", TargetKind: "LogV2", TargetNamespace: "new"}, ent},
		{"datastore uuid kept", Options{Strategy: strategy(t, "uuid", rewrite.Params{"version": 5, "namespace": "6ba7b810-9dad-11d1-80b4-00c04fd430c8"}), SourceStore: record.Datastore, TargetStore: record.Datastore,
			Kind: "Log", TargetNamespace: "new", KeepOriginalKey: "OldKey"}, ent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rk, err := New(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			r := tc.rec
			r.Fields = append([]record.Field(nil), tc.rec.Fields...)
			if err := rk.Rewrite(&r); err != nil {
				t.Fatal(err)
			}
			if record.Same(&r, &tc.rec) {
				t.Fatalf("the rewrite left %s unchanged", tc.rec.Describe())
			}
			if err := rk.Invert(&r); err != nil {
				t.Fatal(err)
			}
			if r.Key != nil {
				r.Key.Namespace = tc.rec.Key.Namespace // the caller's
			}
			if d := record.Diff(&r, &tc.rec); d != "" {
				t.Errorf("Invert(Rewrite(%s)): %s", tc.rec.Describe(), d)
			}
			if tc.o.KeepOriginalKey != "" {
				o := tc.o
				o.KeepOriginalKey = ""
				rk, err := New(o)
				if err != nil {
					t.Fatal(err)
				}
				r := tc.rec
				r.Fields = append([]record.Field(nil), tc.rec.Fields...)
				if err := rk.Rewrite(&r); err != nil {
					t.Fatal(err)
				}
				if err := rk.Invert(&r); !errors.Is(err, ErrNotInvertible) {
					t.Errorf("Invert without a kept key: %v, want ErrNotInvertible", err)
				}
			}
		})
	}
}

// TestInvertReferences: Invert gives a rewritten entity's references back
// (a key, and keys in an array, of the migrated kind and a descendant
// kind, moved back to the source namespace, the kind renamed back),
// leaves a key of another kind as it is, does not change the rewritten
// record's fields in place, and refuses references under a strategy with
// no inverse.
func TestInvertReferences(t *testing.T) {
	ref := func(elems ...any) record.Value {
		k := dsKey(elems...)
		k.Namespace = "old"
		return record.Key(k)
	}
	k := dsKey("Log", "u1.3")
	k.Namespace = "old"
	other := dsKey("Other", "x")
	other.Namespace = "elsewhere"
	ent := record.Record{Table: "Log", Key: &k, Fields: []record.Field{
		{Name: "Prev", Value: ref("Log", "u1.2")},
		{Name: "Seen", Value: record.Value{Kind: record.KindArray, Array: []record.Value{ref("Log", "u1.1"), ref("Log", "u1.1", "Page", 7), record.Key(other)}}},
		{Name: "Page", Value: record.String("/a")},
	}}
	o := Options{Strategy: strategy(t, "hashprefix", nil), SourceStore: record.Datastore, TargetStore: record.Datastore,
		Kind: "Log", TargetKind: "LogV2", TargetNamespace: "new", SourceNamespace: "old", DescendantKinds: []string{"Page"}, References: []string{"Prev", "Seen"}}
	rk, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	r := ent
	r.Fields = append([]record.Field(nil), ent.Fields...)
	if err := rk.Rewrite(&r); err != nil {
		t.Fatal(err)
	}
	prev, _ := r.Get("Prev")
	if prev.Key.Namespace != "new" || prev.Key.Leaf().Kind != "LogV2" {
		t.Fatalf("the rewrite gave Prev %s; want it in namespace new, of kind LogV2", prev.Key)
	}
	rewritten := r
	if err := rk.Invert(&r); err != nil {
		t.Fatal(err)
	}
	r.Key.Namespace = "old"
	if d := record.Diff(&r, &ent); d != "" {
		t.Errorf("Invert(Rewrite(%s)): %s", ent.Describe(), d)
	}
	if p, _ := rewritten.Get("Prev"); p.Key.Namespace != "new" {
		t.Errorf("Invert changed the rewritten record's fields in place: Prev is %s", p.Key)
	}

	o.Strategy = strategy(t, "uuid", rewrite.Params{"version": 5, "namespace": "6ba7b810-9dad-11d1-80b4-00c04fd430c8"})
	o.KeepOriginalKey = "OldKey"
	rk, err = New(o)
	if err != nil {
		t.Fatal(err)
	}
	r = ent
	r.Fields = append([]record.Field(nil), ent.Fields...)
	if err := rk.Rewrite(&r); err != nil {
		t.Fatal(err)
	}
	if err := rk.Invert(&r); !errors.Is(err, ErrNotInvertible) {
		t.Errorf("references under uuid: Invert = %v, want ErrNotInvertible", err)
	}
}

// TestInvertReferencesTo: a reference to a kind another run migrated
// (references_to, with that run's rewrite, kind rename and namespace
// move) comes back as it was: its key inverted with that run's strategy,
// its kind and namespace moved back; a key of another kind, or of the
// kind outside the namespace that run moved it to, is left. A strategy
// without an inverse is refused, naming the property.
func TestInvertReferencesTo(t *testing.T) {
	cust := dsKey("Customer", "c1")
	cust.Namespace = "crm"
	other := dsKey("Supplier", "s1")
	other.Namespace = "crm"
	k := dsKey("Invoice", 7)
	ent := record.Record{Table: "Invoice", Key: &k, Fields: []record.Field{
		{Name: "customer", Value: record.Key(cust)},
		{Name: "supplier", Value: record.Key(other)},
		{Name: "total", Value: record.Int(3)},
	}}
	spec := Spec{Strategy: rewrite.StepConfig{Strategy: "none"}, SourceStore: record.Datastore, TargetStore: record.Datastore, Kind: "Invoice",
		ReferencesTo: []ReferenceToSpec{
			{Property: "customer", Kind: "Customer", Strategy: rewrite.StepConfig{Strategy: "hashprefix"}, TargetKind: "CustomerV2", TargetNamespace: "crm2", SourceNamespace: "crm"},
			{Property: "supplier", Kind: "Customer", Strategy: rewrite.StepConfig{Strategy: "hashprefix"}, TargetNamespace: "crm2", SourceNamespace: "crm"},
		}}
	rk, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	r := ent
	r.Fields = append([]record.Field(nil), ent.Fields...)
	if err := rk.Rewrite(&r); err != nil {
		t.Fatal(err)
	}
	if c, _ := r.Get("customer"); c.Key.Namespace != "crm2" || c.Key.Leaf().Kind != "CustomerV2" || c.Key.Equal(cust) {
		t.Fatalf("the rewrite gave customer %s; want a rewritten key of CustomerV2 in crm2", c.Key)
	}
	if err := rk.Invert(&r); err != nil {
		t.Fatal(err)
	}
	if d := record.Diff(&r, &ent); d != "" {
		t.Errorf("Invert(Rewrite(%s)): %s", ent.Describe(), d)
	}
	// A key of the kind in another namespace than the one the run moved
	// it to was not rewritten by it: left.
	stray := dsKey("CustomerV2", "x")
	stray.Namespace = "elsewhere"
	s := record.Record{Table: "Invoice", Key: &k, Fields: []record.Field{{Name: "customer", Value: record.Key(stray)}}}
	if err := rk.InvertReferences(&s); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.Get("customer"); !c.Key.Equal(stray) {
		t.Errorf("customer %s outside crm2 became %s; want it left", stray, c.Key)
	}

	spec.ReferencesTo[0].Strategy = rewrite.StepConfig{Strategy: "uuid"}
	if rk, err = spec.Build(); err != nil {
		t.Fatal(err)
	}
	r = ent
	r.Fields = append([]record.Field(nil), ent.Fields...)
	if err := rk.Rewrite(&r); err != nil {
		t.Fatal(err)
	}
	if err := rk.Invert(&r); !errors.Is(err, ErrNotInvertible) || !strings.Contains(err.Error(), "customer") {
		t.Errorf("a reference rewritten to UUIDs: Invert = %v; want ErrNotInvertible naming customer", err)
	}
}
