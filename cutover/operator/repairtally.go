package operator

import (
	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/phases"
)

// RepairSide is a repair's tally of the cohorts in which one store is
// authoritative, from that store's side: while old is (dual_write to
// shadow) new is repaired from old; in read_new new is, and old is
// repaired from the repair log (the writes it missed, as new holds them),
// while what the log says new missed while old was authoritative is
// copied from old. Every difference found is repaired, settled on
// recheck (a write in flight: old and new agreed when read again) or left
// (Found = Repaired + Settled + Left).
type RepairSide struct {
	// Authoritative is "old" or "new"; Cohorts are the side's.
	Authoritative string
	Cohorts       []cohort.Range
	// Lacks counts the authoritative store's records the other lacked,
	// Extra the other's records the authoritative store lacks, Differ
	// the records that differed; Settled the differences that settled on
	// recheck.
	Lacks, Extra, Differ, Settled int
	// Tried counts the differences the repair wrote or deleted in new, of
	// which Skipped it left as the application wrote them since the
	// repair began (its marks say so). Skipped is -1 when both sides
	// tried: the job counts what it left of both together (SkippedBoth).
	Tried, Skipped, SkippedBoth int
	// RepairedOld counts the differences repaired in old from the repair
	// log; Unlogged those left in read_new with no entry for them logged
	// before the repair began (new is authoritative; old's difference
	// stays until a repair finds it logged, or a reverse backfill).
	RepairedOld, Unlogged int
}

// Found is the side's differences, settled ones included.
func (s RepairSide) Found() int { return s.Lacks + s.Extra + s.Differ + s.Settled }

// Repaired is the side's differences the repair put right (the writes
// and deletes it left not counted, when the side's are known).
func (s RepairSide) Repaired() int { return s.Tried - max(s.Skipped, 0) + s.RepairedOld }

// Left is the side's differences the repair left (with Skipped -1, the
// side's skipped writes are not among them: see SkippedBoth).
func (s RepairSide) Left() int { return max(s.Skipped, 0) + s.Unlogged }

// TallyRepair tallies a repair per side (the cohorts where old is
// authoritative, then those in read_new), from its report, its differing
// keys, the read_new cohorts, the entries it repaired in old and the
// writes and deletes it left as the application wrote them since
// (skipped, the job's backfill_skipped). Sides without cohorts are left
// out.
func TallyRepair(report []VerifyCohort, keys []KeyLine, readNew map[int]bool, repairedOld []phases.RepairEntry, skipped int64) []RepairSide {
	sides := [2]RepairSide{{Authoritative: "old"}, {Authoritative: "new"}}
	var ranges [2][]cohort.Range
	side := func(c int) int {
		if readNew[c] {
			return 1
		}
		return 0
	}
	for _, v := range report {
		i := side(v.Cohort)
		s := &sides[i]
		ranges[i] = append(ranges[i], cohort.Range{First: v.Cohort, Last: v.Cohort})
		if i == 0 {
			s.Lacks, s.Extra = s.Lacks+v.Missing, s.Extra+v.Extra
		} else {
			s.Lacks, s.Extra = s.Lacks+v.Extra, s.Extra+v.Missing
		}
		s.Differ += v.Mismatched
		s.Settled += v.Settled
		s.Tried += v.RepairTried
	}
	type rec struct {
		cohort int
		key    string
	}
	inOld := map[rec]bool{}
	for _, e := range repairedOld {
		inOld[rec{e.Cohort, e.OldKey}] = true
	}
	for _, k := range keys {
		if k.Repair != RepairLeft {
			continue
		}
		s := &sides[side(k.Cohort)]
		if k.OldKey != "" && inOld[rec{k.Cohort, k.OldKey}] {
			s.RepairedOld++
		} else {
			s.Unlogged++
		}
	}
	switch {
	case sides[0].Tried > 0 && sides[1].Tried > 0 && skipped > 0:
		for i := range sides {
			sides[i].Skipped, sides[i].SkippedBoth = -1, int(skipped)
		}
	case sides[1].Tried > 0:
		sides[1].Skipped = int(skipped)
	default:
		sides[0].Skipped = int(skipped)
	}
	var out []RepairSide
	for i, s := range sides {
		if len(ranges[i]) == 0 {
			continue
		}
		s.Cohorts = cohort.Merge(ranges[i])
		out = append(out, s)
	}
	return out
}
