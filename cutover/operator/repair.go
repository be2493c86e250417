package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
)

// Counters of a repair, besides those of verify and of the sinks.
const (
	// RepairWritten counts the records a repair wrote (missing or
	// different in new); RepairDeleted those it deleted (extra in new).
	RepairWritten = "repair_written"
	RepairDeleted = "repair_deleted"
	// RepairLogCleared counts the repair-log entries a repair cleared.
	RepairLogCleared = "repair_log_cleared"
	// RepairOldWritten counts the records a repair in read_new made in old
	// as new holds them (writes old missed while new was authoritative).
	RepairOldWritten = "repair_old_written"
)

// RepairOptions say what Repair puts right.
type RepairOptions struct {
	Migration string
	Cohorts   []cohort.Range
	// Examples and ReportPath are as for verify: the report says what the
	// repair found (and so put right).
	Examples   int
	ReportPath string
	Who        string
}

// repairable are the phases in which old is authoritative and a repair
// copies old to new.
var repairable = []phases.Phase{phases.DualWrite, phases.Backfilled, phases.Verified, phases.Shadow}

// Repair repairs cohorts of cfg (the job: jobs.Verify with v.Repair): they must be in a phase where
// old is authoritative (dual_write through shadow; from read_new on the
// copy would go the other way, which is the reverse backfill's). It runs
// the verify job with its repairs (see above), then clears the cohorts'
// repair-log entries logged before it began. It returns the report of
// what it found (each difference read again first, as verify does: one
// settled on recheck is left alone), each finding written or deleted
// unless the application touched the record meanwhile (counted as
// backfill_skipped); RepairTallied adds how each ended (RepairSide).
func Repair(ctx context.Context, cfg *config.Config, o RepairOptions, jobs Jobs) ([]VerifyCohort, *migration.Result, error) {
	r, err := RepairTallied(ctx, cfg, o, jobs)
	return r.Report, r.Result, err
}

// RepairOutcome is what a repair found and did: the report (as verify's,
// of what the repair found), the job's result, and the tally of each
// side (RepairSide: the cohorts where old is authoritative, then those
// where new is; only those the repair covered).
type RepairOutcome struct {
	Report []VerifyCohort
	Result *migration.Result
	Sides  []RepairSide
}

// RepairTallied is Repair, returning its tally too.
func RepairTallied(ctx context.Context, cfg *config.Config, o RepairOptions, jobs Jobs) (RepairOutcome, error) {
	var out RepairOutcome
	var err error
	out.Report, out.Result, out.Sides, err = repair(ctx, cfg, o, jobs)
	return out, err
}

func repair(ctx context.Context, cfg *config.Config, o RepairOptions, jobs Jobs) ([]VerifyCohort, *migration.Result, []RepairSide, error) {
	if o.Migration == "" || len(o.Cohorts) == 0 || o.ReportPath == "" {
		return nil, nil, nil, &migration.ConfigError{Err: errors.New("repair needs the migration's name, the cohorts and a report path")}
	}
	if err := migration.Reach(ctx, cfg); err != nil {
		return nil, nil, nil, err
	}
	st, closeStore, err := OpenStore(ctx, cfg.Target, false)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("phase store: %w", err)
	}
	defer closeStore()
	m, err := st.Load(ctx, o.Migration)
	if err != nil {
		return nil, nil, nil, err
	}
	var refused []string
	readNew := map[int]bool{} // cohorts in read_new: only what new missed is repaired
	for _, rg := range cohort.Merge(o.Cohorts) {
		for _, seg := range m.Segments(rg) {
			ok := seg.Phase == phases.ReadNew
			for _, p := range repairable {
				ok = ok || seg.Phase == p
			}
			if !ok {
				refused = append(refused, fmt.Sprintf("%s are %s", seg.Range, seg.Phase))
			}
			if seg.Phase == phases.ReadNew {
				for c := seg.First; c <= seg.Last; c++ {
					readNew[c] = true
				}
			}
		}
	}
	if len(refused) > 0 {
		return nil, nil, nil, fmt.Errorf("repair copies old to new while old is authoritative (dual_write to shadow), and in read_new what the repair log says new missed: cohorts %s", strings.Join(refused, "; cohorts "))
	}
	// The repair's start, less the skew margin for clocks: a mark at or
	// after it is the application's and newer than the repair's reads.
	start := time.Now()
	// since bounds both the marks that stop the repair's writes and the
	// entries it clears: an entry logged after it set its mark's
	// TouchedAt after it too, so the repair left its record alone, and the
	// entry stays for the next repair (clearing it would lose the write
	// new missed: found by the soak, seed 2).
	since := start.Add(-skewOf(cfg))
	// Each span with its phase: in read_new the copy from old is only for
	// what the touched marks say new missed.
	b := phases.Backfill{Migration: o.Migration}
	for _, rg := range cohort.Merge(o.Cohorts) {
		for _, seg := range m.Segments(rg) {
			b.Spans = append(b.Spans, phases.BackfillSpan{First: seg.First, Last: seg.Last, Phase: seg.Phase, Since: since})
		}
	}
	entries, err := RepairsOf(ctx, st, o.Migration)
	if err != nil {
		return nil, nil, nil, err
	}
	// In read_new new is authoritative: only the records whose writes new
	// missed while old was (the entries saying so) are copied from old.
	pending := map[string]bool{}
	all := entries
	var kept []phases.RepairEntry
	for _, e := range entries {
		if !readNew[e.Cohort] {
			kept = append(kept, e)
			continue
		}
		if e.Missed == "new" && e.LoggedAt.Before(since) {
			pending[e.OldKey] = true
			kept = append(kept, e)
		}
	}
	entries = kept
	var readNewRanges []cohort.Range
	for c := range readNew {
		readNewRanges = append(readNewRanges, cohort.Range{First: c, Last: c})
	}
	v := VerifyOptions{Migration: o.Migration, Cohorts: o.Cohorts, Examples: o.Examples, ReportPath: o.ReportPath}
	report, res, _, keys, err := runVerifyWith(ctx, cfg, st, v, jobs, VerifyJob{Repair: &b, RepairReadNew: cohort.Format(cohort.Merge(readNewRanges)), RepairPending: pending}, entries)
	if err != nil {
		return report, res, nil, err
	}
	if d := res.Counters[migration.DeadLettered]; d > 0 {
		return report, res, nil, fmt.Errorf("%d records were dead-lettered; the repair log is kept", d)
	}
	// Writes old missed while new was authoritative: in read_new, old is
	// made as new holds them (cutover.RepairOld); elsewhere they stay in
	// the log (the library reads new for them).
	var missedOld []phases.RepairEntry
	for _, e := range all {
		if readNew[e.Cohort] && e.Missed == "old" && e.LoggedAt.Before(start) {
			missedOld = append(missedOld, e)
		}
	}
	var repairedOld []phases.RepairEntry
	if len(missedOld) > 0 {
		job, err := migration.Resolve(ctx, cfg)
		if err != nil {
			return report, res, nil, err
		}
		if repairedOld, err = repairOld(ctx, job, o.Migration, missedOld); err != nil {
			return report, res, nil, fmt.Errorf("repairing in old %d writes it missed (%d done): %w", len(missedOld), len(repairedOld), err)
		}
	}
	var done []phases.RepairEntry
	in := map[int]bool{}
	for _, rg := range cohort.Merge(o.Cohorts) {
		for c := rg.First; c <= rg.Last; c++ {
			in[c] = true
		}
	}
	for _, e := range entries {
		if in[e.Cohort] && e.LoggedAt.Before(since) && e.Missed != "old" {
			done = append(done, e)
		}
	}
	done = append(done, repairedOld...)
	res.Counters[RepairOldWritten] = int64(len(repairedOld))
	if l, ok := st.(phases.RepairLog); ok {
		if err := l.ClearRepairs(ctx, o.Migration, done); err != nil {
			return report, res, nil, fmt.Errorf("the repair ran, but clearing %d repair-log entries failed: %w", len(done), err)
		}
	}
	res.Counters[RepairLogCleared] = int64(len(done))
	return report, res, TallyRepair(report, keys, readNew, repairedOld, res.Counters[migration.BackfillSkipped]), nil
}

// repairOld opens the application library of job (old's client from the
// environment, closed at the end) and repairs in old the writes of
// entries it missed (each Missed "old"), through the library's RepairOld.
func repairOld(ctx context.Context, job *migration.Job, migrationName string, entries []phases.RepairEntry) ([]phases.RepairEntry, error) {
	lib, closeLib, err := openLibrary(ctx, job, cutover.Options{Migration: migrationName})
	if err != nil {
		return nil, err
	}
	defer closeLib()
	return lib.RepairOld(ctx, entries)
}
