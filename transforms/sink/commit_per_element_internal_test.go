package sink

import (
	"context"
	"fmt"
	"testing"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/internal/datastoredb"
	"github.com/rekeyio/rekey/internal/record"
	"github.com/rekeyio/rekey/rewrite"
)

// TestSpannerCommitPerElement: with CommitPerElement each batch is one
// commit (cut further only by the bounds); without, batches share commits
// up to the bounds.
func TestSpannerCommitPerElement(t *testing.T) {
	for _, tc := range []struct {
		per  bool
		want string
	}{
		{false, "[7 7 7]"},
		{true, "[3 3 7 2 6]"},
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
			if err := f.ProcessElement(ctx, record.EncodeBatch(recs), func(string) {}); err != nil {
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
