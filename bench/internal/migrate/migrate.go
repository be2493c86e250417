// Package migrate holds what the benchmarks under bench/ share to drive
// rekey: running a migration from a YAML config the way `rekey run
// --create-target` does (migration.Run), and creating and counting
// Spanner emulator databases.
package migrate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
)

// Run writes yaml to dir/rekey.yaml and runs it as `rekey run
// --create-target` does (migration.Run on runner; dead letters go to
// dir/dead.jsonl). around, if not nil, is called with the pipeline's run
// only, after the target is prepared, so a benchmark can watch just that.
// A run that dead-letters any record is an error.
func Run(ctx context.Context, runner, dir, yaml string, around func(run func() error) error) (*migration.Result, error) {
	path := filepath.Join(dir, "rekey.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		return nil, err
	}
	cfg, err := LoadConfig(path, filepath.Join(dir, "dead.jsonl"))
	if err != nil {
		return nil, err
	}
	if around == nil {
		around = func(run func() error) error { return run() }
	}
	job, res, err := migration.Run(ctx, cfg, migration.Options{CreateTarget: true}, watched{pipeline.Runner{Runner: runner}, around})
	if err != nil {
		return nil, err
	}
	if d := res.Counters[migration.DeadLettered]; d > 0 {
		return nil, fmt.Errorf("%d records dead-lettered (see %s)", d, job.DeadLetterPath)
	}
	return res, nil
}

// LoadConfig loads and validates the config at path, its dead letters
// going to dead.
func LoadConfig(path, dead string) (*config.Config, error) {
	v, err := config.NewViper(path)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(v)
	if err != nil {
		return nil, err
	}
	cfg.DeadLetter = dead
	return cfg, cfg.Validate()
}

// watched runs the pipeline inside around.
type watched struct {
	pipeline.Runner
	around func(run func() error) error
}

func (w watched) Migrate(ctx context.Context, j *migration.Job) (res *migration.Result, err error) {
	err = w.around(func() error {
		res, err = w.Runner.Migrate(ctx, j)
		return err
	})
	return res, err
}

// NewDatabase creates a fresh database, named after hint, with ddl in the
// emulator's default instance and returns its id.
func NewDatabase(ctx context.Context, hint string, ddl ...string) (string, error) {
	id := emulator.UniqueDatabaseID(hint)
	_, err := emulator.NewSpannerDatabase(ctx, emulator.SpannerProject(), emulator.SpannerInstance(), id, ddl)
	return id, err
}

// CheckRows fails unless table of the emulator's database db holds want
// rows.
func CheckRows(ctx context.Context, db, table string, want int) error {
	c, err := spanner.NewClient(ctx, spannerdb.DatabasePath(emulator.SpannerProject(), emulator.SpannerInstance(), db))
	if err != nil {
		return err
	}
	defer c.Close()
	var n int64
	err = c.Single().Query(ctx, spanner.Statement{SQL: "SELECT COUNT(*) FROM " + table}).Do(func(r *spanner.Row) error { return r.Column(0, &n) })
	if err == nil && n != int64(want) {
		err = fmt.Errorf("database %s holds %d rows, want %d", db, n, want)
	}
	return err
}

// UseSpanner makes the Spanner emulator named by SPANNER_EMULATOR_HOST, or
// else one it starts (saying so on stderr), the one this process uses,
// with the emulator's default instance; stop stops what it started.
func UseSpanner(ctx context.Context) (stop func(), err error) {
	stop = func() {}
	if os.Getenv(emulator.EnvSpannerHost) == "" {
		r, err := emulator.StartSpanner(ctx)
		if err != nil {
			return stop, err
		}
		stop = r.Stop
		os.Setenv(emulator.EnvSpannerHost, r.Host)
		fmt.Fprintf(os.Stderr, "started the Spanner emulator on %s\n", r.Host)
	}
	return stop, emulator.EnsureInstance(ctx, emulator.SpannerProject(), emulator.SpannerInstance())
}
