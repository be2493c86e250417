package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/migration"
)

const loadLong = `Loads new data (JSON Lines, CSV or Avro files of records of the old table or
kind, in old keys) while a staged migration is under way, without bypassing
the cutover: every record goes through the migration's application library,
which writes it where its cohort's phase says — old only (old), both
(dual_write to read_new), or new only (new_only, done) — as the
application's own writes. The config is the migration's; the load is named
by the migration (--migration). Records the library refuses, or that keep
failing for 20 s, are dead-lettered with the reason. Counters: load_old_only,
load_both, load_new_only. Beam's own flags are accepted as by run.`

// LoadOptions are the flags of `rekey load` besides run's.
type LoadOptions struct {
	Format, Delimiter string
}

func newCmdLoad(f *factory) *cobra.Command {
	opts := &RunOptions{IO: f.IO}
	lo := &LoadOptions{}
	cmd := &cobra.Command{
		Use:     "load -c FILE --migration NAME --from PATH [--format jsonl|csv|avro] [--runner ...] [Beam flags]",
		Short:   "load new data during a staged migration: each record where its cohort's phase says (old, both, new)",
		Long:    loadLong,
		Example: `  rekey load -c migration.yaml --migration logs-v2 --from 'gs://bucket/new-logs-*.jsonl'`,
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Migration, "migration", "", "the migration's name in the phase store")
	fl.StringVar(&opts.From, "from", "", "the files to load (a path or a glob, local or gs://)")
	fl.StringVar(&lo.Format, "format", "jsonl", "the files' format: jsonl, csv or avro")
	fl.StringVar(&lo.Delimiter, "delimiter", ",", "the CSV field delimiter")
	return pipelineCommand(cmd, opts, func(cmd *cobra.Command) error {
		if opts.Migration == "" || opts.From == "" {
			return usagef("load: --migration NAME and --from PATH are required")
		}
		switch lo.Format {
		case "jsonl", "csv", "avro":
		default:
			return usagef("load: --format must be jsonl, csv or avro, got %q", lo.Format)
		}
		beamFlagErrorsReturn()
		opts.WorkerPaths = map[string]*string{"--from": &opts.From}
		return runLoad(cmd.Context(), opts, lo, opts.IO)
	})
}

func runLoad(ctx context.Context, o *RunOptions, lo *LoadOptions, io stdio) error {
	b, done, err := startBeam(o, io)
	defer done()
	if err != nil {
		return err
	}
	io = b.statusIO(io)
	job, res, err := operator.Load(ctx, b.cfg, operator.LoadFiles{Path: o.From, Format: lo.Format, Delimiter: lo.Delimiter, Migration: o.Migration}, b.runner)
	if stop, err := printRun(io, o, job, res, err, b.translateOnly, migration.WouldWrite, "written"); stop {
		return err
	}
	if err != nil {
		return err
	}
	if n := res.Counters[migration.DeadLettered]; n > 0 {
		return fmt.Errorf("%d records were dead-lettered (see %s): %w", n, job.DeadLetterPath, errPartial)
	}
	return nil
}
