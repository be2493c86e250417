package sink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/beamtest"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
	"github.com/rekeyio/rekey/transforms/sink"
	"github.com/rekeyio/rekey/transforms/source"
)

func dsKey(ns string, path ...rewrite.PathElement) *rewrite.DatastoreKey {
	return &rewrite.DatastoreKey{Namespace: ns, Path: path}
}

// dsBatches packs records into batches of size.
func dsBatches(recs []record.Record, size int) []record.Batch {
	var out []record.Batch
	for len(recs) > 0 {
		n := min(size, len(recs))
		out = append(out, record.Batch{Recs: recs[:n]})
		recs = recs[n:]
	}
	return out
}

// dsWrite runs a pipeline writing batches with cfg and returns its dead
// letters and metrics.
func dsWrite(t *testing.T, runner string, cfg sink.DatastoreSinkConfig, batches []record.Batch) ([]record.DeadLetter, map[string]int64) {
	t.Helper()
	dead := newDSCollector(t)
	m := dsRun(t, runner, func(s beam.Scope) {
		dead.strings(s, sink.Datastore(s, cfg, beam.CreateList(s, batches)))
	})
	var out []record.DeadLetter
	for _, e := range dead.elements() {
		var d record.DeadLetter
		if err := json.Unmarshal([]byte(e.(string)), &d); err != nil {
			t.Fatalf("dead letter %q: %v", e, err)
		}
		out = append(out, d)
	}
	return out, m
}

// dsReadBack reads a kind with the Datastore source, by key.
func dsReadBack(t *testing.T, runner string, cfg source.DatastoreConfig) map[string]record.Record {
	t.Helper()
	out, dead := newDSCollector(t), newDSCollector(t)
	dsRun(t, runner, func(s beam.Scope) {
		b, d := source.Datastore(s, cfg)
		out.bytes(s, b)
		dead.strings(s, d)
	})
	if d := dead.elements(); len(d) > 0 {
		t.Errorf("read dead letters: %v", d)
	}
	got := map[string]record.Record{}
	for _, e := range out.elements() {
		recs := e.(record.Batch).Recs
		for _, r := range recs {
			if _, dup := got[r.Key.String()]; dup {
				t.Errorf("%s read twice", r.Key)
			}
			got[r.Key.String()] = r
		}
	}
	return got
}

func dsCount(t *testing.T, c *datastore.Client, ns, kind string) int {
	t.Helper()
	n, err := c.Count(context.Background(), datastore.NewQuery(kind).Namespace(ns).KeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// dsEveryType returns entity i with a property of every Datastore type,
// in the normal form a read returns (fields sorted by name, times in
// microseconds, the canonical NaN, NoIndex where the store forces it).
// Even entities have an ancestor.
func dsEveryType(ns string, i int) record.Record {
	id := int64(i)
	key := dsKey(ns, rewrite.PathElement{Kind: "Every", ID: id * 1_000_003})
	if i%2 == 0 {
		key = dsKey(ns, rewrite.PathElement{Kind: "Parent", Name: fmt.Sprint("p", i)}, rewrite.PathElement{Kind: "Every", ID: id})
	}
	ref := record.Key(*dsKey("elsewhere", rewrite.PathElement{Kind: "Org", Name: "acme"}, rewrite.PathElement{Kind: "User", ID: id}))
	floats := []float64{1.5, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.Float64frombits(0x7ff8000000000000), math.MaxFloat64, math.SmallestNonzeroFloat64}
	ts := time.Date(1970+i, time.Month(1+i%12), 1+i%28, i%24, i%60, i%60, (i*123457%1000000)*1000, time.UTC)
	return record.Record{
		Table: "Every",
		Key:   key,
		Fields: []record.Field{
			{Name: "arr", Value: record.Value{Kind: record.KindArray, Array: []record.Value{
				record.Int(id), record.String(fmt.Sprint("e", i)), {}, ref, record.Bool(i%2 == 0), record.Time(ts),
				{Kind: record.KindGeoPoint, Lat: 1, Lng: -2}, record.Bytes([]byte{byte(i), 0}), record.Float(0.25),
				{Kind: record.KindEntity, Entity: []record.Field{{Name: "x", Value: record.Int(id)}}},
			}}},
			{Name: "blob", Value: record.Bytes([]byte{0, 1, 0xff, byte(i)})},
			{Name: "bool", Value: record.Bool(i%3 == 0)},
			{Name: "emb", Value: record.Value{Kind: record.KindEntity, Entity: []record.Field{
				{Name: "__key__", Value: record.Key(*dsKey(ns, rewrite.PathElement{Kind: "Inner", Name: fmt.Sprint("in", i)}))},
				{Name: "deeper", Value: record.Value{Kind: record.KindEntity, Entity: []record.Field{
					{Name: "list", Value: record.Value{Kind: record.KindArray, Array: []record.Value{record.Int(1), record.Int(2)}}},
				}}},
				{Name: "n", Value: record.Int(-id)},
				{Name: "quiet", Value: record.String("q"), NoIndex: true},
			}}},
			{Name: "emptyArr", Value: record.Value{Kind: record.KindArray, Array: []record.Value{}}},
			{Name: "float", Value: record.Float(floats[i%len(floats)])},
			{Name: "geo", Value: record.Value{Kind: record.KindGeoPoint, Lat: -90 + float64(i), Lng: 180 - float64(i)*0.5}},
			{Name: "int", Value: record.Int(-id * 1_000_000_000_007)},
			{Name: "long", Value: record.String(strings.Repeat(fmt.Sprint(i%10), 1501)), NoIndex: true},
			{Name: "maxInt", Value: record.Int(math.MaxInt64 - id)},
			{Name: "noIndexArr", NoIndex: true, Value: record.Value{Kind: record.KindArray, Array: []record.Value{record.String("a"), record.String("b")}}},
			{Name: "noIndexInt", Value: record.Int(id), NoIndex: true},
			{Name: "null", Value: record.Value{}},
			{Name: "ref", Value: ref},
			{Name: "str", Value: record.String(fmt.Sprintf("héllo %d, 世界 \x00 end", i))},
			{Name: "time", Value: record.Time(ts)},
		},
	}
}

// TestDatastoreSinkRoundTripsEveryType writes entities holding every
// property type through the sink and reads them back through the source:
// each record must come back byte-equal in the batch encoding.
func TestDatastoreSinkRoundTripsEveryType(t *testing.T) {
	emulator.RequireDatastore(t)
	for _, runner := range dsRunners {
		t.Run(runner, func(t *testing.T) {
			ns := emulator.UniqueNamespace(t.Name())
			var recs []record.Record
			for i := 1; i <= 40; i++ {
				r := dsEveryType(ns, i)
				// Precondition: the fixture is in the normal form.
				k, p, err := datastoredb.ToEntity(&r)
				if err != nil {
					t.Fatal(err)
				}
				if n, err := datastoredb.FromEntity(k, p); err != nil || !n.Equal(&r) {
					t.Fatalf("fixture %d is not in normal form (%v)", i, err)
				}
				recs = append(recs, r)
			}
			dead, m := dsWrite(t, runner, sink.DatastoreSinkConfig{Project: emulator.DatastoreProject()}, dsBatches(recs, 7))
			if len(dead) > 0 || m["rekey/written"] != 40 {
				t.Fatalf("written %d, dead letters %v; want 40 and none", m["rekey/written"], dead)
			}
			got := dsReadBack(t, runner, source.DatastoreConfig{Project: emulator.DatastoreProject(), Namespace: ns, Kind: "Every", Splits: 4})
			if len(got) != len(recs) {
				t.Errorf("read back %d entities, want %d", len(got), len(recs))
			}
			for i := range recs {
				want := &recs[i]
				g, ok := got[want.Key.String()]
				if !ok {
					t.Errorf("%s not read back", want.Key)
					continue
				}
				if a, b := record.AppendRecord(nil, &g), record.AppendRecord(nil, want); string(a) != string(b) {
					t.Errorf("%s differs after the round trip:\n got %s\nwant %s", want.Key, record.AppendJSON(nil, &g, true), record.AppendJSON(nil, want, true))
				}
			}
		})
	}
}

// TestDatastoreSinkSpannerKinds: DATE, NUMERIC and JSON have no Datastore
// type and are written as strings.
func TestDatastoreSinkSpannerKinds(t *testing.T) {
	c := emulator.TestDatastore(t)
	ns := emulator.UniqueNamespace(t.Name())
	rec := record.Record{Table: "Row", Key: dsKey(ns, rewrite.PathElement{Kind: "Row", Name: "r1"}), Fields: []record.Field{
		{Name: "d", Value: record.Value{Kind: record.KindDate, Int: 19753}},
		{Name: "j", Value: record.Value{Kind: record.KindJSON, Str: `{"a": [1, 2.5]}`}},
		{Name: "n", Value: record.Value{Kind: record.KindNumeric, Str: "-12345678901234567890.123456789"}},
	}}
	dead, _ := dsWrite(t, "direct", sink.DatastoreSinkConfig{}, dsBatches([]record.Record{rec}, 1))
	if len(dead) > 0 {
		t.Fatalf("dead letters %v", dead)
	}
	var pl datastore.PropertyList
	if err := c.Get(context.Background(), datastoredb.KeyToDatastore(*rec.Key), &pl); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"d": "2024-01-31", "j": `{"a": [1, 2.5]}`, "n": "-12345678901234567890.123456789"}
	for _, p := range pl {
		if p.Value != want[p.Name] {
			t.Errorf("%s = %#v, want %#v", p.Name, p.Value, want[p.Name])
		}
	}
}

func dsNumbered(ns string, from, to int, version string) []record.Record {
	var recs []record.Record
	for i := from; i <= to; i++ {
		recs = append(recs, record.Record{Table: "N", Key: dsKey(ns, rewrite.PathElement{Kind: "N", ID: int64(i)}), Fields: []record.Field{
			{Name: "i", Value: record.Int(int64(i))},
			{Name: "version", Value: record.String(version)},
		}})
	}
	return recs
}

// TestDatastoreSinkCommitsAndConverges writes 3,000 entities and a batch
// holding one key twice: commits carry at most 500 entities, the repeated
// key lands once with its last version, and writing everything again
// leaves the same 3,001 entities.
func TestDatastoreSinkCommitsAndConverges(t *testing.T) {
	c := emulator.TestDatastore(t)
	for _, runner := range dsRunners {
		t.Run(runner, func(t *testing.T) {
			ns := emulator.UniqueNamespace(t.Name())
			recs := dsNumbered(ns, 1, 3000, "v1")
			batches := dsBatches(recs, 500)
			twice := append(dsNumbered(ns, 3001, 3001, "old"), dsNumbered(ns, 3001, 3001, "new")...)
			batches = append(batches, dsBatches(twice, 2)...)
			cfg := sink.DatastoreSinkConfig{Project: emulator.DatastoreProject()}
			for run := 1; run <= 2; run++ {
				dead, m := dsWrite(t, runner, cfg, batches)
				if len(dead) > 0 {
					t.Fatalf("run %d: dead letters %v", run, dead)
				}
				commits, maxPer := m["rekey/datastore_commits"], m["rekey/datastore_commit_entities.max"]
				t.Logf("run %d: %d written in %d commits, at most %d entities a commit", run, m["rekey/written"], commits, maxPer)
				if maxPer > 500 || maxPer == 0 {
					t.Errorf("run %d: largest commit has %d entities, want 1..500", run, maxPer)
				}
				// 3,000 need 6 commits; the repeated key needs 2 more.
				if commits < 8 {
					t.Errorf("run %d: %d commits, want at least 8", run, commits)
				}
				if m["rekey/written"] != 3002 || m["rekey/datastore_commit_entities.sum"] != 3002 {
					t.Errorf("run %d: written %d (commit sum %d), want 3002: 3,000 and both versions of the repeated key", run, m["rekey/written"], m["rekey/datastore_commit_entities.sum"])
				}
				if n := dsCount(t, c, ns, "N"); n != 3001 {
					t.Errorf("run %d: %d entities stored, want 3001", run, n)
				}
				var pl datastore.PropertyList
				if err := c.Get(context.Background(), &datastore.Key{Kind: "N", ID: 3001, Namespace: ns}, &pl); err != nil {
					t.Fatal(err)
				}
				for _, p := range pl {
					if p.Name == "version" && p.Value != "new" {
						t.Errorf("run %d: the repeated key holds version %v, want the last one, new", run, p.Value)
					}
				}
			}
		})
	}
}

// TestDatastoreSinkMaxEntities: a smaller commit cap is kept.
func TestDatastoreSinkMaxEntities(t *testing.T) {
	c := emulator.TestDatastore(t)
	ns := emulator.UniqueNamespace(t.Name())
	dead, m := dsWrite(t, "prism", sink.DatastoreSinkConfig{MaxEntities: 100}, dsBatches(dsNumbered(ns, 1, 1000, "v"), 250))
	if len(dead) > 0 {
		t.Fatal(dead)
	}
	if m["rekey/datastore_commit_entities.max"] > 100 || m["rekey/datastore_commits"] < 10 {
		t.Errorf("%d commits of at most %d entities, want at least 10 of at most 100", m["rekey/datastore_commits"], m["rekey/datastore_commit_entities.max"])
	}
	if n := dsCount(t, c, ns, "N"); n != 1000 {
		t.Errorf("%d stored, want 1000", n)
	}
}

// TestDatastoreSinkDeadLetters: entities Datastore or rekey refuse are
// dead-lettered, each with its record and reason, while the rest land.
func TestDatastoreSinkDeadLetters(t *testing.T) {
	c := emulator.TestDatastore(t)
	for _, runner := range dsRunners {
		t.Run(runner, func(t *testing.T) {
			ns := emulator.UniqueNamespace(t.Name())
			recs := dsNumbered(ns, 1, 60, "good")
			dotted := dsNumbered(ns, 1001, 1001, "bad")[0]
			dotted.Fields = append(dotted.Fields, record.Field{Name: "a.b", Value: record.Int(1)})
			slash := record.Record{Table: "N", Key: dsKey(ns, rewrite.PathElement{Kind: "N", Name: "x/y"})}
			half := strings.Repeat("z", 600_000)
			big := dsNumbered(ns, 1002, 1002, "bad")[0]
			big.Fields = append(big.Fields,
				record.Field{Name: "h1", Value: record.String(half), NoIndex: true},
				record.Field{Name: "h2", Value: record.String(half), NoIndex: true})
			nested := dsNumbered(ns, 1003, 1003, "bad")[0]
			nested.Fields = append(nested.Fields, record.Field{Name: "arr", Value: record.Value{Kind: record.KindArray, Array: []record.Value{{Kind: record.KindArray}}}})
			// The bad ones in the middle of batches of good ones.
			all := append(append(append([]record.Record{}, recs[:20]...), dotted, big), recs[20:40]...)
			all = append(append(all, slash, nested), recs[40:]...)
			dead, m := dsWrite(t, runner, sink.DatastoreSinkConfig{}, dsBatches(all, 16))
			if n := dsCount(t, c, ns, "N"); n != 60 {
				t.Errorf("%d entities stored, want the 60 good ones", n)
			}
			if m["rekey/written"] != 60 || m["rekey/dead_lettered"] != 4 {
				t.Errorf("written %d, dead-lettered %d; want 60 and 4", m["rekey/written"], m["rekey/dead_lettered"])
			}
			// The entities the store refuses (the oversized one and the
			// nested array) are isolated by halving their batches, and
			// every cut is counted: 6 for these two batches.
			if m["rekey/split"] != 6 {
				t.Errorf("split %d, want 6 (the commits cut in halves to isolate the refused entities)", m["rekey/split"])
			}
			want := map[string]string{
				"1001":  `property "a.b": name contains "."`,
				"1002":  "maximum entity size is 1048576 bytes",
				`"x/y"`: `name contains "/"`,
				"1003":  "an array cannot contain an array",
			}
			if len(dead) != len(want) {
				t.Fatalf("%d dead letters, want %d: %v", len(dead), len(want), dead)
			}
			for _, d := range dead {
				if d.Stage != record.StageWrite || len(d.Record) == 0 {
					t.Errorf("dead letter %+v: want stage write with the record", d)
				}
				matched := false
				for id, reason := range want {
					if strings.Contains(string(d.Record), id) && strings.Contains(d.Reason, reason) {
						matched = true
						delete(want, id)
						break
					}
				}
				if !matched {
					t.Errorf("unexpected dead letter: %s: %.200s", d.Reason, d.Record)
				}
			}
		})
	}
}

// TestDatastoreSinkInsertMode: inserts land once; a re-run finds its own
// writes and converges; an existing entity with other content is
// dead-lettered and kept.
func TestDatastoreSinkInsertMode(t *testing.T) {
	c := emulator.TestDatastore(t)
	for _, runner := range dsRunners {
		t.Run(runner, func(t *testing.T) {
			ns := emulator.UniqueNamespace(t.Name())
			cfg := sink.DatastoreSinkConfig{Mode: "insert"}
			recs := dsNumbered(ns, 1, 120, "v1")
			dead, m := dsWrite(t, runner, cfg, dsBatches(recs, 50))
			if len(dead) > 0 || m["rekey/written"] != 120 {
				t.Fatalf("first run: written %d, dead %v", m["rekey/written"], dead)
			}
			dead, m = dsWrite(t, runner, cfg, dsBatches(recs, 50))
			if len(dead) > 0 || m["rekey/datastore_insert_existing"] != 120 {
				t.Errorf("re-run: %d found existing, dead %v; want 120 and none", m["rekey/datastore_insert_existing"], dead)
			}
			changed := append(dsNumbered(ns, 1, 1, "v2"), dsNumbered(ns, 121, 130, "v1")...)
			dead, m = dsWrite(t, runner, cfg, dsBatches(changed, 50))
			if len(dead) != 1 || !strings.Contains(dead[0].Reason, "already exists with other content") {
				t.Errorf("changed record: dead letters %v, want one saying it exists with other content", dead)
			}
			if n := dsCount(t, c, ns, "N"); n != 130 || m["rekey/written"] != 10 {
				t.Errorf("%d stored, %d written; want 130 and 10", n, m["rekey/written"])
			}
		})
	}
}

// TestDatastoreSinkDeleteMode: in delete mode the sink deletes the
// records' keys in their own namespace, counts them deleted (keys not
// stored too) and writes nothing.
func TestDatastoreSinkDeleteMode(t *testing.T) {
	c := emulator.TestDatastore(t)
	for _, runner := range dsRunners {
		t.Run(runner, func(t *testing.T) {
			ns := emulator.UniqueNamespace(t.Name())
			if dead, _ := dsWrite(t, runner, sink.DatastoreSinkConfig{}, dsBatches(dsNumbered(ns, 1, 100, "v"), 50)); len(dead) > 0 {
				t.Fatal(dead)
			}
			dead, m := dsWrite(t, runner, sink.DatastoreSinkConfig{Mode: "delete", MaxEntities: 7, CommitPerElement: true}, dsBatches(dsNumbered(ns, 61, 120, "other"), 20))
			if len(dead) > 0 || m["rekey/deleted"] != 60 || m["rekey/written"] != 0 {
				t.Errorf("deleted %d, written %d, dead %v; want 60, 0, none", m["rekey/deleted"], m["rekey/written"], dead)
			}
			if n := dsCount(t, c, ns, "N"); n != 60 {
				t.Errorf("%d entities left, want 60", n)
			}
		})
	}
}

// TestDatastoreSinkNamespaceAndDatabase: the sink writes into the
// configured database, replacing the keys' namespace when one is set.
func TestDatastoreSinkNamespaceAndDatabase(t *testing.T) {
	emulator.RequireDatastore(t)
	ns := emulator.UniqueNamespace(t.Name())
	db := fmt.Sprintf("rekey-sink-%d", time.Now().UnixNano()%1e9)
	recs := dsNumbered("source-ns", 1, 25, "v")
	dead, _ := dsWrite(t, "prism", sink.DatastoreSinkConfig{Database: db, Namespace: ns}, dsBatches(recs, 10))
	if len(dead) > 0 {
		t.Fatal(dead)
	}
	got := dsReadBack(t, "prism", source.DatastoreConfig{Database: db, Namespace: ns, Kind: "N", Splits: 2})
	if len(got) != 25 {
		t.Errorf("read %d from database %s namespace %s, want 25", len(got), db, ns)
	}
	for _, r := range got {
		if r.Key.Namespace != ns {
			t.Errorf("%s: namespace %q, want %q", r.Key, r.Key.Namespace, ns)
		}
	}
	if other := dsReadBack(t, "prism", source.DatastoreConfig{Namespace: ns, Kind: "N"}); len(other) != 0 {
		t.Errorf("the default database holds %d of them", len(other))
	}
}

// TestDatastoreSinkRefusesBadConfig: a bad config fails the pipeline with
// every problem named.
func TestDatastoreSinkRefusesBadConfig(t *testing.T) {
	emulator.RequireDatastore(t)
	_, err := beamtest.RunErr(context.Background(), "direct", func(s beam.Scope) {
		sink.Datastore(s, sink.DatastoreSinkConfig{Mode: "replace", MaxEntities: 501, MaxBytes: -1, Namespace: "bad ns"}, beam.CreateList(s, dsBatches(dsNumbered("", 1, 1, "v"), 1)))
	})
	for _, want := range []string{`mode "replace"`, "max_entities 501", "max_bytes -1", `namespace "bad ns"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one containing %q", err, want)
		}
	}
}
