package integration

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

const (
	d2dNamed = 400 // Customer1..Customer400
	d2dIDs   = 100 // Customer ids 1..100
)

// d2dCustomerKey is the key of customer i: i < d2dNamed are named
// Customer1.., the rest have ids 1...
func d2dCustomerKey(ns string, i int) rewrite.DatastoreKey {
	if i < d2dNamed {
		return rewrite.DatastoreKey{Namespace: ns, Path: []rewrite.PathElement{{Kind: "Customer", Name: fmt.Sprintf("Customer%d", i+1)}}}
	}
	return rewrite.DatastoreKey{Namespace: ns, Path: []rewrite.PathElement{{Kind: "Customer", ID: int64(i - d2dNamed + 1)}}}
}

// d2dEntities returns the source entities: customers with every kind of
// property value, a Referrer holding keys of other customers, and Order
// children (mostly ids, some names).
func d2dEntities(ns string) (customers, orders []record.Record) {
	n := d2dNamed + d2dIDs
	floats := []float64{1.5, math.Copysign(0, -1), math.NaN(), 1e300, -7}
	for i := range n {
		k := d2dCustomerKey(ns, i)
		fs := []record.Field{
			{Name: "Name", Value: record.String(fmt.Sprintf("Kunde %d – ü", i))},
			{Name: "Email", Value: record.String(fmt.Sprintf("c%d@example.com", i)), NoIndex: true},
			{Name: "Since", Value: record.Time(microTime(i))},
			{Name: "Score", Value: record.Float(floats[i%len(floats)])},
			{Name: "Visits", Value: record.Int(int64(i*i) - 1000)},
			{Name: "Active", Value: record.Bool(i%3 == 0)},
			{Name: "Avatar", Value: record.Bytes([]byte{0, byte(i), 0xff, '/'})},
			{Name: "Location", Value: geo(float64(i%180)-89.5, float64(i%360)-179.25)},
			{Name: "Address", Value: entity(
				record.Field{Name: "City", Value: record.String("Town " + fmt.Sprint(i%17))},
				record.Field{Name: "Geo", Value: geo(1.25, -2.5)},
				record.Field{Name: "Inner", Value: entity(record.Field{Name: "X", Value: record.Int(int64(i))})},
				record.Field{Name: "Zip", Value: record.Int(int64(10000 + i))},
			)},
			{Name: "Nothing", Value: record.Value{}},
		}
		switch i % 4 {
		case 0:
			fs = append(fs, record.Field{Name: "Tags", Value: arr(record.String("a"), record.String(fmt.Sprint(i)), record.String("a"))})
		case 1:
			fs = append(fs, record.Field{Name: "Tags", Value: arr()})
		case 2:
			fs = append(fs, record.Field{Name: "Tags", Value: arr(record.Int(1), record.String("two"), record.Value{}, record.Time(microTime(i)), geo(3, 4))})
		}
		if i%10 == 0 {
			fs = append(fs, record.Field{Name: "Bio", Value: record.String(strings.Repeat("long text ", 200) + fmt.Sprint(i)), NoIndex: true})
			fs = append(fs, record.Field{Name: "Blob", Value: record.Bytes([]byte(strings.Repeat("\x00\x01", 1000))), NoIndex: true})
		}
		if i%7 == 0 {
			fs = append(fs, record.Field{Name: "Private", Value: entity(record.Field{Name: "Note", Value: record.String("secret"), NoIndex: true}), NoIndex: true})
		}
		// Referrer: a key of another customer (named or id), an array of
		// two, or NULL.
		switch i % 5 {
		case 0, 1, 2:
			fs = append(fs, record.Field{Name: "Referrer", Value: record.Key(d2dCustomerKey(ns, (i*37+11)%n))})
		case 3:
			fs = append(fs, record.Field{Name: "Referrer", Value: arr(record.Key(d2dCustomerKey(ns, (i+1)%n)), record.Key(d2dCustomerKey(ns, (i+n-1)%n)))})
		case 4:
			fs = append(fs, record.Field{Name: "Referrer", Value: record.Value{}})
		}
		customers = append(customers, record.Record{Table: "Customer", Key: &k, Fields: fs})
		for j := range i % 4 {
			ok := k.Clone()
			e := rewrite.PathElement{Kind: "Order", ID: int64(j + 1)}
			if j == 2 {
				e = rewrite.PathElement{Kind: "Order", Name: fmt.Sprintf("order-%d", i)}
			}
			ok.Path = append(ok.Path, e)
			orders = append(orders, record.Record{Table: "Order", Key: &ok, Fields: []record.Field{
				{Name: "Total", Value: record.Float(float64(i) + float64(j)/4)},
				{Name: "Items", Value: record.Int(int64(j + 1))},
				{Name: "PlacedAt", Value: record.Time(microTime(i * j))},
				{Name: "Lines", Value: arr(
					entity(record.Field{Name: "Qty", Value: record.Int(2)}, record.Field{Name: "Sku", Value: record.String("sku-" + fmt.Sprint(j))}),
					entity(record.Field{Name: "Qty", Value: record.Int(1)}, record.Field{Name: "Sku", Value: record.String("gift")}),
				)},
				// A key of another kind, not listed in references: unchanged.
				{Name: "Shop", Value: record.Key(rewrite.DatastoreKey{Namespace: ns, Path: []rewrite.PathElement{{Kind: "Shop", ID: int64(j + 1)}}})},
			}})
		}
	}
	return customers, orders
}

// TestMigrateDatastoreToDatastore migrates Customer entities (named
// Customer1.. and with integer ids) with their Order children
// (descendants: [Order]) into another namespace with hashprefix on the
// root element (ancestors: root), rewriting the Referrer property
// (references: [Referrer]), on every local runner. Every entity arrives
// exactly once under its independently computed key, children under their
// rewritten parents, every Referrer points at the rewritten customer that
// exists in the target, all other properties are equal to the source's as
// stored (NoIndex included); a re-run converges.
func TestMigrateDatastoreToDatastore(t *testing.T) {
	c := emulator.TestDatastore(t)
	srcNS := emulator.UniqueNamespace("d2d-src")
	customers, orders := d2dEntities(srcNS)
	putEntities(t, c, append(append([]record.Record(nil), customers...), orders...))
	srcCustomers := readEntities(t, c, srcNS, "Customer")
	srcOrders := readEntities(t, c, srcNS, "Order")
	if len(srcCustomers) != len(customers) || len(srcOrders) != len(orders) {
		t.Fatalf("source holds %d customers and %d orders, wrote %d and %d", len(srcCustomers), len(srcOrders), len(customers), len(orders))
	}
	// The source stores what was written (NaN as Datastore's NaN).
	for _, w := range customers[:20] {
		g := srcCustomers[w.Key.String()]
		want := append([]record.Field(nil), w.Fields...)
		for i := range want {
			if want[i].Value.Kind == record.KindFloat && math.IsNaN(want[i].Value.Float) {
				want[i].Value = record.Float(canonNaN)
			}
		}
		if d := record.FieldsDiff(g.Fields, want); d != "" {
			t.Fatalf("source entity %s reads back different: %s", w.Key, d)
		}
	}
	total := int64(len(customers) + len(orders))
	t.Logf("source namespace %s: %d Customer, %d Order entities", srcNS, len(customers), len(orders))

	rw := datastoreRewriter(t, rewrite.StepConfig{Strategy: "hashprefix", Params: rewrite.Params{"elements": "root"}})

	for _, runner := range runners {
		t.Run(runner, func(t *testing.T) {
			dstNS := emulator.UniqueNamespace("d2d-" + runner)
			newKey := func(k rewrite.DatastoreKey) rewrite.DatastoreKey {
				t.Helper()
				nk, err := rw.Rewrite(k)
				if err != nil {
					t.Fatalf("rewrite %s: %v", k, err)
				}
				nk.Namespace = dstNS
				return nk
			}
			// The expected target entities by key.
			want := map[string]record.Record{}
			for _, src := range []map[string]record.Record{srcCustomers, srcOrders} {
				for _, r := range src {
					nk := newKey(*r.Key)
					w := record.Record{Table: r.Table, Key: &nk, Fields: append([]record.Field(nil), r.Fields...)}
					for i, f := range w.Fields {
						if f.Name != "Referrer" {
							continue
						}
						switch f.Value.Kind {
						case record.KindKey:
							w.Fields[i].Value = record.Key(newKey(*f.Value.Key))
						case record.KindArray:
							var a []record.Value
							for _, e := range f.Value.Array {
								a = append(a, record.Key(newKey(*e.Key)))
							}
							w.Fields[i].Value = arr(a...)
						}
					}
					want[nk.String()] = w
				}
			}
			if int64(len(want)) != total {
				t.Fatalf("new keys collide: %d for %d entities", len(want), total)
			}
			dir := t.TempDir()
			yaml := func(dead string) string {
				return fmt.Sprintf(`
source: {type: datastore, project: %s, namespace: %s, kind: Customer}
target: {type: datastore, project: %s, namespace: %s, kind: Customer}
rewrite: {strategy: hashprefix}
ancestors: root
descendants: [Order]
references: [Referrer]
dead_letter: %q
`, emulator.DatastoreProject(), srcNS, emulator.DatastoreProject(), dstNS, dead)
			}
			check := func(run string) {
				t.Helper()
				got := readEntities(t, c, dstNS, "Customer")
				gotOrders := readEntities(t, c, dstNS, "Order")
				if len(got) != len(srcCustomers) || len(gotOrders) != len(srcOrders) {
					t.Errorf("%s: target holds %d customers and %d orders, want %d and %d", run, len(got), len(gotOrders), len(srcCustomers), len(srcOrders))
				}
				// Every Referrer and every parent points at a migrated customer.
				for _, k := range sortedKeys(got) {
					r := got[k]
					ref, _ := r.Get("Referrer")
					refs := []record.Value{ref}
					if ref.Kind == record.KindArray {
						refs = ref.Array
					}
					for _, v := range refs {
						if v.Kind == record.KindKey {
							if _, ok := got[v.Key.String()]; !ok {
								t.Errorf("%s: %s: Referrer %s is not a migrated customer", run, k, v.Key)
							}
						}
					}
				}
				for k, r := range gotOrders {
					parent := rewrite.DatastoreKey{Namespace: r.Key.Namespace, Path: r.Key.Path[:1]}
					if _, ok := got[parent.String()]; !ok {
						t.Errorf("%s: order %s has no parent in the target", run, k)
					}
				}
				for k, r := range gotOrders {
					got[k] = r
				}
				checkEntities(t, run, got, want)
			}
			for run := 1; run <= 2; run++ {
				cfg := loadYAML(t, yaml(filepath.Join(dir, fmt.Sprintf("dead%d.jsonl", run))))
				start := time.Now()
				res := migrate(t, cfg, runner)
				t.Logf("run %d: %s in %s", run, res.Counters.String(), time.Since(start).Round(time.Millisecond))
				wantCounters(t, res, total, total, total, 0)
				if dead := readDeadLetters(t, cfg.DeadLetter); len(dead) != 0 {
					t.Errorf("run %d: %d dead letters, the first: %+v", run, len(dead), dead[0])
				}
				check(fmt.Sprintf("run %d", run))
			}
		})
	}
}

// TestMigrateDatastoreReferencesToDescendants checks that a property
// listed in references that holds keys of a migrated descendant kind
// (interleaved: [Order], the older name of descendants) is rewritten like the entities it points at: the
// config documents references as "properties holding keys of migrated
// kinds", and Order is migrated under new keys, so a LastOrder key left
// as it was points at nothing in the target.
func TestMigrateDatastoreReferencesToDescendants(t *testing.T) {
	c := emulator.TestDatastore(t)
	srcNS := emulator.UniqueNamespace("d2d-refs")
	const n = 50
	var recs []record.Record
	for i := range n {
		ck := rewrite.DatastoreKey{Namespace: srcNS, Path: []rewrite.PathElement{{Kind: "Customer", Name: fmt.Sprintf("Customer%d", i+1)}}}
		ok := ck.Clone()
		ok.Path = append(ok.Path, rewrite.PathElement{Kind: "Order", ID: int64(i + 1)})
		recs = append(recs,
			record.Record{Table: "Customer", Key: &ck, Fields: []record.Field{{Name: "LastOrder", Value: record.Key(ok)}}},
			record.Record{Table: "Order", Key: &ok, Fields: []record.Field{{Name: "Total", Value: record.Float(float64(i))}}})
	}
	putEntities(t, c, recs)
	st, _ := rewrite.New(rewrite.StepConfig{Strategy: "hashprefix", Params: rewrite.Params{"elements": "root"}})
	rw, err := st.Datastore()
	if err != nil {
		t.Fatal(err)
	}
	for _, runner := range runners {
		t.Run(runner, func(t *testing.T) {
			dstNS := emulator.UniqueNamespace("d2d-refs-" + runner)
			cfg := loadYAML(t, fmt.Sprintf(`
source: {type: datastore, project: %s, namespace: %s, kind: Customer}
target: {type: datastore, project: %s, namespace: %s, kind: Customer}
rewrite: {strategy: hashprefix}
ancestors: root
interleaved: [Order]
references: [LastOrder]
dead_letter: %q
`, emulator.DatastoreProject(), srcNS, emulator.DatastoreProject(), dstNS, filepath.Join(t.TempDir(), "dead.jsonl")))
			res := migrate(t, cfg, runner)
			wantCounters(t, res, 2*n, 2*n, 2*n, 0)
			got := readEntities(t, c, dstNS, "Customer")
			gotOrders := readEntities(t, c, dstNS, "Order")
			if len(got) != n || len(gotOrders) != n {
				t.Fatalf("target holds %d customers and %d orders, want %d each", len(got), len(gotOrders), n)
			}
			wrong := 0
			for _, k := range sortedKeys(got) {
				r := got[k]
				v, _ := r.Get("LastOrder")
				if v.Kind != record.KindKey {
					t.Fatalf("%s: LastOrder is %v", k, v)
				}
				if _, ok := gotOrders[v.Key.String()]; !ok {
					if wrong++; wrong <= 3 {
						src := *v.Key
						want, _ := rw.Rewrite(src)
						want.Namespace = dstNS
						t.Errorf("%s: LastOrder = %s points at no migrated Order; want %s", k, v.Key, want)
					}
				}
			}
			if wrong > 0 {
				t.Errorf("%d of %d LastOrder references point at no migrated entity", wrong, n)
			}
		})
	}
}
