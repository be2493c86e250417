// Package migrate holds what the benchmarks under bench/ share to drive
// rekey: running a migration from a YAML config the way `rekey run
// --create-target` does (Prepare, then Run), and creating Spanner
// emulator databases.
package migrate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rekeyio/rekey/internal/config"
	"github.com/rekeyio/rekey/internal/emulator"
	"github.com/rekeyio/rekey/pipeline"
)

// Prepare writes yaml to dir/rekey.yaml and does what `rekey run
// --create-target` does before its pipeline runs: load and validate the
// config (dead letters go to dir/dead.jsonl), resolve the plan, prepare
// the target.
func Prepare(ctx context.Context, dir, yaml string) (*pipeline.Plan, error) {
	path := filepath.Join(dir, "rekey.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		return nil, err
	}
	v, err := config.NewViper(path)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(v)
	if err != nil {
		return nil, err
	}
	cfg.DeadLetter = filepath.Join(dir, "dead.jsonl")
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	plan, err := pipeline.Resolve(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pipeline.PrepareTarget(ctx, plan, pipeline.TargetOptions{Create: true}); err != nil {
		return nil, err
	}
	return plan, nil
}

// Run runs a prepared migration's pipeline on runner. A run that
// dead-letters any record is an error.
func Run(ctx context.Context, runner string, plan *pipeline.Plan) (*pipeline.Result, error) {
	res, err := pipeline.Run(ctx, plan, runner, nil)
	if err != nil {
		return nil, err
	}
	if d := res.Counters["dead_lettered"]; d > 0 {
		return nil, fmt.Errorf("%d records dead-lettered (see %s)", d, plan.DeadLetterPath)
	}
	return res, nil
}

// NewDatabase creates a fresh database, named after hint, with ddl in the
// emulator's default instance and returns its id.
func NewDatabase(ctx context.Context, hint string, ddl ...string) (string, error) {
	id := emulator.UniqueDatabaseID(hint)
	_, err := emulator.NewSpannerDatabase(ctx, emulator.SpannerProject(), emulator.SpannerInstance(), id, ddl)
	return id, err
}
