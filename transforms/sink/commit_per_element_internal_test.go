package sink

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/testkit/beamtest"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// TestSpannerCommitPerElement: with CommitPerElement each batch is one
// commit (cut further only by the bounds); without, batches share commits
// up to the bounds. Commits run ahead of the bundle, so they may finish in
// any order: the sizes are compared sorted.
func TestSpannerCommitPerElement(t *testing.T) {
	for _, tc := range []struct {
		per  bool
		want string
	}{
		{false, "[7 7 7]"},
		{true, "[2 3 3 6 7]"},
	} {
		f, commits := fakeSink(SpannerSinkConfig{Table: "T", MaxRows: 7, CommitPerElement: tc.per}, func(int64) error { return nil })
		ctx := context.Background()
		for _, n := range []int{3, 3, 9, 6} {
			if err := f.ProcessElement(ctx, batchOf(n), func(string) {}); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.FinishBundle(ctx, func(string) {}); err != nil {
			t.Fatal(err)
		}
		var sizes []int
		for _, c := range *commits {
			sizes = append(sizes, len(c))
		}
		slices.Sort(sizes)
		if got := fmt.Sprint(sizes); got != tc.want {
			t.Errorf("CommitPerElement %v: commits of %s rows, want %s", tc.per, got, tc.want)
		}
	}
}

func TestDatastoreCommitPerElement(t *testing.T) {
	for _, tc := range []struct {
		per  bool
		want string
	}{
		{false, "[5 5 5 3]"},
		{true, "[3 3 5 2 5]"},
	} {
		var sizes []int
		w := &datastoredb.Writer{MaxEntities: 5, Commit: func(_ context.Context, _ bool, ents []datastore.Entity) error {
			sizes = append(sizes, len(ents))
			return nil
		}}
		f := &datastoreWriteFn{Cfg: DatastoreSinkConfig{MaxEntities: 5, CommitPerElement: tc.per}, w: w}
		ctx := context.Background()
		f.StartBundle(ctx, func(string) {})
		id := int64(0)
		for _, n := range []int{3, 3, 7, 5} {
			var recs []record.Record
			for range n {
				id++
				recs = append(recs, record.Record{Table: "K", Key: &rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "K", ID: id}}}})
			}
			if err := f.ProcessElement(ctx, record.Batch{Recs: recs}, func(string) {}); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.FinishBundle(ctx, func(string) {}); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(sizes); got != tc.want {
			t.Errorf("CommitPerElement %v: commits of %s entities, want %s", tc.per, got, tc.want)
		}
	}
}

// TestDatastoreParallelCommits: with Parallelism 4, batches are committed
// by up to 4 goroutines at once, never more; every entity is written once,
// a refused one is dead-lettered, and the counts and dead letters are
// reported by the bundle (FinishBundle waits for the commits in flight).
func TestDatastoreParallelCommits(t *testing.T) {
	const parallelism, batches, perBatch = 4, 40, 10
	var mu sync.Mutex
	inFlight, maxInFlight := 0, 0
	stored := map[int64]int{}
	commit := func(_ context.Context, _ bool, ents []datastore.Entity) error {
		mu.Lock()
		inFlight++
		maxInFlight = max(maxInFlight, inFlight)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		inFlight--
		for _, e := range ents {
			if e.Key.ID == 77 {
				return status.Error(codes.InvalidArgument, "entity 77 refused")
			}
		}
		for _, e := range ents {
			stored[e.Key.ID]++
		}
		return nil
	}
	f := &datastoreWriteFn{Cfg: DatastoreSinkConfig{CommitPerElement: true, Parallelism: parallelism}, w: &datastoredb.Writer{}}
	f.idle = make(chan *datastoredb.Writer, parallelism)
	f.queued = make(chan struct{}, 2*parallelism)
	f.slots = make(chan struct{}, parallelism)
	for range parallelism {
		f.idle <- &datastoredb.Writer{Commit: commit}
	}
	ctx, counted := beamtest.MetricsContext(context.Background())
	before := counted()
	var dead []string
	emit := func(s string) { dead = append(dead, s) }
	f.StartBundle(ctx, emit)
	id := int64(0)
	for range batches {
		var recs []record.Record
		for range perBatch {
			id++
			recs = append(recs, record.Record{Table: "K", Key: &rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "K", ID: id}}}})
		}
		if err := f.ProcessElement(ctx, record.Batch{Recs: recs}, emit); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.FinishBundle(ctx, emit); err != nil {
		t.Fatal(err)
	}
	after := counted()
	if maxInFlight < 2 || maxInFlight > parallelism {
		t.Errorf("%d commits in flight at most, want 2..%d", maxInFlight, parallelism)
	}
	if len(stored) != batches*perBatch-1 || len(dead) != 1 || !strings.Contains(dead[0], "entity 77 refused") {
		t.Errorf("%d entities stored, dead letters %v; want %d and entity 77's", len(stored), dead, batches*perBatch-1)
	}
	for k, n := range stored {
		if n != 1 {
			t.Errorf("entity %d stored %d times", k, n)
		}
	}
	if w, d := after["rekey/written"]-before["rekey/written"], after["rekey/dead_lettered"]-before["rekey/dead_lettered"]; w != batches*perBatch-1 || d != 1 {
		t.Errorf("counted %d written, %d dead-lettered; want %d, 1", w, d, batches*perBatch-1)
	}
}
