package operator

import (
	"context"
	"fmt"
	"time"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
)

// CohortOptions say which cohorts of a migration a run for them
// (Backfill, Cleanup, Reverse) takes.
type CohortOptions struct {
	// Migration names the migration in the phase store; Cohorts are the
	// cohorts to copy or clean up.
	Migration string
	Cohorts   []cohort.Range
	// Force takes cohorts that are not where the run needs them, said so
	// in the audit: a backfill copies cohorts that are not in dual_write,
	// or not held there long enough, and moves them to backfilled anyway;
	// a cleanup deletes the old records of cohorts that are not done.
	Force bool
	// Who and Why go to the run's audit record (the move to backfilled,
	// the note of the cleanup).
	Who, Why string
	// Run are the options of the run itself (Out, DryRun, ...).
	Run migration.Options
}

// start checks o and cfg's target for a run (what it is, for messages),
// checks that the stores can be reached (not for a translate-only run),
// and opens the phase store at the target; say is o.Run.Notes.Say.
func (o CohortOptions) start(ctx context.Context, cfg *config.Config, what string) (say func(migration.Note), st phases.Store, closeStore func(), err error) {
	say = o.Run.Notes.Say
	if o.Migration == "" || len(o.Cohorts) == 0 {
		return nil, nil, nil, &migration.ConfigError{Err: fmt.Errorf("a cohort %s needs the migration's name and the cohorts", what)}
	}
	if t := cfg.Target.Type; !KeepsPhases(t) {
		return nil, nil, nil, &migration.ConfigError{Err: fmt.Errorf("cohort %s: %w; this config's target is %s", what, ErrNoPhaseStoreKind, t)}
	}
	if !o.Run.TranslateOnly {
		if err := migration.Reach(ctx, cfg); err != nil {
			return nil, nil, nil, err
		}
	}
	if st, closeStore, err = OpenStore(ctx, cfg.Target, false); err != nil {
		return nil, nil, nil, fmt.Errorf("phase store: %w", err)
	}
	return say, st, closeStore, nil
}

// moved is the note of a move.
func moved(a phases.Audit) migration.Note {
	return migration.Moved{Cohorts: a.Cohorts, From: a.From, To: string(a.To), Version: a.Version}
}

// skewOf is the config's skew margin (cohort.skew or the default).
func skewOf(cfg *config.Config) time.Duration {
	if cfg.Cohort.Skew > 0 {
		return cfg.Cohort.Skew
	}
	return phases.DefaultSkew
}
