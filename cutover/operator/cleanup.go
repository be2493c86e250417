package operator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
)

// CheckCleanup refuses a job a cohort cleanup cannot run: its source must
// be a Spanner table or a Datastore kind (where the old records are) and
// its target one too (where the phase store is); the config must say who
// a record's user is (cohort.user), for a Spanner source a column of the
// table; a Spanner source's interleaved tables must be ON DELETE CASCADE
// (the cleanup deletes the main table's rows of the cohorts, and the rows
// under them go with them: done cohorts' rows of every table are no
// longer read or written, see package phases' doc, "Cleaning up"; a
// Datastore source's descendant kinds are routed by their root's user
// and deleted with it, each entity by its own key); and it reads its
// source (not a dead-letter file).
func CheckCleanup(j *migration.Job) error {
	cfg := j.Config
	var problems []string
	if !HoldsOld(cfg.Source.Type) {
		problems = append(problems, fmt.Sprintf("source.type %s: a cohort cleanup deletes the old records of a Spanner or Datastore source", cfg.Source.Type))
	}
	if u, ok, err := cfg.Cohort.UserSpec(); err == nil && ok && j.Spanner != nil && j.Spanner.Source != nil &&
		(u.From != cohort.FromField || j.Spanner.Source.Column(u.Name) == nil) {
		problems = append(problems, fmt.Sprintf("cohort.user %s is not a column of source table %s", cfg.Cohort.User, j.Spanner.Source.Name))
	}
	if j.Spanner != nil {
		var noCascade []string
		for name, t := range j.Spanner.Children {
			if !t.OnDeleteCascade {
				noCascade = append(noCascade, name)
			}
		}
		if len(noCascade) > 0 {
			sort.Strings(noCascade)
			problems = append(problems, fmt.Sprintf("interleaved tables %s are not ON DELETE CASCADE: a cohort cleanup deletes the main table's rows and the rows under them go with them only by the cascade", strings.Join(noCascade, ", ")))
		}
	}
	if t := cfg.Target.Type; !KeepsPhases(t) {
		problems = append(problems, fmt.Sprintf("target.type %s: %v", t, ErrNoPhaseStoreKind))
	}
	if _, ok, err := cfg.Cohort.UserSpec(); err != nil || !ok {
		problems = append(problems, "cohort.user is not set: the config must say where a record's user id is")
	}
	if j.RedriveFrom != "" {
		problems = append(problems, "a cohort cleanup reads the source, not a dead-letter file")
	}
	if len(problems) > 0 {
		return &migration.ConfigError{Err: fmt.Errorf("cohort cleanup: %s", strings.Join(problems, "; "))}
	}
	return nil
}

// ErrCleanupIncomplete is wrapped by Cleanup's error when the cleanup
// ran but dead-lettered records: some old records of its cohorts may
// remain.
var ErrCleanupIncomplete = errors.New("cleanup incomplete")

// Cleanup runs a cohort cleanup of cfg (the job: jobs.Cleanup): it opens the phase store
// at the target and plans the cleanup (PlanCleanup: the cohorts
// must be in done, unless o.Force), resolves the job (migration.Resolve;
// the target is neither prepared nor written: a cleanup touches only the
// source, which under a ramp-up gets the ramp-up's lease table,
// Job.PrepareCleanup), runs the cleanup job, and then records the
// cleanup in the audit (FinishCleanup), with the counts as its
// reason unless o.Why gives one. A dry run plans and reads but deletes
// and records nothing. The audit record is returned (nil when there was
// none).
func Cleanup(ctx context.Context, cfg *config.Config, o CohortOptions, jobs Jobs) (*migration.Job, *migration.Result, *phases.Audit, error) {
	if o.Run.RedriveFrom != "" {
		return nil, nil, nil, &migration.ConfigError{Err: errors.New("a cohort cleanup reads the source, not a dead-letter file")}
	}
	say, st, closeStore, err := o.start(ctx, cfg, "cleanup")
	if err != nil {
		return nil, nil, nil, err
	}
	defer closeStore()
	buckets := cfg.Cohort.Buckets
	m, err := PlanCleanup(ctx, st, o.Migration, o.Cohorts, o.Force)
	if err != nil {
		return nil, nil, nil, err
	}
	if m.Buckets > 0 && m.Buckets != buckets {
		return nil, nil, nil, &migration.ConfigError{Err: fmt.Errorf("migration %s has %d cohorts in the phase store, the config's cohort.buckets %d: the cohorts would be other users", o.Migration, m.Buckets, buckets)}
	}
	j, err := migration.Resolve(ctx, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := CheckCleanup(j); err != nil {
		return j, nil, nil, err
	}
	j.DryRun, j.TranslateOnly = o.Run.DryRun, o.Run.TranslateOnly
	if !j.DryRun && !j.TranslateOnly {
		if err := j.PrepareCleanup(ctx); err != nil {
			return j, nil, nil, err
		}
	}
	src := cfg.Source
	n := cohort.Count(o.Cohorts)
	say(migration.CohortJob{Kind: "cleanup", Migration: o.Migration, Cohorts: cohort.Format(o.Cohorts), N: n, Buckets: buckets, Version: m.Version,
		Phases: m.PhasesOf(o.Cohorts), SourceType: src.Type, SourceName: src.Name(), Runner: jobs.Name()})
	if j.DryRun {
		say(migration.DryRunning{DeadLetters: j.DeadLetterPath, Deletes: true})
	}
	if d := jobs.DescribeDeletes(j); d != "" {
		say(migration.WritePlan{Text: d})
	}
	res, err := jobs.Cleanup(ctx, j, o.Cohorts)
	if err != nil || j.DryRun || j.TranslateOnly {
		return j, res, nil, err
	}
	deleted, dead := res.Counters[migration.Deleted], res.Counters[migration.DeadLettered]
	why := o.Why
	if why == "" {
		why = fmt.Sprintf("cleanup: %d old records deleted, %d dead-lettered", deleted, dead)
	}
	a, err := FinishCleanup(ctx, st, o.Migration, buckets, o.Cohorts, o.Who, why, o.Force)
	if a.Version == 0 {
		return j, res, nil, fmt.Errorf("the cleanup ran (%d old records deleted), but it was not recorded in the audit: %w", deleted, err)
	}
	say(migration.CleanupRecorded{Cohorts: a.Cohorts, From: a.From, Version: a.Version})
	if err != nil {
		return j, res, &a, err
	}
	if dead > 0 {
		return j, res, &a, fmt.Errorf("%w: %d records were dead-lettered (see %s); old records of cohorts %s may remain: fix the cause and run the cleanup again",
			ErrCleanupIncomplete, dead, j.DeadLetterPath, cohort.Format(o.Cohorts))
	}
	return j, res, &a, nil
}
