package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/pipeline"
)

// backfilledSpanner is the Spanner env with n users' logs 0 and 1, their
// cohorts backfilled.
func backfilledSpanner(t *testing.T, prefix string, n int) (*stagedEnv, []string, []cohort.Range) {
	t.Helper()
	emulator.RequireSpanner(t)
	e := newStagedSpanner(t)
	users, rs := stagedSeed(t, e, prefix, n, 2)
	e.move(t, rs, phases.DualWrite)
	waitHold()
	if _, _, err := e.backfill(t, "prism", rs, false); err != nil {
		t.Fatal(err)
	}
	return e, users, rs
}

// TestVerifyWriteBetweenReads: a record the application writes again
// between every two reads of a recheck (the commit tap runs a dual write
// of it through the library just before each read of new by key, the
// case of a record written several times a second) is not a finding:
// verify reads old and new again at one timestamp (new in a strong
// read-only transaction, old at its timestamp), so both hold the same
// write, and --mark moves the cohorts. Read old then new, a write apart,
// it differed at every reread and --mark never passed.
func TestVerifyWriteBetweenReads(t *testing.T) {
	ctx := context.Background()
	e, users, rs := backfilledSpanner(t, "wb-user", 4)
	hot := users[0]
	e.changeNew(t, hot, 0, "stale", false) // the job's reads see a difference
	var writes atomic.Int64
	e.tap.OnRead("LogsV2", func() {
		n := writes.Add(1)
		if err := e.app.Write(ctx, e.rec(hot, 0, fmt.Sprintf("write-%d", n))); err != nil {
			t.Errorf("the application's write %d: %v", n, err)
		}
	})
	by, a, err := e.verify(t, rs, true)
	e.tap.OnRead("LogsV2", nil)
	if writes.Load() == 0 {
		t.Fatal("no read of new by key: the finding was not read again")
	}
	if err != nil {
		t.Fatalf("verify --mark with a write between the rereads: %v (cohort %d: %+v)", err, cohortOf(hot), by[cohortOf(hot)])
	}
	if v := by[cohortOf(hot)]; v.Settled != 1 || !v.Clean() {
		t.Errorf("cohort %d: %+v, want clean with 1 settled on recheck", cohortOf(hot), v)
	}
	if a == nil || a.To != phases.Verified {
		t.Errorf("verify --mark: audit %+v, want a move to verified", a)
	}
	t.Logf("%d application writes between rereads", writes.Load())
}

// TestVerifyMarkRoutedAround: a dual write whose second write fails (the
// commit tap refuses new's half) leaves old ahead of new and a repair-log
// entry saying new missed it, while old is authoritative. The library
// routes around such a record (read_new reads old for it, new_only is
// refused until a repair), so verify reports it as logged and routed
// around, apart from the findings, and --mark accepts it; a real
// difference beside it still keeps the cohorts where they are.
func TestVerifyMarkRoutedAround(t *testing.T) {
	ctx := context.Background()
	e, users, rs := backfilledSpanner(t, "rt-user", 8)
	logged, changed := users[0], users[1]
	e.tap.SetFaults(committap.Faults{Rate: 1, Kinds: []committap.Fault{{Code: codes.PermissionDenied}}, Tables: []string{"LogsV2"}})
	err := e.app.Write(ctx, e.rec(logged, 0, "logged"))
	e.tap.SetFaults(committap.Faults{})
	if err != nil {
		t.Fatalf("a dual write whose second write failed: %v, want success (old is authoritative)", err)
	}
	e.changeNew(t, changed, 1, "changed", false)

	by, _, err := e.verify(t, rs, true)
	if !errors.Is(err, operator.ErrNotClean) {
		t.Errorf("verify --mark with a mismatch beside the routed record: %v, want ErrNotClean", err)
	}
	if v := by[cohortOf(changed)]; v.Mismatched != 1 {
		t.Errorf("cohort %d: %+v, want 1 mismatched", cohortOf(changed), v)
	}
	e.changeNew(t, changed, 1, "seed", false)

	by, a, err := e.verify(t, rs, true)
	if err != nil {
		t.Fatalf("verify --mark with only a routed-around record: %v (cohort %d: %+v)", err, cohortOf(logged), by[cohortOf(logged)])
	}
	v := by[cohortOf(logged)]
	if v.Routed != 1 || v.Mismatched != 0 || v.RepairLog != 1 || v.RepairLogRouted != 1 || len(v.Keys.Routed) != 1 || !strings.Contains(v.Keys.Routed[0], logged) {
		t.Errorf("cohort %d: %+v; want 1 logged and routed around (%s), not mismatched, its entry routed around", cohortOf(logged), v, logged)
	}
	if v.Clean() || !v.Markable() {
		t.Errorf("cohort %d: clean %v, markable %v; want not clean but markable", cohortOf(logged), v.Clean(), v.Markable())
	}
	if a == nil || a.To != phases.Verified {
		t.Errorf("verify --mark: audit %+v, want a move to verified", a)
	}
	if es, err := operator.RepairsOf(ctx, e.phases, e.migration); err != nil || len(es) != 1 {
		t.Errorf("repair log after the mark: %d entries, %v; want the 1 entry kept (a repair copies it)", len(es), err)
	}
}

// TestVerifyManyFindings: 600 records extra in new, in a few cohorts.
// Every one is a finding (read again in batches: the reads of new by key
// are a few per batch, not three per finding), the report holds every
// key, and the examples stay bounded.
func TestVerifyManyFindings(t *testing.T) {
	ctx := context.Background()
	e, users, rs := backfilledSpanner(t, "mf-user", 6)
	newC, err := spanner.NewClient(ctx, fmt.Sprintf("projects/%s/instances/%s/databases/%s", emulator.SpannerProject(), emulator.SpannerInstance(), e.cfg.Target.Database))
	if err != nil {
		t.Fatal(err)
	}
	defer newC.Close()
	const extra = 600
	var ms []*spanner.Mutation
	for i := range extra {
		u := users[i%len(users)]
		ms = append(ms, spanner.Insert("LogsV2", []string{"ShardId", "UserId", "Seq", "Page"}, []any{int64(0), u, int64(1000 + i), "extra"}))
	}
	if _, err := newC.Apply(ctx, ms); err != nil {
		t.Fatal(err)
	}
	reads := func() int { return e.tap.Calls()[committap.SpannerStreamingRead] }
	before := reads()
	report := filepath.Join(t.TempDir(), "verify.jsonl")
	out, _, _, err := operator.Verify(ctx, e.cfg, operator.VerifyOptions{Migration: e.migration, Cohorts: rs, Examples: 3, ReportPath: report}, pipeline.Runner{Runner: "prism"})
	if err != nil {
		t.Fatal(err)
	}
	byReads := reads() - before
	n, keys := 0, map[string]bool{}
	for _, v := range out {
		n += v.Extra
		for _, k := range v.Keys.Extra {
			keys[k] = true
		}
		if len(v.Examples.Extra) > 3 {
			t.Errorf("cohort %d: %d extra examples, want at most 3", v.Cohort, len(v.Examples.Extra))
		}
	}
	if n != extra || len(keys) != extra {
		t.Errorf("%d extra in new, %d distinct keys in the report; want %d and %d", n, len(keys), extra, extra)
	}
	// Each batch and attempt reads new once (old too, through the tap:
	// the job's clients are made after it): 3 attempts × 2 sides per
	// batch of up to 500, and a few bundles.
	if byReads > 60 {
		t.Errorf("%d reads by key for %d findings; want them read again in batches (at most 60)", byReads, extra)
	}
	t.Logf("%d reads by key for %d findings", byReads, extra)
	if _, err := os.Stat(report + ".keys"); !os.IsNotExist(err) {
		t.Errorf("the keys file %s.keys is left: %v", report, err)
	}
}

// TestRepairWriteBetweenReads: a repair reads each difference again
// before it acts, as verify does: a record the application writes between
// the job's reads and the recheck's (the tap writes it through the
// library before each read of new by key) is settled on recheck, neither
// written nor left, while a real difference beside it is repaired; the
// tally adds up (found = repaired + settled + left). Without the recheck
// the repair tried to write both.
func TestRepairWriteBetweenReads(t *testing.T) {
	ctx := context.Background()
	e, users, rs := backfilledSpanner(t, "rwb-user", 4)
	hot, changed := users[0], users[1]
	e.changeNew(t, hot, 0, "stale", false) // the job's reads see a difference
	e.changeNew(t, changed, 1, "changed", false)
	var writes atomic.Int64
	e.tap.OnRead("LogsV2", func() {
		n := writes.Add(1)
		if err := e.app.Write(ctx, e.rec(hot, 0, fmt.Sprintf("write-%d", n))); err != nil {
			t.Errorf("the application's write %d: %v", n, err)
		}
	})
	r, err := operator.RepairTallied(ctx, e.cfg, operator.RepairOptions{Migration: e.migration, Cohorts: rs, ReportPath: filepath.Join(t.TempDir(), "repair.jsonl"), Who: "test-repair"}, pipeline.Runner{Runner: "prism"})
	e.tap.OnRead("LogsV2", nil)
	if err != nil {
		t.Fatal(err)
	}
	if writes.Load() == 0 {
		t.Fatal("no read of new by key: the differences were not read again")
	}
	checkRepairTally(t, r.Sides, operator.RepairSide{Authoritative: "old", Differ: 1, Settled: 1, Tried: 1})
	if got := e.newPages(t)[logID(changed, 1)]; got != "seed" {
		t.Errorf("new %s = %q after the repair, want %q", logID(changed, 1), got, "seed")
	}
}
