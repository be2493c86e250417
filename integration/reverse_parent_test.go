package integration

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
)

// TestReverseChildWhoseParentOldLacks: a reverse backfill's commit of an
// interleaved child row that new holds, whose parent old lacks (the
// application created both in read_new after the parents' level was
// read, and its write of the parent in old failed), writes the parent in
// old too, as new holds it, in the same commit: without it old refuses
// the child and the reverse backfill stops on a dead letter.
func TestReverseChildWhoseParentOldLacks(t *testing.T) {
	emulator.RequireSpanner(t)
	ctx := context.Background()
	oldC := emulator.TestDB(t, stagedInterleavedDDL...)
	newC := emulator.TestDB(t, stagedInterleavedDDL...)
	cfg := loadYAML(t, interleavedConfig(oldC, newC, filepath.Join(t.TempDir(), "dead.jsonl"), stagedBuckets, time.Second, time.Second))
	j, err := migration.Resolve(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newC.Apply(ctx, []*spanner.Mutation{
		spanner.Insert("Customers", []string{"CustomerId", "Name", "Page"}, []any{rev(7), "c7", "/c"}),
		spanner.Insert("Orders", []string{"CustomerId", "OrderId", "Page"}, []any{rev(7), int64(1), "/o"}),
	}); err != nil {
		t.Fatal(err)
	}
	r, err := cutover.ReverseFor(j)
	if err != nil {
		t.Fatal(err)
	}
	orders := j.Spanner.Children["Orders"]
	if orders == nil {
		t.Fatalf("no old Orders table in %+v", j.Spanner.Children)
	}
	commit, err := operator.SpannerReverse(ctx, oldC, newC, orders, r)
	if err != nil {
		t.Fatal(err)
	}
	row := record.Record{Table: "Orders", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(7)}, {Name: "OrderId", Value: record.Int(1)}}}
	if _, err := commit(ctx, []spannerdb.Row{{Record: &row}}); err != nil {
		t.Fatalf("the commit of an order whose customer old lacks: %v", err)
	}
	got := interleavedPages(oldC, "CustomerId")(t)
	if got[logID("7", 0)] != "/c" || got[logID("7", 1)] != "/o" || len(got) != 2 {
		t.Errorf("old after the commit = %v, want customer 7 (/c) and its order 1 (/o)", got)
	}
}
