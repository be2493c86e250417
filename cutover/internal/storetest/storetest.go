// Package storetest checks a phases.Store against its contract, for each
// store's implementation to run against its emulator.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
)

// Run checks s: moves follow the rules, at the store's time; a move and
// its audit record are one transaction (a refused move leaves neither);
// compare-and-set on the version; of two racing moves exactly one wins;
// spans come back as ranges; migrations are apart.
func Run(t *testing.T, s phases.Store) {
	ctx := context.Background()
	mig := fmt.Sprintf("storetest-%d", time.Now().UnixNano())
	hold := phases.Rules{DualWriteHold: 1500 * time.Millisecond}
	move := func(cohorts string, to phases.Phase, why string) (*phases.Map, phases.Audit, error) {
		rs, err := cohort.Parse(cohorts, cohort.DefaultBuckets)
		if err != nil {
			t.Fatal(err)
		}
		return s.Move(ctx, phases.Move{Migration: mig, Cohorts: rs, To: to, Who: "tester", Why: why, Rules: hold})
	}
	mustMove := func(cohorts string, to phases.Phase) *phases.Map {
		t.Helper()
		m, _, err := move(cohorts, to, "test")
		if err != nil {
			t.Fatalf("move %s to %s: %v", cohorts, to, err)
		}
		return m
	}
	refused := func(cohorts string, to phases.Phase, want string) {
		t.Helper()
		_, _, err := move(cohorts, to, "refused")
		if !errors.Is(err, phases.ErrIllegal) || !strings.Contains(err.Error(), want) {
			t.Errorf("move %s to %s: %v, want ErrIllegal saying %q", cohorts, to, err, want)
		}
	}

	m, err := s.Load(ctx, mig)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != 0 || len(m.Spans) != 0 || m.Phase(42) != phases.Old {
		t.Fatalf("a new migration's map = %+v, want version 0, every cohort old", m)
	}
	m = mustMove("0-99", phases.DualWrite)
	if m.Version != 1 || len(m.Spans) != 1 || m.Spans[0].Range != (cohort.Range{First: 0, Last: 99}) || m.Spans[0].Since.IsZero() {
		t.Errorf("after 0-99 to dual_write: %+v", m)
	}
	// Too early: dual_write must be held for the hold.
	refused("0-99", phases.Backfilled, "dual_write held")
	refused("0-99", phases.ReadNew, "read_new needs verified or shadow")
	refused("100-199", phases.Backfilled, "backfilled needs dual_write")
	time.Sleep(2200 * time.Millisecond) // the hold, with a margin: the emulator may judge a move at its transaction's start
	mustMove("0-49", phases.Backfilled)
	mustMove("0-49", phases.Verified)
	refused("0-49", phases.NewOnly, "new_only needs read_new")
	mustMove("0-49", phases.ReadNew)
	refused("0-49", phases.NewOnly, "read_new held")
	refused("0-49", phases.Old, "roll back to dual_write first")
	time.Sleep(2200 * time.Millisecond) // the hold, with a margin: the emulator may judge a move at its transaction's start
	mustMove("0-49", phases.NewOnly)
	refused("0-49", phases.DualWrite, "reverse backfill")
	mustMove("60-69", phases.Old) // a rollback from dual_write
	m, err = s.Load(ctx, mig)
	if err != nil {
		t.Fatal(err)
	}
	want := "0-49 new_only; 50-59 dual_write; 60-69 old; 70-99 dual_write"
	if got := spans(m); got != want || m.Version != 6 {
		t.Errorf("map %q at version %d, want %q at version 6", got, m.Version, want)
	}
	if m.Phase(55) != phases.DualWrite || m.Phase(5) != phases.NewOnly || m.Phase(65) != phases.Old || m.Phase(5000) != phases.Old {
		t.Errorf("phases of 55, 5, 65, 5000: %s %s %s %s", m.Phase(55), m.Phase(5), m.Phase(65), m.Phase(5000))
	}
	// A move over mixed phases is judged per segment.
	refused("40-59", phases.Old, "reverse backfill")
	// Compare-and-set: a move decided on an older version fails.
	rs, _ := cohort.Parse("200-299", cohort.DefaultBuckets)
	if _, _, err := s.Move(ctx, phases.Move{Migration: mig, Cohorts: rs, To: phases.DualWrite, Version: m.Version - 1}); !errors.Is(err, phases.ErrConflict) {
		t.Errorf("a move on a stale version: %v, want ErrConflict", err)
	}
	// Another number of cohorts is refused.
	if _, _, err := s.Move(ctx, phases.Move{Migration: mig, Buckets: 100, Cohorts: []cohort.Range{{First: 0, Last: 1}}, To: phases.Old}); !errors.Is(err, phases.ErrIllegal) {
		t.Errorf("a move counting 100 cohorts in a migration of 10000: %v, want ErrIllegal", err)
	}
	// Two racing moves of the same cohorts: exactly one wins, with and
	// without a version.
	for _, cas := range []bool{false, true} {
		cur, err := s.Load(ctx, mig)
		if err != nil {
			t.Fatal(err)
		}
		target := phases.Backfilled
		if cas {
			target = phases.Verified
		}
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mv := phases.Move{Migration: mig, Cohorts: []cohort.Range{{First: 70, Last: 99}}, To: target, Who: fmt.Sprintf("racer-%d", i), Rules: hold}
				if cas {
					mv.Version = cur.Version
				}
				_, _, errs[i] = s.Move(ctx, mv)
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case errors.Is(err, phases.ErrIllegal), errors.Is(err, phases.ErrConflict):
			default:
				t.Errorf("a racing move failed otherwise: %v", err)
			}
		}
		if won != 1 {
			t.Errorf("cas %v: %d of 4 racing moves won (%v), want exactly 1", cas, won, errs)
		}
	}
	// The audit: one record per move that happened, in order, none for
	// the refused ones.
	audits, err := s.Audits(ctx, mig)
	if err != nil {
		t.Fatal(err)
	}
	if len(audits) != 8 {
		t.Fatalf("%d audit records, want 8 (6 moves and the 2 race winners): %+v", len(audits), audits)
	}
	for i, a := range audits {
		if a.Version != int64(i+1) || a.At.IsZero() || a.Migration != mig {
			t.Errorf("audit %d: %+v", i, a)
		}
		if i > 0 && a.At.Before(audits[i-1].At) {
			t.Errorf("audit %d at %s before audit %d at %s", i, a.At, i-1, audits[i-1].At)
		}
	}
	first, fifth := audits[0], audits[4]
	if first.Cohorts != "0-99" || first.From != "old" || first.To != phases.DualWrite || first.Who != "tester" || first.Why != "test" {
		t.Errorf("first audit %+v, want 0-99 old to dual_write by tester", first)
	}
	if fifth.Cohorts != "0-49" || fifth.From != "read_new" || fifth.To != phases.NewOnly {
		t.Errorf("fifth audit %+v, want 0-49 read_new to new_only", fifth)
	}
	// Forced moves skip the rules and say so.
	if _, a, err := s.Move(ctx, phases.Move{Migration: mig, Cohorts: []cohort.Range{{First: 0, Last: 9}}, To: phases.DualWrite, Force: true, Who: "op", Why: "forced"}); err != nil || !a.Forced || a.From != "new_only" {
		t.Errorf("a forced move: %+v, %v", a, err)
	}
	// Migrations are apart.
	other, err := s.Load(ctx, mig+"-other")
	if err != nil || other.Version != 0 || len(other.Spans) != 0 {
		t.Errorf("another migration: %+v, %v", other, err)
	}
	backfill(t, s, mig+"-backfill", hold)
	cleanup(t, s, mig+"-cleanup")
}

// cleanup checks PlanCleanup, Note and FinishCleanup on s: only cohorts
// in done are planned (unless forced), a note leaves the phases as they
// are, counts as a version (a move decided before it conflicts) and is
// read back as a note; a refused note writes nothing.
func cleanup(t *testing.T, s phases.Store, mig string) {
	t.Helper()
	ctx := context.Background()
	rs := func(text string) []cohort.Range { return ranges(t, text) }
	for _, mv := range []struct {
		cohorts string
		to      phases.Phase
	}{{"0-9", phases.Done}, {"10-19", phases.NewOnly}} {
		if _, _, err := s.Move(ctx, phases.Move{Migration: mig, Cohorts: rs(mv.cohorts), To: mv.to, Force: true, Who: "op"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := operator.PlanCleanup(ctx, s, mig, rs("0-9"), false); err != nil {
		t.Errorf("planning a cleanup of done cohorts: %v", err)
	}
	if _, err := operator.PlanCleanup(ctx, s, mig, rs("5-19,30"), false); !errors.Is(err, operator.ErrNotCleanable) || !strings.Contains(err.Error(), "10-19 are new_only; cohorts 30 are old") {
		t.Errorf("planning a cleanup of cohorts in new_only and old: %v, want ErrNotCleanable naming them with their phases", err)
	}
	if _, err := operator.PlanCleanup(ctx, s, mig, rs("5-19,30"), true); err != nil {
		t.Errorf("a forced plan: %v", err)
	}
	before, err := s.Load(ctx, mig)
	if err != nil {
		t.Fatal(err)
	}
	a, err := operator.FinishCleanup(ctx, s, mig, 0, rs("0-9"), "cleaner", "old records deleted", false)
	if err != nil || a.Action != phases.ActionCleanup || a.To != "" || a.From != "done" || a.Cohorts != "0-9" || a.Who != "cleaner" || a.Forced || a.Version != before.Version+1 || a.At.IsZero() {
		t.Fatalf("finishing a cleanup: %+v, %v; want a cleanup note of 0-9 from done at version %d", a, err, before.Version+1)
	}
	after, err := s.Load(ctx, mig)
	if err != nil {
		t.Fatal(err)
	}
	if spans(after) != spans(before) || after.Version != before.Version+1 {
		t.Errorf("after a note the map is %q at version %d, want %q at version %d", spans(after), after.Version, spans(before), before.Version+1)
	}
	// A move decided before the note conflicts.
	if _, _, err := s.Move(ctx, phases.Move{Migration: mig, Cohorts: rs("50"), To: phases.DualWrite, Version: before.Version}); !errors.Is(err, phases.ErrConflict) {
		t.Errorf("a move decided before a note: %v, want ErrConflict", err)
	}
	// Refused notes write nothing.
	for _, n := range []phases.Note{
		{Migration: mig, Cohorts: rs("0-9"), Action: "done"},
		{Migration: mig, Cohorts: rs("0-9")},
		{Migration: mig, Action: phases.ActionCleanup},
		{Migration: mig, Buckets: 100, Cohorts: rs("0-9"), Action: phases.ActionCleanup},
	} {
		if _, err := s.Note(ctx, n); !errors.Is(err, phases.ErrIllegal) {
			t.Errorf("note %+v: %v, want ErrIllegal", n, err)
		}
	}
	// A forced cleanup says so; one whose cohorts are not done, unforced,
	// is recorded and reported.
	if a, err := operator.FinishCleanup(ctx, s, mig, 0, rs("10-19"), "cleaner", "", true); err != nil || !a.Forced || a.From != "new_only" {
		t.Errorf("a forced cleanup of new_only cohorts: %+v, %v", a, err)
	}
	if a, err := operator.FinishCleanup(ctx, s, mig, 0, rs("5-14"), "cleaner", "", false); !errors.Is(err, phases.ErrConflict) || a.From != "5-9 done; 10-14 new_only" {
		t.Errorf("an unforced cleanup of cohorts moved out of done: %+v, %v; want the record and ErrConflict", a, err)
	}
	audits, err := s.Audits(ctx, mig)
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for i, a := range audits {
		if a.Version != int64(i+1) {
			t.Errorf("audit %d has version %d", i, a.Version)
		}
		if a.Action != "" {
			notes = append(notes, fmt.Sprintf("%s %s %s from %s", a.Action, a.To, a.Cohorts, a.From))
		}
	}
	if got, want := strings.Join(notes, "; "), "cleanup  0-9 from done; cleanup  10-19 from new_only; cleanup  5-14 from 5-9 done; 10-14 new_only"; got != want || len(audits) != 5 {
		t.Errorf("%d audit records with notes %q; want 5 with %q", len(audits), got, want)
	}
}

// backfill checks PlanBackfill and FinishBackfill on s: only cohorts held
// in dual_write are planned (each with its own Since), a move of other
// cohorts during the backfill does not stop its finish, a cohort rolled
// back and moved again does.
func backfill(t *testing.T, s phases.Store, mig string, hold phases.Rules) {
	t.Helper()
	ctx := context.Background()
	rs := func(text string) []cohort.Range { return ranges(t, text) }
	move := func(text string, to phases.Phase) {
		t.Helper()
		if _, _, err := s.Move(ctx, phases.Move{Migration: mig, Cohorts: rs(text), To: to, Who: "op", Rules: hold}); err != nil {
			t.Fatalf("move %s to %s: %v", text, to, err)
		}
	}
	move("0-9", phases.DualWrite)
	time.Sleep(20 * time.Millisecond)
	move("10-19", phases.DualWrite)
	if _, _, err := operator.PlanBackfill(ctx, s, mig, rs("0-19"), false, hold, time.Now()); !errors.Is(err, operator.ErrNotBackfillable) || !strings.Contains(err.Error(), "retry after") {
		t.Errorf("planning a backfill before the hold: %v, want ErrNotBackfillable saying when to retry", err)
	}
	time.Sleep(hold.DualWriteHold + 700*time.Millisecond)
	if _, _, err := operator.PlanBackfill(ctx, s, mig, rs("0-20"), false, hold, time.Now()); !errors.Is(err, operator.ErrNotBackfillable) || !strings.Contains(err.Error(), "20 are old") {
		t.Errorf("planning a backfill with cohort 20 (old): %v, want ErrNotBackfillable naming it", err)
	}
	b, _, err := operator.PlanBackfill(ctx, s, mig, rs("0-19"), false, hold, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Spans) != 2 || b.Spans[0].Since.Equal(b.Spans[1].Since) || cohort.Format(b.Cohorts()) != "0-19" {
		t.Fatalf("backfill plan %+v: want 0-9 and 10-19 with their own times", b)
	}
	move("50-59", phases.DualWrite) // other cohorts move meanwhile
	_, a, err := operator.FinishBackfill(ctx, s, b, "backfiller", "done", false, hold)
	if err != nil || a.To != phases.Backfilled || a.Cohorts != "0-19" || a.Who != "backfiller" {
		t.Fatalf("finishing the backfill: %+v, %v; want 0-19 moved to backfilled", a, err)
	}
	// A cohort rolled back and moved to dual_write again during a
	// backfill: the finish refuses it.
	time.Sleep(hold.DualWriteHold + 700*time.Millisecond)
	if b, _, err = operator.PlanBackfill(ctx, s, mig, rs("50-59"), false, hold, time.Now()); err != nil {
		t.Fatal(err)
	}
	move("55", phases.Old)
	move("55", phases.DualWrite)
	if _, _, err := operator.FinishBackfill(ctx, s, b, "backfiller", "", false, hold); !errors.Is(err, phases.ErrConflict) || !strings.Contains(err.Error(), "55") {
		t.Errorf("finishing a backfill whose cohort 55 moved meanwhile: %v, want ErrConflict naming it", err)
	}
	// Forced: any phase, said so in the audit.
	b, _, err = operator.PlanBackfill(ctx, s, mig, rs("0-4"), true, hold, time.Now())
	if err != nil || len(b.Spans) != 1 || b.Spans[0].Phase != phases.Backfilled {
		t.Fatalf("a forced plan of backfilled cohorts: %+v, %v", b, err)
	}
}

// ranges parses cohorts and ranges of cohort.DefaultBuckets.
func ranges(t *testing.T, text string) []cohort.Range {
	t.Helper()
	r, err := cohort.Parse(text, cohort.DefaultBuckets)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// spans writes m's spans as "0-49 new_only; 50-99 dual_write", merging
// neighbours of one phase.
func spans(m *phases.Map) string {
	var parts []string
	var last *phases.Span
	for i := range m.Spans {
		s := m.Spans[i]
		if last != nil && last.Phase == s.Phase && last.Last+1 == s.First {
			last.Last = s.Last
			parts[len(parts)-1] = last.Range.String() + " " + string(last.Phase)
			continue
		}
		cp := s
		last = &cp
		parts = append(parts, s.Range.String()+" "+string(s.Phase))
	}
	return strings.Join(parts, "; ")
}
