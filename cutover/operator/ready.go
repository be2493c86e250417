package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
)

// A staged cutover must not start half-ready: once a cohort is in
// dual_write, the application writes new on every call of the cohort's
// users, and a missing new table fails those calls. Prepare makes ready
// what the phases need before the first move (the target's tables, the
// phase store with its repair log and touched marks), and Ready checks
// it before every forward move: the phase store is whole, and the
// application library opens on the migration as an application opens it
// (new's tables with the rewritten key, old's tables, the phase map).

// ErrNotReady is wrapped by Ready's error: what a move needs is missing.
var ErrNotReady = errors.New("the staged cutover is not ready")

// PrepareCommand is the command that makes a migration ready, for
// messages: "rekey cohort prepare -c FILE --migration NAME".
const PrepareCommand = "rekey cohort prepare"

// Prepared is what Prepare did and found.
type Prepared struct {
	// PhaseStoreDDL are the statements Prepare ran to create the phase
	// store (none: it was whole, or a Datastore namespace).
	PhaseStoreDDL []string
}

// Prepare makes cfg's staged cutover ready for its first move: the
// target's tables as 'rekey run --create-target' creates them (their
// DDL said on o.Notes), the rewrite recorded in the target's manifest,
// and the phase store with its repair log and touched marks; then it
// checks what Ready checks.
func Prepare(ctx context.Context, cfg *config.Config, migrationName string, o migration.Options) (Prepared, error) {
	var p Prepared
	if err := canStage(cfg, migrationName); err != nil {
		return p, err
	}
	if err := migration.Reach(ctx, cfg); err != nil {
		return p, err
	}
	job, err := migration.Resolve(ctx, cfg)
	if err != nil {
		return p, err
	}
	o.CreateTarget = true
	if err := job.Prepare(ctx, o); err != nil {
		return p, fmt.Errorf("the target: %w", err)
	}
	if cfg.Target.Type == config.TypeSpanner {
		st, closeStore, err := OpenStore(ctx, cfg.Target, false)
		if err != nil {
			return p, fmt.Errorf("phase store: %w", err)
		}
		c := st.(phases.SpannerStore).Client
		p.PhaseStoreDDL, err = phases.CreateSpannerTables(ctx, c, c.DatabaseName())
		closeStore()
		if err != nil {
			return p, err
		}
	}
	return p, ready(ctx, cfg, job, migrationName)
}

// Ready reports whether cfg's staged cutover has what a forward move
// needs: the phase store whole (its phase map, audit, repair log and
// touched marks), and the application library opening on the migration
// (old's and new's tables, new's with the rewritten key). Its error
// wraps ErrNotReady and says what is missing and that PrepareCommand
// makes it.
func Ready(ctx context.Context, cfg *config.Config, migrationName string) error {
	if err := canStage(cfg, migrationName); err != nil {
		return err
	}
	job, err := migration.Resolve(ctx, cfg)
	if err != nil {
		return err
	}
	return ready(ctx, cfg, job, migrationName)
}

func ready(ctx context.Context, cfg *config.Config, job *migration.Job, migrationName string) error {
	var missing []string
	if cfg.Target.Type == config.TypeSpanner {
		st, closeStore, err := OpenStore(ctx, cfg.Target, false)
		if err != nil {
			return fmt.Errorf("phase store: %w", err)
		}
		ddl, err := phases.MissingSpannerDDL(ctx, st.(phases.SpannerStore).Client)
		closeStore()
		if err != nil {
			return fmt.Errorf("phase store: reading its tables: %w", err)
		}
		if len(ddl) > 0 {
			missing = append(missing, "the phase store lacks "+strings.Join(DDLNames(ddl), ", "))
		}
	}
	if _, closeLib, err := openLibrary(ctx, job, cutover.Options{Migration: migrationName}); err != nil {
		missing = append(missing, fmt.Sprintf("the application library does not open: %v", err))
	} else {
		closeLib()
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s; '%s -c CONFIG --migration %s' makes it ready", ErrNotReady, strings.Join(missing, "; "), PrepareCommand, migrationName)
}

// canStage refuses a config whose migration the staged cutover cannot
// carry.
func canStage(cfg *config.Config, migrationName string) error {
	if migrationName == "" {
		return &migration.ConfigError{Err: errors.New("the migration's name is required")}
	}
	if t := cfg.Target.Type; !KeepsPhases(t) {
		return &migration.ConfigError{Err: fmt.Errorf("%w; this config's target is %s", ErrNoPhaseStoreKind, t)}
	}
	if !Routes(cfg.Source.Type, cfg.Target.Type) {
		return &migration.ConfigError{Err: fmt.Errorf("the application library routes Spanner to Spanner, Datastore to Datastore and Datastore to Spanner migrations; this one goes from %s to %s", cfg.Source.Type, cfg.Target.Type)}
	}
	return nil
}

// DDLNames names what each statement creates: "table T", "column T.C".
func DDLNames(ddl []string) []string {
	out := make([]string, 0, len(ddl))
	for _, s := range ddl {
		f := strings.Fields(s)
		switch {
		case len(f) >= 3 && strings.EqualFold(f[0], "CREATE") && strings.EqualFold(f[1], "TABLE"):
			out = append(out, "table "+f[2])
		case len(f) >= 6 && strings.EqualFold(f[0], "ALTER"):
			out = append(out, "column "+f[2]+"."+f[5])
		default:
			out = append(out, s)
		}
	}
	return out
}
