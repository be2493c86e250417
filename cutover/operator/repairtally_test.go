package operator

import (
	"fmt"
	"testing"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/phases"
)

// TestTallyRepair: a repair's differences are tallied per side from the
// authoritative store's side, and each side's found is repaired +
// settled + left: where old is authoritative, 9 differences of which 8
// settled on recheck and 1 written in new; in read_new, 2 missing and 6
// extra in new and 26 mismatched are old's (it holds 2 new lacks, lacks
// 6), 30 of them repaired in old from the repair log and 4 left, not in
// it.
func TestTallyRepair(t *testing.T) {
	report := []VerifyCohort{
		{Cohort: 1, Matching: 5, Missing: 1, Settled: 8, RepairTried: 1},
		{Cohort: 2, Matching: 3, Missing: 2, Extra: 6, Mismatched: 26},
		{Cohort: 3, Matching: 4},
	}
	keys := []KeyLine{{Cohort: 1, Finding: "missing_in_new", Key: "a", OldKey: "a", Repair: RepairTried}}
	var fixed []phases.RepairEntry
	for i := range 34 {
		k := fmt.Sprintf("k%d", i)
		keys = append(keys, KeyLine{Cohort: 2, Finding: "mismatched", Key: k, OldKey: k, Repair: RepairLeft})
		if i < 30 {
			fixed = append(fixed, phases.RepairEntry{Cohort: 2, OldKey: k, Missed: "old"})
		}
	}
	fixed = append(fixed, phases.RepairEntry{Cohort: 3, OldKey: "k31", Missed: "old"}) // another cohort's key
	sides := TallyRepair(report, keys, map[int]bool{2: true}, fixed, 0)
	if len(sides) != 2 {
		t.Fatalf("%d sides, want 2: %+v", len(sides), sides)
	}
	old, nw := sides[0], sides[1]
	if old.Authoritative != "old" || cohort.Format(old.Cohorts) != "1,3" || old.Lacks != 1 || old.Extra != 0 || old.Differ != 0 || old.Settled != 8 ||
		old.Found() != 9 || old.Repaired() != 1 || old.Left() != 0 {
		t.Errorf("old's side %+v (found %d, repaired %d, left %d), want 1 lacked of 9 found, 8 settled, 1 repaired", old, old.Found(), old.Repaired(), old.Left())
	}
	if nw.Authoritative != "new" || cohort.Format(nw.Cohorts) != "2" || nw.Lacks != 6 || nw.Extra != 2 || nw.Differ != 26 ||
		nw.RepairedOld != 30 || nw.Unlogged != 4 || nw.Found() != 34 || nw.Repaired() != 30 || nw.Left() != 4 {
		t.Errorf("new's side %+v (found %d, repaired %d, left %d), want old lacking 6, holding 2 extra, 26 differing, 30 repaired from the log, 4 left", nw, nw.Found(), nw.Repaired(), nw.Left())
	}
	for _, s := range sides {
		if s.Found() != s.Repaired()+s.Settled+s.Left() {
			t.Errorf("%s's side: %d found != %d repaired + %d settled + %d left", s.Authoritative, s.Found(), s.Repaired(), s.Settled, s.Left())
		}
	}

	// Writes left as the application wrote them since: the side's when
	// only one side wrote; of both together when both did.
	one := TallyRepair(report[:1], keys[:1], nil, nil, 1)
	if s := one[0]; s.Skipped != 1 || s.Repaired() != 0 || s.Left() != 1 || s.Found() != s.Repaired()+s.Settled+s.Left() {
		t.Errorf("a repair whose one write was left: %+v (repaired %d, left %d)", s, s.Repaired(), s.Left())
	}
	report[1].RepairTried = 1
	both := TallyRepair(report, keys, map[int]bool{2: true}, fixed, 1)
	if both[0].Skipped != -1 || both[1].Skipped != -1 || both[0].SkippedBoth != 1 {
		t.Errorf("both sides wrote, 1 left: %+v, want Skipped -1 and SkippedBoth 1 on each", both)
	}
}
