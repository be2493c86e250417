package datastoredb

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

func testClient(t *testing.T, database string) *datastore.Client {
	t.Helper()
	emulator.RequireDatastore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Client(ctx, emulator.DatastoreProject(), database)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestEmulatorRoundTripEveryKind(t *testing.T) {
	c := testClient(t, "")
	ctx := context.Background()
	ns := emulator.UniqueNamespace(t.Name())
	rec := everyKind()
	rec.Key.Namespace = ns
	key, props, err := ToEntity(&rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, key, &props); err != nil {
		t.Fatal(err)
	}
	var stored datastore.PropertyList
	if err := c.Get(ctx, key, &stored); err != nil {
		t.Fatal(err)
	}
	got, err := FromEntity(key, stored)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(&rec) {
		t.Errorf("read back:\n got %s\nwant %s", describe(&got), describe(&rec))
	}
	if a, b := record.AppendRecord(nil, &got), record.AppendRecord(nil, &rec); string(a) != string(b) {
		t.Error("read back encodes differently")
	}
}

// TestEmulatorTimestampPrecision documents that Datastore keeps
// microseconds: a time sent with nanoseconds by the plain client reads back
// truncated; ToEntity truncates before sending, so both paths agree.
func TestEmulatorTimestampPrecision(t *testing.T) {
	c := testClient(t, "")
	ctx := context.Background()
	ns := emulator.UniqueNamespace(t.Name())
	ts := time.Date(2020, 1, 2, 3, 4, 5, 123456789, time.UTC)
	raw := &datastore.Key{Kind: "T", ID: 1, Namespace: ns}
	if _, err := c.Put(ctx, raw, &datastore.PropertyList{{Name: "t", Value: ts}}); err != nil {
		t.Fatal(err)
	}
	var pl datastore.PropertyList
	if err := c.Get(ctx, raw, &pl); err != nil {
		t.Fatal(err)
	}
	want := time.Date(2020, 1, 2, 3, 4, 5, 123456000, time.UTC)
	if got := pl[0].Value.(time.Time); !got.Equal(want) {
		t.Errorf("plain client: stored %v, read %v; want %v (microseconds)", ts, got, want)
	}
	rec := record.Record{Key: &rewrite.DatastoreKey{Namespace: ns, Path: []rewrite.PathElement{{Kind: "T", ID: 2}}},
		Fields: []record.Field{{Name: "t", Value: record.Time(ts)}}}
	key, props, err := ToEntity(&rec)
	if err != nil {
		t.Fatal(err)
	}
	if got := props[0].Value.(time.Time); !got.Equal(want) {
		t.Errorf("ToEntity sends %v, want %v", got, want)
	}
	if _, err := c.Put(ctx, key, &props); err != nil {
		t.Fatal(err)
	}
	pl = nil
	if err := c.Get(ctx, key, &pl); err != nil {
		t.Fatal(err)
	}
	if got := pl[0].Value.(time.Time); !got.Equal(want) {
		t.Errorf("ToEntity path: read %v, want %v", got, want)
	}
}

// TestEmulatorBehaviour pins what the package doc says about the Firestore
// emulator, so the doc cannot drift from it unnoticed.
func TestEmulatorBehaviour(t *testing.T) {
	c := testClient(t, "")
	ctx := context.Background()
	ns := emulator.UniqueNamespace(t.Name())
	k := func(kind string, id int64) *datastore.Key { return &datastore.Key{Kind: kind, ID: id, Namespace: ns} }

	// Over 1 MiB: refused with InvalidArgument.
	half := strings.Repeat("x", 600_000)
	_, err := c.Put(ctx, k("Big", 1), &datastore.PropertyList{{Name: "a", Value: half, NoIndex: true}, {Name: "b", Value: half, NoIndex: true}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "maximum entity size") {
		t.Errorf("1.2 MB entity: err = %v, want InvalidArgument maximum entity size", err)
	}

	// __scatter__: no results, no error.
	var keys []*datastore.Key
	var pls []datastore.PropertyList
	for i := int64(1); i <= 200; i++ {
		keys = append(keys, k("S", i))
		pls = append(pls, datastore.PropertyList{{Name: "v", Value: i}})
	}
	if _, err := c.PutMulti(ctx, keys, pls); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetAll(ctx, datastore.NewQuery("S").Namespace(ns).KeysOnly().Order("__scatter__").Limit(64), nil)
	if err != nil || len(got) != 0 {
		t.Errorf("__scatter__ query: %d keys, err %v; the emulator used to return none and no error", len(got), err)
	}

	// Two mutations of one key in a commit: refused.
	_, err = c.PutMulti(ctx, []*datastore.Key{k("D", 1), k("D", 1)}, []datastore.PropertyList{{}, {}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("duplicate key in a commit: err = %v, want InvalidArgument", err)
	}

	// Requests over 4 MiB: ResourceExhausted.
	keys, pls = nil, nil
	for i := int64(1); i <= 6; i++ {
		keys = append(keys, k("R", i))
		pls = append(pls, datastore.PropertyList{{Name: "v", Value: strings.Repeat("y", 900_000), NoIndex: true}})
	}
	_, err = c.PutMulti(ctx, keys, pls)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "exceeds maximum size") {
		t.Errorf("5.4 MB commit: err = %v, want ResourceExhausted exceeds maximum size", err)
	}

	// Dotted property names and "/" in key names: accepted by the
	// emulator (rekey refuses them itself).
	if _, err := c.Put(ctx, k("Dot", 1), &datastore.PropertyList{{Name: "a.b", Value: int64(1)}}); err != nil {
		t.Errorf("dotted name: %v", err)
	}
	slash := &datastore.Key{Kind: "Slash", Name: "a/b", Namespace: ns}
	if _, err := c.Put(ctx, slash, &datastore.PropertyList{}); err != nil {
		t.Errorf("slash in key name: %v", err)
	}
}

func TestEmulatorWriterSplitsLargeCommits(t *testing.T) {
	c := testClient(t, "")
	ctx := context.Background()
	ns := emulator.UniqueNamespace(t.Name())
	w := NewWriter(c)
	var out storewrite.Outcome
	for i := int64(1); i <= 12; i++ {
		rec := record.Record{
			Key:    &rewrite.DatastoreKey{Namespace: ns, Path: []rewrite.PathElement{{Kind: "Big", ID: i}}},
			Fields: []record.Field{{Name: "v", Value: record.String(strings.Repeat("z", 900_000))}},
		}
		if err := w.Add(ctx, &rec, &out); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx, &out); err != nil {
		t.Fatal(err)
	}
	commits, dead := 0, out.DeadLetters
	for _, c := range out.Commits {
		if c.OK {
			commits++
		}
	}
	n, err := c.Count(ctx, datastore.NewQuery("Big").Namespace(ns).KeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	if n != 12 || len(dead) != 0 {
		t.Errorf("stored %d, dead %d, want 12 and 0", n, len(dead))
	}
	// 9 MB of entities in 4 MiB requests: at least 3 commits.
	if commits < 3 {
		t.Errorf("%d commits, want at least 3", commits)
	}
}

func TestEmulatorNamedDatabase(t *testing.T) {
	ctx := context.Background()
	db := fmt.Sprintf("rekey-%d", time.Now().UnixNano()%1e9)
	named, def := testClient(t, db), testClient(t, "")
	k := &datastore.Key{Kind: "K", Name: "x", Namespace: emulator.UniqueNamespace(t.Name())}
	if _, err := named.Put(ctx, k, &datastore.PropertyList{{Name: "a", Value: int64(1)}}); err != nil {
		t.Fatal(err)
	}
	var pl datastore.PropertyList
	if err := named.Get(ctx, k, &pl); err != nil {
		t.Errorf("get from database %s: %v", db, err)
	}
	if err := def.Get(ctx, k, &pl); err != datastore.ErrNoSuchEntity {
		t.Errorf("get from the default database = %v, want ErrNoSuchEntity", err)
	}
}
