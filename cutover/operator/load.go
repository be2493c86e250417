package operator

import (
	"context"
	"errors"
	"fmt"

	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
)

// CheckLoad refuses a migration the library cannot route: Spanner to
// Spanner or Datastore to Datastore, with a cohort.user.
func CheckLoad(j *migration.Job) error {
	cfg := j.Config
	if !Routes(cfg.Source.Type, cfg.Target.Type) {
		return &migration.ConfigError{Err: fmt.Errorf("a phase-aware load goes through the application library, which routes Spanner to Spanner and Datastore to Datastore migrations; this one goes from %s to %s", cfg.Source.Type, cfg.Target.Type)}
	}
	if _, ok, err := cfg.Cohort.UserSpec(); err != nil || !ok {
		return &migration.ConfigError{Err: errors.New("a phase-aware load needs cohort.user: where a record's user id is")}
	}
	return nil
}

// Load runs a phase-aware bulk load (jobs.Load) of the files f into
// cfg's migration f.Migration.
func Load(ctx context.Context, cfg *config.Config, f LoadFiles, jobs Jobs) (*migration.Job, *migration.Result, error) {
	if f.Migration == "" || f.Path == "" {
		return nil, nil, &migration.ConfigError{Err: errors.New("a load needs the migration's name and the files")}
	}
	if err := migration.Reach(ctx, cfg); err != nil {
		return nil, nil, err
	}
	j, err := migration.Resolve(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := CheckLoad(j); err != nil {
		return j, nil, err
	}
	if err := j.PrepareLoad(ctx); err != nil {
		return j, nil, err
	}
	res, err := jobs.Load(ctx, j, f)
	return j, res, err
}

// Counters of a load: the records written to old only, to both, to new
// only (by the phase their cohort was in when the load looked).
const (
	LoadOldOnly = "load_old_only"
	LoadBoth    = "load_both"
	LoadNewOnly = "load_new_only"
)
