package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/migration"
)

// TestCohortBackfill runs `rekey run --cohorts` (operator.Backfill) on
// both stores while the application library has written during
// dual_write. The backfill must copy exactly its cohorts' records, leave
// a record the application wrote after the backfill's read of old as the
// application wrote it, not bring back a record the application deleted,
// replace what new holds from an earlier dual_write rolled back since,
// refuse cohorts that are not in dual_write (writing nothing), and move
// its cohorts to backfilled. A Spanner source filters the cohorts in its
// query: it reads none of the other cohorts' rows. A source.read_time in
// the config is not used: the backfill reads old live.
func TestCohortBackfill(t *testing.T) {
	for _, se := range slices.Concat(stagedEnvs, stagedCross) {
		t.Run(se.name, func(t *testing.T) {
			ctx := context.Background()
			e := se.make(t)
			const seqs = 3
			var users []string
			byCohort := map[int][]string{}
			for i := range 40 {
				u := fmt.Sprintf("bf-user-%d", i)
				users = append(users, u)
				byCohort[cohortOf(u)] = append(byCohort[cohortOf(u)], u)
			}
			// The backfilled cohorts: those of the first 15 users.
			sel, in := cohortsOf(users[:15])
			var outside string // a user of a cohort not backfilled
			for _, u := range users {
				if !in[cohortOf(u)] {
					outside = u
					break
				}
			}
			if outside == "" {
				t.Fatal("every user's cohort is selected")
			}
			for _, u := range users {
				for q := range int64(seqs) {
					e.putOld(t, e.rec(u, q, "seed"))
				}
			}
			seeded := time.Now().UTC()              // after the seed, before any later write
			x, y, z := users[0], users[1], users[2] // written, deleted, written in an earlier dual_write
			if cohortOf(z) == cohortOf(x) || cohortOf(z) == cohortOf(y) {
				t.Fatalf("users %s, %s and %s share a cohort; pick others", x, y, z)
			}

			// An earlier dual_write of z's cohort, rolled back: new keeps
			// z/0 = "first" with a touched mark from then.
			e.move(t, one(cohortOf(z)), phases.DualWrite)
			e.waitSeen(t, cohortOf(z), phases.DualWrite)
			waitHold()
			if err := e.app.Write(ctx, e.rec(z, 0, "first")); err != nil {
				t.Fatal(err)
			}
			e.move(t, one(cohortOf(z)), phases.Old)
			e.waitSeen(t, cohortOf(z), phases.Old)
			if err := e.app.Write(ctx, e.rec(z, 0, "second")); err != nil { // old only
				t.Fatal(err)
			}
			if got := e.newPages(t)[logID(z, 0)]; got != "first" {
				t.Fatalf("new holds %s = %q before the backfill, want the earlier dual write's %q", logID(z, 0), got, "first")
			}

			e.move(t, sel, phases.DualWrite)
			for c := range in {
				e.waitSeen(t, c, phases.DualWrite)
			}
			waitHold()
			// x/0: the application's dual write, then old as a backfill
			// may have read it before that write (an older value).
			if err := e.app.Write(ctx, e.rec(x, 0, "app")); err != nil {
				t.Fatal(err)
			}
			e.putOld(t, e.rec(x, 0, "stale"))
			// y/1: the application's delete, then old as read before it.
			if err := e.app.Delete(ctx, e.key(y, 1)); err != nil {
				t.Fatal(err)
			}
			e.putOld(t, e.rec(y, 1, "stale"))
			before := e.newPages(t)
			// A read time in the config does not hold for a backfill,
			// which must read old live (the cutover argument): read at
			// seeded, it would copy z/0 and x/0 as seeded.
			time.Sleep(50 * time.Millisecond)
			e.cfg.Source.ReadTime = seeded.Format(time.RFC3339Nano)

			// A cohort in old is refused, and nothing is written.
			_, _, err := e.backfill(t, "prism", append(slices.Clone(sel), one(cohortOf(outside))...), false)
			if !errors.Is(err, operator.ErrNotBackfillable) {
				t.Fatalf("backfill with cohort %d (old): %v, want ErrNotBackfillable", cohortOf(outside), err)
			}
			if after := e.newPages(t); len(after) != len(before) {
				t.Fatalf("a refused backfill changed new: %d records, %d before", len(after), len(before))
			}

			res, a, err := e.backfill(t, "prism", sel, false)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("backfill of cohorts %s: %s", cohort.Format(sel), res.Counters)
			if a == nil || a.To != phases.Backfilled || a.Who != "test-backfill" || a.Cohorts != cohort.Format(sel) {
				t.Errorf("audit %+v, want cohorts %s moved to backfilled by test-backfill", a, cohort.Format(sel))
			}

			// What new must hold: every record of the selected cohorts as
			// old holds it, but x/0 as the application wrote it, no y/1,
			// z/0 as old holds it now; nothing of other cohorts.
			old := e.oldPages(t)
			want := map[string]string{}
			selected := 0
			for _, u := range users {
				if !in[cohortOf(u)] {
					continue
				}
				for q := range int64(seqs) {
					selected++
					want[logID(u, q)] = old[logID(u, q)]
				}
			}
			want[logID(x, 0)] = "app"
			delete(want, logID(y, 1))
			if want[logID(z, 0)] != "second" {
				t.Fatalf("old holds %s = %q, want %q", logID(z, 0), want[logID(z, 0)], "second")
			}
			got := e.newPages(t)
			for k, v := range want {
				if got[k] != v {
					t.Errorf("new %s = %q, want %q", k, got[k], v)
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("new holds %s = %q, which the backfill must not have copied", k, got[k])
				}
			}
			c := res.Counters
			if c[migration.Written] != int64(selected-2) || c[migration.BackfillSkipped] != 2 || c[migration.DeadLettered] != 0 {
				t.Errorf("counters %s; want written=%d backfill_skipped=2 dead_lettered=0", c, selected-2)
			}
			others := int64(len(users)*seqs - selected)
			switch e.store {
			case "spanner": // the cohort filter is in the query
				if c[migration.Read] != int64(selected) || c[migration.CohortOther] != 0 {
					t.Errorf("counters %s; want read=%d cohort_other=0 (the filter pushed into the query)", c, selected)
				}
			default:
				if c[migration.Read] != int64(len(users)*seqs) || c[migration.CohortOther] != others {
					t.Errorf("counters %s; want read=%d cohort_other=%d", c, len(users)*seqs, others)
				}
			}
			m, err := e.phases.Load(ctx, e.migration)
			if err != nil {
				t.Fatal(err)
			}
			for cc := range in {
				if p := m.Phase(cc); p != phases.Backfilled {
					t.Errorf("cohort %d is %s, want backfilled", cc, p)
				}
			}
			if p := m.Phase(cohortOf(outside)); p != phases.Old {
				t.Errorf("cohort %d (not backfilled) is %s, want old", cohortOf(outside), p)
			}
			// Backfilled cohorts are not backfilled again without --force.
			if _, _, err := e.backfill(t, "prism", sel, false); !errors.Is(err, operator.ErrNotBackfillable) {
				t.Errorf("a second backfill of backfilled cohorts: %v, want ErrNotBackfillable", err)
			}
		})
	}
}

// waitHold waits for the phase-cache TTL plus skew: every instance acts
// on a move by then (with a margin: the holds are measured in the
// store's time, this in the machine's).
func waitHold() { time.Sleep(stagedHold + 700*time.Millisecond) }
