package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
)

// TestPrintVerifyBounded: a report of 400 cohorts, 200 of them with two
// records missing in new each, prints the totals, at most maxVerifyRows
// rows of cohorts with findings (the rest summed on one row and listed),
// the clean cohorts on one row, and --examples examples in all, not per
// cohort.
func TestPrintVerifyBounded(t *testing.T) {
	var report []operator.VerifyCohort
	for c := range 400 {
		v := operator.VerifyCohort{Cohort: c, Matching: 10}
		if c%2 == 0 {
			v.Missing = 2
			v.Examples.Missing = []string{fmt.Sprintf("k%d-a", c), fmt.Sprintf("k%d-b", c)}
		}
		report = append(report, v)
	}
	report[1].Routed, report[1].RepairLog, report[1].RepairLogRouted = 1, 1, 1
	report[1].Examples.Routed = []string{"routed-key (mismatched)"}
	var out bytes.Buffer
	printVerify(stdio{out: &out}, report, 5)
	s := out.String()
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 32 {
		t.Errorf("%d lines printed, want at most 32:\n%s", len(lines), s)
	}
	for _, want := range []string{
		"rekey: compared 4401 records of 400 cohorts: 4000 matching, 400 missing in new, 0 extra in new, 0 mismatched, 1 logged and routed around",
		"181 more", "199 clean cohorts", "the 201 cohorts with findings or repair-log entries: 0-2,4,6,",
		"cohort 1, logged, routed around: routed-key (mismatched)", "… and 397 more (every key is in the report)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "  cohort "); n != 5 {
		t.Errorf("%d examples printed, want 5:\n%s", n, s)
	}
}

// TestPrintRepair: a repair's report words each side's differences from
// its authoritative store, counts writes in flight as settled on recheck,
// and adds each side up (found = repaired + settled + left, with why a
// difference was left).
func TestPrintRepair(t *testing.T) {
	sides := []operator.RepairSide{
		{Authoritative: "old", Cohorts: []cohort.Range{{First: 0, Last: 49}}, Lacks: 1, Settled: 8, Tried: 1},
		{Authoritative: "new", Cohorts: []cohort.Range{{First: 50, Last: 99}}, Lacks: 6, Extra: 2, Differ: 26, RepairedOld: 28, Unlogged: 4, Tried: 2, Skipped: 1},
	}
	var out bytes.Buffer
	printRepair(stdio{out: &out}, sides, 265)
	s := out.String()
	for _, want := range []string{
		"rekey: cohorts 0-49 (old is authoritative; new is repaired from old): new lacked 1 of old's records, held 0 that old lacks, 0 differed; 8 more settled on recheck (writes in flight)\n",
		"rekey:   9 found = 1 repaired + 8 settled on recheck + 0 left\n",
		"rekey: cohorts 50-99 (new is authoritative; read_new: old is repaired through the repair log): old lacked 6 of new's records, held 2 that new lacks, 26 differed; 0 more settled on recheck (writes in flight)\n",
		"rekey:   34 found = 29 repaired (28 in old from the repair log) + 0 settled on recheck + 5 left: 1 written or deleted by the application since the repair began, 4 not in the repair log as of the repair's start (old's differences; new is authoritative)\n",
		"rekey: 265 repair-log entries cleared; run verify to check\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}
