package committap_test

import (
	"context"
	"encoding/binary"
	"os"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/hotspot"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/rewrite"
)

func key(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }

func TestMeasure(t *testing.T) {
	// 1,600 keys in 160 commits of 10 neighbours, written in key order:
	// one range at a time; each commit in one range.
	var sorted [][][]byte
	for c := range 160 {
		var keys [][]byte
		for i := range 10 {
			keys = append(keys, key(c*10+i))
		}
		sorted = append(sorted, keys)
	}
	f := committap.Measure(sorted, hotspot.Options{})
	if f.Commits != 160 || f.Writes != 1600 || f.RowsPerCommit != 10 || f.Busiest < 12 || f.RangesPerCommit != 1 || f.MaxRangesPerCommit != 1 {
		t.Errorf("sorted: %v", f)
	}
	// The same commits round robin over the 16 ranges: even (with windows
	// of 16 commits).
	var rr [][][]byte
	for i := range 10 {
		for r := range 16 {
			rr = append(rr, sorted[r*10+i])
		}
	}
	if f := committap.Measure(rr, hotspot.Options{Window: 0.1}); f.Busiest != 1 || f.RangesPerCommit != 1 {
		t.Errorf("round robin: %v", f)
	}
	// Commits that each take one key of every range: even, but every
	// commit touches all 16.
	var wide [][][]byte
	for i := range 100 {
		var keys [][]byte
		for r := range 16 {
			keys = append(keys, key(r*100+i))
		}
		wide = append(wide, keys)
	}
	if f := committap.Measure(wide, hotspot.Options{}); f.Busiest != 1 || f.RangesPerCommit != 16 {
		t.Errorf("wide: %v", f)
	}
	if f := committap.Measure(nil, hotspot.Options{}); f.Commits != 0 || f.Writes != 0 {
		t.Errorf("empty: %v", f)
	}
}

func TestKeysSelectsSuccessfulCommitsOfATable(t *testing.T) {
	commits := []committap.Commit{
		{Done: true, Mutations: []committap.Mutation{{Table: "A", Key: key(1)}, {Table: "B", Key: key(2)}, {Table: "a", Key: nil}}},
		{Done: true, Err: context.Canceled, Mutations: []committap.Mutation{{Table: "A", Key: key(3)}}},
		{Done: false, Mutations: []committap.Mutation{{Table: "A", Key: key(4)}}},
		{Done: true, Mutations: []committap.Mutation{{Table: "B", Key: key(5)}}},
		{Done: true, Mutations: []committap.Mutation{{Table: "a", Key: key(6)}}},
	}
	got := committap.Keys(commits, "A")
	if len(got) != 2 || len(got[0]) != 1 || string(got[0][0]) != string(key(1)) || string(got[1][0]) != string(key(6)) {
		t.Errorf("Keys(A) = %x", got)
	}
	if got := committap.Keys(commits, ""); len(got) != 3 || len(got[0]) != 2 {
		t.Errorf("Keys(all) = %x", got)
	}
}

// TestSpannerThroughTap: a client pointed at the tap creates a session,
// writes in two commits (one refused), reads back with a streaming query;
// the tap records both commits' keys in order, decoded with the table's
// key schema, and the refused one with its error.
func TestSpannerThroughTap(t *testing.T) {
	emulator.RequireSpanner(t)
	_, dbPath := emulator.TestDBPath(t, `CREATE TABLE T (Id INT64 NOT NULL, Name STRING(10) NOT NULL, Ts TIMESTAMP, V BYTES(MAX)) PRIMARY KEY (Id, Name DESC)`)
	ks, err := rewrite.ParseKeySchema("T", "Id INT64, Name STRING(10) DESC")
	if err != nil {
		t.Fatal(err)
	}
	tap, err := committap.Start(os.Getenv(emulator.EnvSpannerHost), ks)
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	t.Setenv(emulator.EnvSpannerHost, tap.Addr())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := emulator.SpannerClient(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	at := time.Date(2024, 1, 2, 3, 4, 5, 6000, time.UTC)
	_, err = c.Apply(ctx, []*spanner.Mutation{
		spanner.InsertOrUpdate("T", []string{"V", "Name", "Id", "Ts"}, []any{[]byte{1}, "b", int64(2), at}),
		spanner.InsertOrUpdate("T", []string{"Name", "Id"}, []any{"a", int64(-7)}),
	}, spanner.ApplyAtLeastOnce())
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Apply(ctx, []*spanner.Mutation{spanner.Insert("T", []string{"Id", "Name"}, []any{int64(2), "b"})}, spanner.ApplyAtLeastOnce())
	if spanner.ErrCode(err) != codes.AlreadyExists {
		t.Fatalf("duplicate insert: %v, want AlreadyExists", err)
	}
	var n int64
	if err := c.Single().Query(ctx, spanner.Statement{SQL: "SELECT COUNT(*) FROM T"}).Do(func(r *spanner.Row) error { return r.Column(0, &n) }); err != nil || n != 2 {
		t.Fatalf("read through the tap: %d rows, %v", n, err)
	}

	commits := tap.Commits()
	if len(commits) != 2 {
		t.Fatalf("%d commits recorded, want 2: %+v", len(commits), commits)
	}
	var texts []string
	for _, m := range commits[0].Mutations {
		texts = append(texts, m.Text)
		if m.Table != "T" || m.Key == nil {
			t.Errorf("mutation %+v", m)
		}
	}
	if want := []string{`[2,"b"]`, `[-7,"a"]`}; !slices.Equal(texts, want) {
		t.Errorf("keys %q, want %q", texts, want)
	}
	if !commits[0].Done || commits[0].Err != nil || commits[0].Store != "spanner" || commits[0].Seq != 0 {
		t.Errorf("first commit %+v", commits[0])
	}
	if !commits[1].Done || commits[1].Err == nil || commits[1].Seq != 1 {
		t.Errorf("refused commit %+v", commits[1])
	}
	want := rewrite.AppendSpannerKey(nil, ks, []rewrite.Value{rewrite.Int64(-7), rewrite.String("a")})
	if string(commits[0].Mutations[1].Key) != string(want) {
		t.Errorf("key encoding %x, want %x", commits[0].Mutations[1].Key, want)
	}
	if keys := committap.Keys(commits, "t"); len(keys) != 1 || len(keys[0]) != 2 {
		t.Errorf("Keys: %x", keys)
	}
	if calls := tap.Calls(); calls[committap.SpannerCommit] != 2 || calls["/google.spanner.v1.Spanner/ExecuteStreamingSql"] == 0 {
		t.Errorf("calls %v", calls)
	}
	tap.Reset()
	if len(tap.Commits()) != 0 {
		t.Error("Reset kept commits")
	}
}

// TestDatastoreThroughTap: entities written through the tap are recorded
// with their full keys; a query through the tap reads them back.
func TestDatastoreThroughTap(t *testing.T) {
	emulator.RequireDatastore(t)
	tap, err := committap.Start(os.Getenv(emulator.EnvDatastoreHost))
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	t.Setenv(emulator.EnvDatastoreHost, tap.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := emulator.DatastoreClient(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ns := emulator.UniqueNamespace("tap")
	parent := &datastore.Key{Kind: "C", Name: "c1", Namespace: ns}
	keys := []*datastore.Key{parent, {Kind: "O", ID: 7, Parent: parent, Namespace: ns}}
	type E struct{ X int }
	if _, err := c.PutMulti(ctx, keys, []E{{1}, {2}}); err != nil {
		t.Fatal(err)
	}
	n, err := c.Count(ctx, datastore.NewQuery("O").Namespace(ns))
	if err != nil || n != 1 {
		t.Fatalf("query through the tap: %d, %v", n, err)
	}
	commits := tap.Commits()
	if len(commits) != 1 || len(commits[0].Mutations) != 2 || commits[0].Store != "datastore" || commits[0].Err != nil {
		t.Fatalf("commits %+v", commits)
	}
	m := commits[0].Mutations[1]
	wantKey := rewrite.DatastoreKey{Namespace: ns, Path: []rewrite.PathElement{{Kind: "C", Name: "c1"}, {Kind: "O", ID: 7}}}
	if m.Table != "O" || string(m.Key) != string(rewrite.AppendDatastoreKey(nil, wantKey)) || m.Text != wantKey.String() {
		t.Errorf("mutation %+v, want key %s", m, wantKey)
	}
}

// TestFaults: a fault before the backend leaves nothing written; an
// "applied, then lost" fault writes the entity yet answers the error; both
// are recorded with the commit, and the rate selects about that share.
func TestFaults(t *testing.T) {
	emulator.RequireDatastore(t)
	backend := os.Getenv(emulator.EnvDatastoreHost)
	tap, err := committap.Start(backend)
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	direct, err := emulator.DatastoreClient(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	t.Setenv(emulator.EnvDatastoreHost, tap.Addr())
	c, err := emulator.DatastoreClient(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ns := emulator.UniqueNamespace("faults")
	type E struct{ X int }

	for i, f := range []committap.Fault{{Code: codes.Unavailable}, {Code: codes.Unavailable, Lost: true}} {
		tap.Reset()
		tap.SetFaults(committap.Faults{Rate: 1, Kinds: []committap.Fault{f}})
		k := &datastore.Key{Kind: "F", ID: int64(i + 1), Namespace: ns}
		// One attempt: the mutation is sent once, its error comes back.
		_, err := c.Mutate(ctx, datastore.NewUpsert(k, &E{i}))
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%v: Mutate = %v, want Unavailable", f, err)
		}
		var got E
		stored := direct.Get(ctx, k, &got) == nil
		if stored != f.Lost {
			t.Errorf("%v: entity stored = %v, want %v", f, stored, f.Lost)
		}
		commits := tap.Commits()
		if len(commits) == 0 || commits[0].Fault == nil || *commits[0].Fault != f || status.Code(commits[0].Err) != codes.Unavailable {
			t.Errorf("%v: commits %+v, want the fault recorded", f, commits)
		}
	}

	tap.Reset()
	tap.SetFaults(committap.Faults{Rate: 0.3, Kinds: []committap.Fault{{Code: codes.Aborted}}, Seed: 7})
	faulted := 0
	const n = 200
	for i := range n {
		k := &datastore.Key{Kind: "G", ID: int64(i + 1), Namespace: ns}
		if _, err := c.Mutate(ctx, datastore.NewUpsert(k, &E{i})); err != nil {
			faulted++
		}
	}
	tap.SetFaults(committap.Faults{})
	recorded := 0
	for _, cm := range tap.Commits() {
		if cm.Fault != nil {
			recorded++
		}
	}
	if recorded < n*3/10-25 || recorded > n*3/10+25 || faulted > recorded {
		t.Errorf("rate 0.3 of %d commits: %d faults recorded, %d calls failed", n, recorded, faulted)
	}

	// Faults limited to a kind: the others' commits all go through.
	tap.Reset()
	tap.SetFaults(committap.Faults{Rate: 1, Kinds: []committap.Fault{{Code: codes.Unavailable}}, Tables: []string{"h"}})
	for i, kind := range []string{"H", "I", "H"} {
		_, err := c.Mutate(ctx, datastore.NewUpsert(&datastore.Key{Kind: kind, ID: int64(i + 1), Namespace: ns}, &E{i}))
		if (err != nil) != (kind == "H") {
			t.Errorf("a commit of kind %s with faults limited to H: %v", kind, err)
		}
	}
	tap.SetFaults(committap.Faults{})
}
