package source_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
	"github.com/rekeyio/rekey/transforms"
	"github.com/rekeyio/rekey/transforms/source"
)

// dsKinds returns the keys of four kinds whose split reads must each
// return every entity once:
//
//   - IntK: integer ids 1..2000 and 150 large ids (2^32.., 2^53..,
//     near MaxInt64): a name-only or string comparator orders them wrongly;
//   - NameK: 500 names, some of them digits;
//   - MixK: ids 1..300 and the names "1".."300" in one kind;
//   - TreeK: roots, children of 20 P parents (ids repeating across
//     parents), grandchildren under those children, children of named A
//     parents, and grandchildren under a Q of another kind; P, Q and A
//     entities exist too and must not be read.
func dsKinds(ns string) map[string][]*datastore.Key {
	k := func(kind string, id int64, name string, parent *datastore.Key) *datastore.Key {
		return &datastore.Key{Kind: kind, ID: id, Name: name, Parent: parent, Namespace: ns}
	}
	kinds := map[string][]*datastore.Key{}
	for i := int64(1); i <= 2000; i++ {
		kinds["IntK"] = append(kinds["IntK"], k("IntK", i, "", nil))
	}
	for i := int64(0); i < 50; i++ {
		kinds["IntK"] = append(kinds["IntK"],
			k("IntK", 1<<32+i*7919, "", nil), k("IntK", 1<<53+i, "", nil), k("IntK", math.MaxInt64-i, "", nil))
	}
	for i := 0; i < 450; i++ {
		kinds["NameK"] = append(kinds["NameK"], k("NameK", 0, fmt.Sprintf("n%04d", i*7%1000), nil))
	}
	for i := 0; i < 50; i++ {
		kinds["NameK"] = append(kinds["NameK"], k("NameK", 0, fmt.Sprint(i*13), nil))
	}
	for i := int64(1); i <= 300; i++ {
		kinds["MixK"] = append(kinds["MixK"], k("MixK", i, "", nil), k("MixK", 0, fmt.Sprint(i), nil))
	}
	for i := int64(1); i <= 50; i++ {
		kinds["TreeK"] = append(kinds["TreeK"], k("TreeK", i*1000, "", nil))
	}
	for p := int64(1); p <= 20; p++ {
		parent := k("P", p, "", nil)
		named := k("A", 0, fmt.Sprint("a", p), nil)
		kinds["other"] = append(kinds["other"], parent, named, k("Q", 1, "", parent))
		for c := int64(1); c <= 10; c++ {
			child := k("TreeK", c, "", parent)
			kinds["TreeK"] = append(kinds["TreeK"], child, k("TreeK", 0, fmt.Sprint("c", c), named))
			for g := int64(1); g <= 3; g++ {
				kinds["TreeK"] = append(kinds["TreeK"], k("TreeK", g, "", child))
			}
		}
		kinds["TreeK"] = append(kinds["TreeK"], k("TreeK", 1, "", k("Q", 1, "", parent)))
	}
	return kinds
}

// dsPut writes each key with a property v holding the key's rendering.
func dsPut(t *testing.T, c *datastore.Client, keys []*datastore.Key) {
	t.Helper()
	ctx := context.Background()
	for len(keys) > 0 {
		n := min(len(keys), 500)
		pls := make([]datastore.PropertyList, n)
		for i := range pls {
			pls[i] = datastore.PropertyList{{Name: "v", Value: keys[i].String()}}
		}
		if _, err := c.PutMulti(ctx, keys[:n], pls); err != nil {
			t.Fatal(err)
		}
		keys = keys[n:]
	}
}

// dsReadCheck decodes collected batches and compares the keys read with
// want: every key exactly once, each with its own v property.
func dsReadCheck(t *testing.T, what string, elems []any, want []*datastore.Key) {
	t.Helper()
	wantSet := map[string]bool{}
	for _, k := range want {
		wantSet[datastoredb.KeyFromDatastore(k).String()] = true
	}
	seen := map[string]int{}
	for _, e := range elems {
		recs := e.(record.Batch).Recs
		if len(recs) > transforms.BatchSize {
			t.Errorf("%s: a batch of %d records, more than %d", what, len(recs), transforms.BatchSize)
		}
		for _, r := range recs {
			ks := r.Key.String()
			seen[ks]++
			v, ok := r.Get("v")
			if wk := datastoredb.KeyToDatastore(*r.Key); !ok || v.Str != wk.String() {
				t.Errorf("%s: %s has v=%v, want %q", what, ks, v, wk.String())
			}
			if r.Table != r.Key.Leaf().Kind {
				t.Errorf("%s: %s has table %q", what, ks, r.Table)
			}
		}
	}
	dups, missing, extra := 0, 0, 0
	for k, n := range seen {
		if n > 1 {
			dups += n - 1
		}
		if !wantSet[k] {
			extra++
		}
	}
	for k := range wantSet {
		if seen[k] == 0 {
			missing++
		}
	}
	if dups+missing+extra > 0 {
		t.Errorf("%s: read %d distinct of %d: %d duplicates, %d missing, %d not of the kind", what, len(seen), len(wantSet), dups, missing, extra)
	}
}

// TestDatastoreSplitReadsEachEntityOnce reads four kinds with 1, 4 and 16
// splits (and the default) on both runners and compares the keys read
// with the keys written.
func TestDatastoreSplitReadsEachEntityOnce(t *testing.T) {
	c := emulator.TestDatastore(t)
	ns := emulator.UniqueNamespace(t.Name())
	kinds := dsKinds(ns)
	for _, keys := range kinds {
		dsPut(t, c, keys)
	}
	names := []string{"IntK", "NameK", "MixK", "TreeK"}
	// One kind a pipeline: the direct runner keys metrics by DoFn name, so
	// two sources in one pipeline would share (and lose) their counters.
	for _, runner := range dsRunners {
		for _, splits := range []int{1, 4, 16, 0} {
			for _, kind := range names {
				t.Run(fmt.Sprintf("%s/splits=%d/%s", runner, splits, kind), func(t *testing.T) {
					out, dead := newDSCollector(t), newDSCollector(t)
					m := dsRun(t, runner, func(s beam.Scope) {
						b, d := source.Datastore(s, source.DatastoreConfig{Project: emulator.DatastoreProject(), Namespace: ns, Kind: kind, Splits: splits})
						out.bytes(s, b)
						dead.strings(s, d)
					})
					dsReadCheck(t, kind, out.elements(), kinds[kind])
					if d := dead.elements(); len(d) > 0 {
						t.Errorf("dead letters: %v", d)
					}
					wantRanges := int64(max(splits, 1))
					if splits == 0 {
						wantRanges = 12 // no statistics on the emulator
					}
					if got := m["rekey/datastore_read_ranges"]; got != wantRanges {
						t.Errorf("read %d ranges, want %d", got, wantRanges)
					}
					if got := m["rekey/read"]; got != int64(len(kinds[kind])) {
						t.Errorf("rekey/read = %d, want %d", got, len(kinds[kind]))
					}
					if splits != 1 && m["rekey/datastore_split_scan_fallback"] != 1 {
						t.Errorf("scan fallbacks = %d, want 1 (the emulator has no __scatter__)", m["rekey/datastore_split_scan_fallback"])
					}
					t.Logf("%d entities, %d ranges, %d queries", len(kinds[kind]), m["rekey/datastore_read_ranges"], m["rekey/datastore_read_queries"])
				})
			}
		}
	}
}

// TestDatastoreNameOnlyOrderBreaksRanges shows why the source sorts split
// points with rewrite.CompareDatastore: the same sample ordered by key
// name only (as Beam Go's datastoreio does) cuts ranges that, queried on
// the emulator, return some integer-id entities twice and others never.
func TestDatastoreNameOnlyOrderBreaksRanges(t *testing.T) {
	c := emulator.TestDatastore(t)
	ctx := context.Background()
	ns := emulator.UniqueNamespace(t.Name())
	keys := dsKinds(ns)["IntK"]
	dsPut(t, c, keys)
	var sample []rewrite.DatastoreKey
	for i := 0; i < len(keys); i += 37 {
		sample = append(sample, datastoredb.KeyFromDatastore(keys[(i*7919)%len(keys)]))
	}
	count := func(points []rewrite.DatastoreKey) (dups, missing int) {
		seen := map[int64]int{}
		for _, r := range datastoredb.Ranges(points) {
			q := datastore.NewQuery("IntK").Namespace(ns).KeysOnly()
			if r.Start != nil {
				q = q.FilterField("__key__", ">=", datastoredb.KeyToDatastore(*r.Start))
			}
			if r.End != nil {
				q = q.FilterField("__key__", "<", datastoredb.KeyToDatastore(*r.End))
			}
			got, err := c.GetAll(ctx, q, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range got {
				seen[k.ID]++
			}
		}
		for _, k := range keys {
			switch n := seen[k.ID]; {
			case n == 0:
				missing++
			case n > 1:
				dups += n - 1
			}
		}
		return dups, missing
	}
	if d, m := count(datastoredb.SplitPoints(sample, 16)); d+m != 0 {
		t.Errorf("Datastore order: %d duplicates, %d missing; want none", d, m)
	}
	// Name-only order: every id has the empty name, so the sample stays in
	// whatever order it came (a stable sort), like Beam Go's comparator.
	byName := slices.Clone(sample)
	slices.SortStableFunc(byName, func(a, b rewrite.DatastoreKey) int { return strings.Compare(a.Leaf().Name, b.Leaf().Name) })
	var points []rewrite.DatastoreKey
	for i := 1; i < 16; i++ {
		points = append(points, byName[i*len(byName)/16])
	}
	d, m := count(points)
	if d+m == 0 {
		t.Errorf("name-only order read every entity once; the test no longer shows the fault")
	}
	t.Logf("name-only order: %d entities, %d read twice or more, %d never read", len(keys), d, m)
}

// TestDatastoreSourceDeadLetters: entities rekey cannot carry (a dotted
// property name, a "/" in a key name: the emulator stores both) become
// read dead letters; the rest are read. read counts every entity taken
// from the store, the dead-lettered ones too.
func TestDatastoreSourceDeadLetters(t *testing.T) {
	c := emulator.TestDatastore(t)
	ctx := context.Background()
	ns := emulator.UniqueNamespace(t.Name())
	var good []*datastore.Key
	for i := int64(1); i <= 30; i++ {
		good = append(good, &datastore.Key{Kind: "K", ID: i, Namespace: ns})
	}
	dsPut(t, c, good)
	if _, err := c.Put(ctx, &datastore.Key{Kind: "K", ID: 100, Namespace: ns}, &datastore.PropertyList{{Name: "a.b", Value: int64(1)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, &datastore.Key{Kind: "K", Name: "x/y", Namespace: ns}, &datastore.PropertyList{}); err != nil {
		t.Fatal(err)
	}
	for _, runner := range dsRunners {
		t.Run(runner, func(t *testing.T) {
			out, dead := newDSCollector(t), newDSCollector(t)
			m := dsRun(t, runner, func(s beam.Scope) {
				b, d := source.Datastore(s, source.DatastoreConfig{Namespace: ns, Kind: "K", Splits: 3})
				out.bytes(s, b)
				dead.strings(s, d)
			})
			dsReadCheck(t, "K", out.elements(), good)
			var reasons []string
			for _, e := range dead.elements() {
				d, _, err := record.ParseDeadLetter([]byte(e.(string)))
				if err != nil {
					t.Fatal(err)
				}
				if d.Stage != record.StageRead || d.Source != "datastore:"+ns+"/K" || d.Raw == "" {
					t.Errorf("dead letter %+v: want stage read, the source and the key", d)
				}
				reasons = append(reasons, d.Reason)
			}
			all := strings.Join(reasons, "\n")
			if len(reasons) != 2 || !strings.Contains(all, `K:"x/y": path element 1 (K:"x/y"): name contains "/"`) || !strings.Contains(all, `property "a.b": name contains "."`) {
				t.Errorf("dead-letter reasons = %q, want a / in a key name and a . in a property name", reasons)
			}
			if m["rekey/dead_lettered"] != 2 || m["rekey/read"] != 32 {
				t.Errorf("metrics %v: want 2 dead-lettered, 32 read", m)
			}
		})
	}
}

// TestDatastoreSourceEmptyKindAndBadConfig: an empty kind reads nothing
// in one range; a config without a kind fails the pipeline clearly.
func TestDatastoreSourceEmptyKindAndBadConfig(t *testing.T) {
	emulator.RequireDatastore(t)
	ns := emulator.UniqueNamespace(t.Name())
	out := newDSCollector(t)
	m := dsRun(t, "direct", func(s beam.Scope) {
		b, _ := source.Datastore(s, source.DatastoreConfig{Namespace: ns, Kind: "Nothing", Splits: 8})
		out.bytes(s, b)
	})
	if len(out.elements()) != 0 || m["rekey/datastore_read_ranges"] != 1 {
		t.Errorf("empty kind: %d batches, %d ranges; want 0 and 1", len(out.elements()), m["rekey/datastore_read_ranges"])
	}
	p, s := beam.NewPipelineWithRoot()
	source.Datastore(s, source.DatastoreConfig{Namespace: ns})
	_, err := beam.Run(context.Background(), "direct", p)
	if err == nil || !strings.Contains(err.Error(), "kind is empty") {
		t.Errorf("no kind: err = %v, want one saying the kind is empty", err)
	}
}
