package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/internal/reversecopy"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/rewrite"
)

// CheckReverse refuses a job a reverse backfill cannot run: what
// CheckBackfill refuses, and a rewrite Invert cannot undo (no inverse and
// no kept original key; references, or references_to another run's kind,
// whose strategy has no inverse; a pair of stores with no reverse
// backfill, Spanner → Datastore).
func CheckReverse(j *migration.Job) error {
	if err := CheckBackfill(j); err != nil {
		return err
	}
	var problems []string
	if _, err := ReverseFor(j); err != nil {
		problems = append(problems, err.Error())
	}
	if st, err := rewrite.New(j.Spec.Strategy); err == nil && !st.Info().Invertible && j.Spec.KeepOriginalKey == "" {
		problems = append(problems, fmt.Sprintf("strategy %s has no inverse and keep_original_key is not set", st.Info().Name))
	}
	if props := j.Spec.UninvertibleReferencesTo(); len(props) > 0 {
		problems = append(problems, fmt.Sprintf("references_to %s cannot be given back (no inverse)", strings.Join(props, ", ")))
	}
	if st, err := rewrite.New(j.Spec.Strategy); err == nil && !st.Info().Invertible && len(j.Spec.References) > 0 {
		problems = append(problems, fmt.Sprintf("the migration rewrites references, which strategy %s cannot give back (no inverse)", st.Info().Name))
	}
	if len(problems) > 0 {
		return &migration.ConfigError{Err: fmt.Errorf("reverse backfill: %s", strings.Join(problems, "; "))}
	}
	return nil
}

// Reverse runs a reverse backfill of cfg's cohorts (the copy: jobs.Reverse): they must be
// in new_only (unless o.Force). It moves them back to read_new (a forced
// move, said so in the audit: the rules let only a reverse backfill go
// back from new_only), waits the cache TTL plus skew so that every
// instance writes old too, copies new to old, and on success,
// with no dead letter, moves them to dual_write: old is authoritative
// again, holding every write. On failure the cohorts stay in read_new,
// where both stores are written and new is read: safe to run again.
func Reverse(ctx context.Context, cfg *config.Config, o CohortOptions, jobs Jobs) (*migration.Job, *migration.Result, *phases.Audit, error) {
	say := o.Run.Notes.Say
	if o.Migration == "" || len(o.Cohorts) == 0 {
		return nil, nil, nil, &migration.ConfigError{Err: errors.New("a reverse backfill needs the migration's name and the cohorts")}
	}
	if err := migration.Reach(ctx, cfg); err != nil {
		return nil, nil, nil, err
	}
	j, err := migration.Resolve(ctx, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := CheckReverse(j); err != nil {
		return j, nil, nil, err
	}
	st, closeStore, err := OpenStore(ctx, cfg.Target, false)
	if err != nil {
		return j, nil, nil, fmt.Errorf("phase store: %w", err)
	}
	defer closeStore()
	rules := phases.RulesFor(cfg)
	m, err := st.Load(ctx, o.Migration)
	if err != nil {
		return j, nil, nil, err
	}
	var refused []string
	backToReadNew := false
	for _, rg := range cohort.Merge(o.Cohorts) {
		for _, seg := range m.Segments(rg) {
			switch {
			case seg.Phase == phases.NewOnly:
				backToReadNew = true
			case seg.Phase == phases.ReadNew: // a reverse backfill that stopped midway
			case !o.Force:
				refused = append(refused, fmt.Sprintf("%s are %s", seg.Range, seg.Phase))
			}
		}
	}
	if len(refused) > 0 {
		return j, nil, nil, fmt.Errorf("%w: a reverse backfill brings cohorts back from new_only (or read_new, after one that stopped): cohorts %s (--force runs it anyway)", ErrNotBackfillable, strings.Join(refused, "; cohorts "))
	}
	if backToReadNew || o.Force {
		_, a, err := st.Move(ctx, phases.Move{Migration: o.Migration, Buckets: cfg.Cohort.Buckets, Cohorts: o.Cohorts, To: phases.ReadNew, Who: o.Who, Force: true,
			Why: "reverse backfill: back to read_new first, so that every instance writes old too"})
		if err != nil {
			return j, nil, nil, err
		}
		say(moved(a))
	}
	// The copy reads new once every instance writes old too: the cohorts
	// held read_new for the hold, measured from when they entered it (a
	// re-run after a move whose response was lost may find them there
	// only just now).
	if err := holdReadNew(ctx, st, o.Migration, o.Cohorts, rules, say); err != nil {
		return j, nil, nil, err
	}
	rev, err := ReverseFor(j)
	if err != nil {
		return j, nil, nil, err
	}
	b := phases.Backfill{Migration: o.Migration, Namespace: cfg.Target.Namespace, Reverse: &rev}
	for _, rg := range cohort.Merge(o.Cohorts) {
		b.Spans = append(b.Spans, phases.BackfillSpan{First: rg.First, Last: rg.Last, Phase: phases.ReadNew})
	}
	n := cohort.Count(b.Cohorts())
	say(migration.CohortJob{Kind: "reverse", Migration: o.Migration, Cohorts: cohort.Format(b.Cohorts()), N: n, Buckets: cfg.Cohort.Buckets})
	copyStart := time.Now()
	res, err := jobs.Reverse(ctx, j, b)
	if err != nil {
		return j, res, nil, err
	}
	if d := res.Counters[migration.DeadLettered]; d > 0 {
		return j, res, nil, fmt.Errorf("%w: %d records were dead-lettered (see %s); cohorts %s stay in read_new: fix the cause and run the reverse backfill again",
			ErrBackfillIncomplete, d, j.DeadLetterPath, cohort.Format(b.Cohorts()))
	}
	// The copy made old as new holds every record: the entries of writes
	// old missed before it began are put right (a rollback to old is
	// refused while they remain).
	if err := clearMissedOld(ctx, st, o.Migration, o.Cohorts, copyStart.Add(-skewOf(cfg))); err != nil {
		return j, res, nil, err
	}
	// Writes old missed while the copy ran (an application's write of an
	// interleaved child in old, before the copy had put its parent
	// there): made in old as new holds them, still in read_new, so that
	// old holds every acknowledged write when it is authoritative again.
	repaired, err := repairMissedOld(ctx, st, j, o.Migration, o.Cohorts)
	if err != nil {
		return j, res, nil, err
	}
	if repaired > 0 {
		if res.Counters == nil {
			res.Counters = migration.Counters{}
		}
		res.Counters[RepairOldWritten] += int64(repaired)
	}
	why := o.Why
	if why == "" {
		why = fmt.Sprintf("reverse backfill: %d records copied back to old", res.Counters[migration.Written])
	}
	_, a, err := st.Move(ctx, phases.Move{Migration: o.Migration, Buckets: cfg.Cohort.Buckets, Cohorts: o.Cohorts, To: phases.DualWrite, Who: o.Who, Why: why, Rules: rules, ReverseCopied: true})
	if err != nil {
		return j, res, nil, fmt.Errorf("the reverse backfill ran, but its cohorts were not moved to dual_write: %w", err)
	}
	say(moved(a))
	return j, res, &a, nil
}

// holdReadNew waits until cohorts have been in read_new for rules' hold
// (DualWriteHold), in the store's time.
func holdReadNew(ctx context.Context, st phases.Store, migrationName string, cohorts []cohort.Range, rules phases.Rules, say func(migration.Note)) error {
	m, err := st.Load(ctx, migrationName)
	if err != nil {
		return err
	}
	now, err := StoreTime(ctx, st)
	if err != nil {
		return err
	}
	var until time.Time
	for _, rg := range cohort.Merge(cohorts) {
		for _, seg := range m.Segments(rg) {
			if seg.Phase != phases.ReadNew {
				continue // forced: the caller's choice
			}
			if t := seg.Since.Add(rules.DualWriteHold); t.After(until) {
				until = t
			}
		}
	}
	wait := until.Sub(now)
	if wait <= 0 {
		return nil
	}
	say(migration.WaitingForOld{Wait: wait, Hold: rules.DualWriteHold})
	select {
	case <-time.After(wait):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// clearMissedOld clears the repair log's entries of cohorts, logged
// before before, of writes old missed, and the touched marks' Behind =
// "old" of those cohorts last touched before then.
func clearMissedOld(ctx context.Context, st phases.Store, migrationName string, cohorts []cohort.Range, before time.Time) error {
	l, ok := st.(phases.RepairLog)
	if !ok {
		return nil
	}
	entries, err := l.Repairs(ctx, migrationName)
	if err != nil {
		return err
	}
	var done []phases.RepairEntry
	for _, e := range entries {
		for _, rg := range cohorts {
			if rg.Contains(e.Cohort) && e.Missed == "old" && e.LoggedAt.Before(before) {
				done = append(done, e)
				break
			}
		}
	}
	if err := l.ClearRepairs(ctx, migrationName, done); err != nil {
		return fmt.Errorf("the reverse backfill ran, but clearing %d repair-log entries of writes old missed failed: %w", len(done), err)
	}
	// And the touched marks saying so: else, once old is written alone
	// again (a rollback to old, then dual_write), a read would go to new
	// for them.
	if bc, ok := st.(phases.BehindClearer); ok {
		if _, err := bc.ClearBehindOld(ctx, migrationName, cohorts, before); err != nil {
			return fmt.Errorf("the reverse backfill ran, but %w", err)
		}
	}
	return nil
}

// repairMissedOld repairs in old (cutover.RepairOld) the repair log's
// entries of cohorts of writes old missed, and clears them. The cohorts
// must be in read_new. It returns how many it repaired.
func repairMissedOld(ctx context.Context, st phases.Store, j *migration.Job, migrationName string, cohorts []cohort.Range) (int, error) {
	l, ok := st.(phases.RepairLog)
	if !ok {
		return 0, nil
	}
	entries, err := l.Repairs(ctx, migrationName)
	if err != nil {
		return 0, err
	}
	var missed []phases.RepairEntry
	for _, e := range entries {
		for _, rg := range cohorts {
			if e.Missed == "old" && rg.Contains(e.Cohort) {
				missed = append(missed, e)
				break
			}
		}
	}
	if len(missed) == 0 {
		return 0, nil
	}
	done, err := repairOld(reversecopy.Done(ctx), j, migrationName, missed)
	if len(done) > 0 {
		if cerr := l.ClearRepairs(ctx, migrationName, done); cerr != nil && err == nil {
			err = cerr
		}
	}
	if err != nil {
		return len(done), fmt.Errorf("the reverse backfill ran, but repairing in old %d writes it missed while the copy ran (%d done): %w; cohorts %s stay in read_new: run it again", len(missed), len(done), err, cohort.Format(cohort.Merge(cohorts)))
	}
	return len(done), nil
}
