package integration

import (
	"context"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/store/spannerdb/spannerdbtest"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// Helpers shared by the end-to-end migration tests (migrate_*_test.go).

// wantCounters checks the "rekey" counters of a run.
func wantCounters(t *testing.T, res *migration.Result, read, rewritten, written, dead int64) {
	t.Helper()
	c := res.Counters
	if c["read"] != read || c["rewritten"] != rewritten || c["written"] != written || c["dead_lettered"] != dead {
		t.Errorf("counters %s; want read=%d rewritten=%d written=%d dead_lettered=%d",
			c.String(), read, rewritten, written, dead)
	}
}

// newSpannerTarget creates an empty database on the Spanner emulator,
// dropped when the test ends, and returns its id and a client on it.
func newSpannerTarget(t *testing.T, hint string, ddl ...string) (string, *spanner.Client) {
	t.Helper()
	emulator.RequireSpanner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := emulator.UniqueDatabaseID(hint)
	path, err := emulator.NewSpannerDatabase(ctx, emulator.SpannerProject(), emulator.SpannerInstance(), id, ddl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := emulator.DropSpannerDatabase(ctx, path); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
	c, err := emulator.SpannerClient(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return id, c
}

// dbID is the database id of a Spanner client.
func dbID(c *spanner.Client) string {
	name := c.DatabaseName()
	return name[strings.LastIndex(name, "/")+1:]
}

// readTable reads a table's schema, failing the test if it cannot.
func readTable(t *testing.T, c *spanner.Client, name string) *spannerdb.Table {
	t.Helper()
	tb, err := spannerdb.ReadTable(context.Background(), c, name)
	if err != nil {
		t.Fatalf("schema of %s in %s: %v", name, dbID(c), err)
	}
	return tb
}

// readRows reads every column of every row of a table (generated columns
// too), in key order.
func readRows(t *testing.T, c *spanner.Client, table string) []record.Record {
	t.Helper()
	tb := readTable(t, c, table)
	var cols []string
	for _, col := range tb.Columns {
		cols = append(cols, col.Name)
	}
	recs, err := spannerdbtest.ReadAll(context.Background(), c, tb, cols...)
	if err != nil {
		t.Fatalf("reading %s: %v", table, err)
	}
	return recs
}

// keyText renders a key for use as a map key.
func keyText(vals []rewrite.Value) string { return rewrite.FormatKey(vals, false) }

// rowKey reads the key columns of a row as key values.
func rowKey(t *testing.T, r *record.Record, schema rewrite.KeySchema) []rewrite.Value {
	t.Helper()
	out := make([]rewrite.Value, len(schema.Columns))
	for i, c := range schema.Columns {
		v, ok := r.Get(c.Name)
		if !ok {
			t.Fatalf("row %s has no key column %s", r.Describe(), c.Name)
		}
		kv, err := record.KeyValue(v, c.Type)
		if err != nil {
			t.Fatalf("row %s: key column %s: %v", r.Describe(), c.Name, err)
		}
		out[i] = kv
	}
	return out
}

// putEntities writes records as entities with the Datastore writer
// (upsert); a record it refuses fails the test.
func putEntities(t *testing.T, c *datastore.Client, recs []record.Record) {
	t.Helper()
	out, err := datastoredb.NewWriter(c).Write(context.Background(), recs)
	if err != nil {
		t.Fatalf("writing entities: %v", err)
	}
	if n := len(out.DeadLetters); n > 0 {
		t.Fatalf("%d entities refused, the first: %s", n, out.DeadLetters[0])
	}
}

// readEntities reads every entity of kind in namespace (at every depth),
// by key text.
func readEntities(t *testing.T, c *datastore.Client, ns, kind string) map[string]record.Record {
	t.Helper()
	var props []datastore.PropertyList
	keys, err := c.GetAll(context.Background(), datastore.NewQuery(kind).Namespace(ns), &props)
	if err != nil {
		t.Fatalf("reading %s in %q: %v", kind, ns, err)
	}
	out := map[string]record.Record{}
	for i, k := range keys {
		r, err := datastoredb.FromEntity(k, props[i])
		if err != nil {
			t.Fatalf("entity %v: %v", k, err)
		}
		out[r.Key.String()] = r
	}
	return out
}

// countEntities counts the entities of kind in namespace with a keys-only
// query.
func countEntities(t *testing.T, c *datastore.Client, ns, kind string) int {
	t.Helper()
	keys, err := c.GetAll(context.Background(), datastore.NewQuery(kind).Namespace(ns).KeysOnly(), nil)
	if err != nil {
		t.Fatalf("counting %s in %q: %v", kind, ns, err)
	}
	return len(keys)
}

// sortedKeys returns a map's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// microTime is a timestamp Datastore keeps exactly (microseconds).
func microTime(i int) time.Time {
	return time.Date(2023, 3, 1, 8, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Hour + time.Duration(i*1013)*time.Microsecond)
}

// canonNaN is the NaN Datastore stores for every NaN.
var canonNaN = math.Float64frombits(0x7ff8000000000000)

// stageCounts counts dead letters by stage.
func stageCounts(dead []record.DeadLetter) map[string]int {
	m := map[string]int{}
	for _, d := range dead {
		m[d.Stage]++
	}
	return m
}

// arr, geo and entity build array, geo point and embedded entity values.
func arr(vs ...record.Value) record.Value { return record.Value{Kind: record.KindArray, Array: vs} }

func geo(lat, lng float64) record.Value {
	return record.Value{Kind: record.KindGeoPoint, Lat: lat, Lng: lng}
}

func entity(fs ...record.Field) record.Value {
	return record.Value{Kind: record.KindEntity, Entity: fs}
}

// checkEntities checks that the target entities are exactly want (by key
// text), values equal property by property.
func checkEntities(t *testing.T, run string, got, want map[string]record.Record) {
	t.Helper()
	bad := 0
	for _, k := range sortedKeys(want) {
		g, ok := got[k]
		if !ok {
			if bad++; bad <= 5 {
				t.Errorf("%s: entity %s is missing", run, k)
			}
			continue
		}
		if d := record.FieldsDiff(g.Fields, want[k].Fields); d != "" {
			if bad++; bad <= 5 {
				t.Errorf("%s: entity %s: %s", run, k, d)
			}
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected entity %s", run, k)
		}
	}
	if bad > 0 || len(got) != len(want) {
		t.Errorf("%s: %d entities in the target, want %d; %d missing or different", run, len(got), len(want), bad)
	}
}

// spannerRewriter returns a strategy's rewriter for Spanner keys of
// schema (see mustSchema).
func spannerRewriter(t *testing.T, step rewrite.StepConfig, schema string) *rewrite.SpannerRewriter {
	t.Helper()
	st, err := rewrite.New(step)
	if err != nil {
		t.Fatal(err)
	}
	sr, err := st.Spanner(mustSchema(t, schema))
	if err != nil {
		t.Fatal(err)
	}
	return sr
}

// datastoreRewriter returns a strategy's rewriter for Datastore keys.
func datastoreRewriter(t *testing.T, step rewrite.StepConfig) *rewrite.DatastoreRewriter {
	t.Helper()
	st, err := rewrite.New(step)
	if err != nil {
		t.Fatal(err)
	}
	rw, err := st.Datastore()
	if err != nil {
		t.Fatal(err)
	}
	return rw
}
