package integration

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/pipeline"
)

// stagedSeed fills old with n users' logs 0..seqs-1 and returns the users
// and the cohorts they are in.
func stagedSeed(t *testing.T, e *stagedEnv, prefix string, n, seqs int) ([]string, []cohort.Range) {
	t.Helper()
	var users []string
	var rs []cohort.Range
	for i := range n {
		u := fmt.Sprintf("%s-%d", prefix, i)
		if e.users != nil {
			u = e.users(prefix, i)
		}
		users = append(users, u)
		rs = append(rs, one(cohortOf(u))...)
		for q := range int64(seqs) {
			e.putOld(t, e.rec(u, q, "seed"))
		}
	}
	return users, cohort.Merge(rs)
}

// verify runs operator.Verify of rs and returns the report by cohort.
func (e *stagedEnv) verify(t *testing.T, rs []cohort.Range, mark bool) (map[int]operator.VerifyCohort, *phases.Audit, error) {
	t.Helper()
	report, _, a, err := operator.Verify(context.Background(), e.cfg, operator.VerifyOptions{Migration: e.migration, Cohorts: rs, Examples: 3, ReportPath: filepath.Join(t.TempDir(), "verify.jsonl"), Mark: mark, Who: "test-verify"}, pipeline.Runner{Runner: cohortRunner})
	by := map[int]operator.VerifyCohort{}
	for _, v := range report {
		by[v.Cohort] = v
	}
	if err == nil && len(report) != cohort.Count(rs) {
		t.Errorf("the report has %d cohorts, want %d", len(report), cohort.Count(rs))
	}
	return by, a, err
}

// TestVerify backfills cohorts, verifies them clean, then changes new
// behind the library's back — a record deleted (missing in new), a value
// changed (mismatched), an old record deleted (extra in new) — and checks
// that verify reports each in its cohort, with the key, and refuses to
// mark them verified; a dual write whose second write fails (injected by
// the commit tap) shows in the repair log. Repair puts everything right
// (written, deleted, the log cleared), and a verify with --mark after it
// is clean and moves the cohorts to verified.
func TestVerify(t *testing.T) {
	for _, se := range slices.Concat(stagedEnvs, stagedCross) {
		t.Run(se.name, func(t *testing.T) {
			ctx := context.Background()
			e := se.make(t)
			const seqs = 3
			users, rs := stagedSeed(t, e, "vf-user", 12, seqs)
			e.move(t, rs, phases.DualWrite)
			waitHold()
			if _, _, err := e.backfill(t, cohortRunner, rs, false); err != nil {
				t.Fatal(err)
			}
			by, _, err := e.verify(t, rs, false)
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			for c, v := range by {
				if !v.Clean() {
					t.Errorf("cohort %d after the backfill: %+v, want clean", c, v)
				}
				total += v.Matching
			}
			if total != len(users)*seqs {
				t.Errorf("%d records match, want %d", total, len(users)*seqs)
			}

			missing, changed, extra := users[0], users[1], users[2]
			e.changeNew(t, missing, 0, "", true)
			e.changeNew(t, changed, 1, "changed", false)
			e.deleteOld(t, extra, 2)
			by, _, err = e.verify(t, rs, true)
			if !errors.Is(err, operator.ErrNotClean) {
				t.Errorf("verify --mark of unclean cohorts: %v, want ErrNotClean", err)
			}
			want := map[int][3]int{} // cohort → missing, mismatched, extra
			for i, u := range []string{missing, changed, extra} {
				w := want[cohortOf(u)]
				w[i]++
				want[cohortOf(u)] = w
			}
			for c, v := range by {
				w := want[c]
				if v.Missing != w[0] || v.Mismatched != w[1] || v.Extra != w[2] {
					t.Errorf("cohort %d: missing %d, mismatched %d, extra %d; want %v", c, v.Missing, v.Mismatched, v.Extra, w)
				}
			}
			if v := by[cohortOf(missing)]; len(v.Examples.Missing) != 1 || !strings.Contains(v.Examples.Missing[0], missing) {
				t.Errorf("cohort %d's missing examples %q, want %s's key", cohortOf(missing), v.Examples.Missing, missing)
			}
			if v := by[cohortOf(changed)]; len(v.Examples.Mismatched) != 1 || !strings.Contains(v.Examples.Mismatched[0], changed) || !strings.Contains(v.Examples.Mismatched[0], "changed") {
				t.Errorf("cohort %d's mismatch examples %q, want %s's key and the difference", cohortOf(changed), v.Examples.Mismatched, changed)
			}
			if v := by[cohortOf(extra)]; len(v.Examples.Extra) != 1 {
				t.Errorf("cohort %d's extra examples %q, want one", cohortOf(extra), v.Examples.Extra)
			}
			m, err := e.phases.Load(ctx, e.migration)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				if p := m.Phase(r.First); p != phases.Backfilled {
					t.Errorf("cohort %d is %s after a refused mark, want backfilled", r.First, p)
				}
			}

			// A dual write whose second write fails: old holds it, new
			// does not, the repair log says so (old and new in two
			// databases, a tap in front of new's; Datastore's one
			// database writes both in one transaction).
			var logged string
			if e.tap != nil {
				logged = users[3]
				e.tap.SetFaults(committap.Faults{Rate: 1, Kinds: []committap.Fault{{Code: codes.PermissionDenied}}, Tables: e.faultTables})
				err := e.app.Write(ctx, e.rec(logged, 0, "logged"))
				e.tap.SetFaults(committap.Faults{})
				if err != nil {
					t.Fatalf("a dual write whose second write failed: %v, want success (old is authoritative)", err)
				}
				by, _, err = e.verify(t, rs, false)
				if err != nil {
					t.Fatal(err)
				}
				if v := by[cohortOf(logged)]; v.RepairLog != 1 || len(v.Examples.RepairLog) != 1 || !strings.Contains(v.Examples.RepairLog[0], logged) {
					t.Errorf("cohort %d: repair log %d %q, want the failed write of %s", cohortOf(logged), v.RepairLog, v.Examples.RepairLog, logged)
				}
			}

			var early migration.Counters
			if logged != "" {
				// A repair within the skew margin of the failed write:
				// the logging touched the mark after the repair's Since,
				// so the repair leaves the record alone, and must leave
				// its entry in the log too (clearing it lost the write
				// new missed: the soak, seed 2).
				cfg := *e.cfg
				cfg.Cohort.Skew = time.Hour
				r, err := operator.RepairTallied(ctx, &cfg, operator.RepairOptions{Migration: e.migration, Cohorts: rs, ReportPath: filepath.Join(t.TempDir(), "early.jsonl"), Who: "test-repair"}, pipeline.Runner{Runner: cohortRunner})
				if err != nil {
					t.Fatal(err)
				}
				res := r.Result
				early = res.Counters
				// From old's side: new lacked the deleted record, held
				// one old lacks, the changed and the logged ones
				// differed; the logged one was left (its mark is after
				// the repair's start).
				checkRepairTally(t, r.Sides, operator.RepairSide{Authoritative: "old", Lacks: 1, Extra: 1, Differ: 2, Tried: 4, Skipped: 1})
				if c := res.Counters[operator.RepairLogCleared]; c != 0 {
					t.Errorf("a repair within the skew margin of a logged write cleared %d entries, want 0", c)
				}
				if got := e.newPages(t)[logID(logged, 0)]; got == "logged" {
					t.Errorf("new %s = %q after a repair whose Since is after the log, want it left alone", logID(logged, 0), got)
				}
				by, _, err = e.verify(t, rs, false)
				if err != nil {
					t.Fatal(err)
				}
				if v := by[cohortOf(logged)]; v.RepairLog != 1 {
					t.Errorf("cohort %d: repair log %d after the early repair, want the entry kept", cohortOf(logged), v.RepairLog)
				}
			}

			// Repair puts it all right; a verify after it is clean, and
			// marks.
			r, err := operator.RepairTallied(ctx, e.cfg, operator.RepairOptions{Migration: e.migration, Cohorts: rs, ReportPath: filepath.Join(t.TempDir(), "repair.jsonl"), Who: "test-repair"}, pipeline.Runner{Runner: cohortRunner})
			if err != nil {
				t.Fatal(err)
			}
			res := r.Result
			if logged != "" {
				checkRepairTally(t, r.Sides, operator.RepairSide{Authoritative: "old", Differ: 1, Tried: 1})
			} else {
				checkRepairTally(t, r.Sides, operator.RepairSide{Authoritative: "old", Lacks: 1, Extra: 1, Differ: 1, Tried: 3})
			}
			t.Logf("repair: %s (before it, within the margin: %v)", res.Counters, early)
			wantWritten, wantCleared := int64(2), int64(0)
			if logged != "" {
				wantWritten, wantCleared = 3, 1
			}
			// The early repair's skipped write (the logged record) is in
			// its repair_written too, and in its backfill_skipped.
			if c := res.Counters; c[operator.RepairWritten]+early[operator.RepairWritten]-early[migration.BackfillSkipped] != wantWritten || c[operator.RepairDeleted]+early[operator.RepairDeleted] != 1 || c[operator.RepairLogCleared] != wantCleared {
				t.Errorf("repair counters %s (and %v before); want %s=%d %s=1 %s=%d in all", c, early, operator.RepairWritten, wantWritten, operator.RepairDeleted, operator.RepairLogCleared, wantCleared)
			}
			by, a, err := e.verify(t, rs, true)
			if err != nil {
				for c, v := range by {
					if !v.Clean() {
						t.Logf("cohort %d: %+v", c, v)
					}
				}
				t.Fatal(err)
			}
			if a == nil || a.To != phases.Verified || a.Cohorts != cohort.Format(rs) {
				t.Errorf("verify --mark: audit %+v, want cohorts %s to verified", a, cohort.Format(rs))
			}
			if logged != "" && e.newPages(t)[logID(logged, 0)] != "logged" {
				t.Errorf("new %s = %q after the repair, want %q", logID(logged, 0), e.newPages(t)[logID(logged, 0)], "logged")
			}
			if _, ok := e.newPages(t)[logID(extra, 2)]; ok {
				t.Errorf("new still holds %s, which old does not", logID(extra, 2))
			}
		})
	}
}

// checkRepairTally checks a repair's tally: one side, as want (but its
// cohorts and settled differences: none here, as no write is in flight),
// found = repaired + settled + left.
func checkRepairTally(t *testing.T, sides []operator.RepairSide, want operator.RepairSide) {
	t.Helper()
	if len(sides) != 1 {
		t.Fatalf("repair tally %+v, want one side", sides)
	}
	got := sides[0]
	got.Cohorts = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("repair tally %+v, want %+v", got, want)
	}
	if got.Found() != got.Repaired()+got.Settled+got.Left() {
		t.Errorf("repair tally %+v: %d found, %d repaired + %d settled + %d left", got, got.Found(), got.Repaired(), got.Settled, got.Left())
	}
}
