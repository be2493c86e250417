package integration

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/pipeline"
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
	r, err := operator.ReverseFor(j)
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

// copyRacedByChild is a reverse backfill's copy as it lands when an
// application's write of an interleaved child comes between the copy's
// read of new's children and its commit of their parent in old: the
// write reaches new, and old refuses it (no parent yet), which logs it
// as a write old missed; then the copy writes the parent alone.
type copyRacedByChild struct {
	pipeline.Runner
	e      *stagedEnv
	t      *testing.T
	parent record.Record
	child  record.Record
}

func (c copyRacedByChild) Reverse(ctx context.Context, _ *migration.Job, _ phases.Backfill) (*migration.Result, error) {
	if err := c.e.app.Write(ctx, c.child); err != nil {
		return nil, err
	}
	c.e.putOld(c.t, c.parent)
	return &migration.Result{Counters: migration.Counters{migration.Written: 1}}, nil
}

// TestReverseRepairsWritesOldMissedDuringTheCopy: a reverse backfill
// ends with old, authoritative again, holding the writes old missed
// while its copy ran (cutover.RepairOld, before the move to dual_write).
func TestReverseRepairsWritesOldMissedDuringTheCopy(t *testing.T) {
	emulator.RequireSpanner(t)
	ctx := context.Background()
	e := newStagedInterleaved(t)
	const user = "1007"
	c := cohortOf(user)
	// The customer was created in new_only: new holds it, old does not.
	for _, p := range []phases.Phase{phases.DualWrite, phases.Backfilled, phases.Verified, phases.Shadow, phases.ReadNew, phases.NewOnly} {
		if _, _, err := e.phases.Move(ctx, phases.Move{Migration: e.migration, Buckets: stagedBuckets, Cohorts: one(c), To: p, Force: true, Who: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	e.waitSeen(t, c, phases.NewOnly)
	parent := e.rec(user, 0, "/c")
	if err := e.app.Write(ctx, parent); err != nil {
		t.Fatal(err)
	}
	jobs := copyRacedByChild{Runner: pipeline.Runner{Runner: cohortRunner}, e: e, t: t, parent: parent, child: e.rec(user, 1, "/o")}
	_, res, _, err := operator.Reverse(ctx, e.cfg, operator.CohortOptions{Migration: e.migration, Cohorts: one(c), Who: "test"}, jobs)
	if err != nil {
		t.Fatalf("reverse backfill: %v", err)
	}
	got := e.oldPages(t)
	if got[logID(user, 0)] != "/c" || got[logID(user, 1)] != "/o" {
		t.Errorf("old after the reverse backfill = %v, want customer %s (/c) and its order 1 (/o)", got, user)
	}
	if n := res.Counters[operator.RepairOldWritten]; n != 1 {
		t.Errorf("%s = %d, want 1 (%s)", operator.RepairOldWritten, n, res.Counters)
	}
	entries, err := e.phases.(phases.RepairLog).Repairs(ctx, e.migration)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("the repair log holds %v after the reverse backfill, want nothing", entries)
	}
}
