package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/pipeline"
)

// runOptions are the parsed flags of `rekey run` (and `rekey redrive`).
type runOptions struct {
	Config       string
	From         string // redrive: the dead-letter file
	Runner       string
	CreateTarget bool
	Force        bool
	Verbose      bool
	BeamArgs     []string // everything else: Beam's own flags (--project, --region, ...)
}

const runUsage = `-c FILE [--runner prism|direct|dataflow|universal] [--create-target] [--force] [Beam flags]

Reads the source, rewrites every record's key and writes the target, as one
Beam pipeline. Flags rekey does not know are Beam's (for Dataflow:
--project, --region, --staging_location, --temp_location,
--service_account_email, --dry_run, ...).`

// rekeyRunFlags are run's own flags; the value says whether it is boolean.
var rekeyRunFlags = map[string]bool{"c": false, "config": false, "from": false, "runner": false, "create-target": true, "force": true, "v": true, "h": true, "help": true}

// splitRunArgs separates rekey's flags from Beam's.
func splitRunArgs(args []string) (ours, beamArgs []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := strings.TrimLeft(a, "-")
		name, _, hasValue := strings.Cut(name, "=")
		isBool, known := rekeyRunFlags[name]
		if !strings.HasPrefix(a, "-") || !known {
			beamArgs = append(beamArgs, a)
			continue
		}
		ours = append(ours, a)
		if !isBool && !hasValue && i+1 < len(args) {
			i++
			ours = append(ours, args[i])
		}
	}
	return ours, beamArgs
}

const redriveUsage = `-c FILE --from DEAD_LETTERS [--runner ...] [Beam flags]

Re-submits the records of a dead-letter file written by an earlier run of
the same config, after the cause was fixed: records refused while reading or
rewriting are rewritten and written, records refused while writing are
written again. What still fails is dead-lettered again (to the config's
dead_letter path, or FROM.redrive.jsonl if that is FROM itself).`

func parseRunFlags(args []string, io stdio) (runOptions, error) {
	return parseRunLikeFlags("run", runUsage, args, io)
}

func parseRunLikeFlags(cmd, usage string, args []string, io stdio) (runOptions, error) {
	var o runOptions
	ours, beamArgs := splitRunArgs(args)
	fs := newFlagSet(cmd, usage, io.err)
	if cmd == "redrive" {
		fs.StringVar(&o.From, "from", "", "dead-letter file to re-submit (local or gs://)")
	}
	fs.StringVar(&o.Config, "c", "", "config file (YAML)")
	fs.StringVar(&o.Config, "config", "", "config file (YAML)")
	fs.StringVar(&o.Runner, "runner", "prism", "Beam runner: "+strings.Join(pipeline.Runners, ", "))
	fs.BoolVar(&o.CreateTarget, "create-target", false, "create the target Spanner tables (the DDL is printed either way)")
	fs.BoolVar(&o.Force, "force", false, "run even if the target's manifest records a different rewrite")
	fs.BoolVar(&o.Verbose, "v", false, "show the runner's own log")
	if err := parseFlags(fs, ours); err != nil {
		return o, err
	}
	if o.Config == "" {
		return o, usagef("%s: -c FILE is required", cmd)
	}
	if cmd == "redrive" && o.From == "" {
		return o, usagef("redrive: --from DEAD_LETTERS is required")
	}
	if !slices.Contains(pipeline.Runners, o.Runner) {
		return o, usagef("%s: --runner must be one of %s, got %q", cmd, strings.Join(pipeline.Runners, ", "), o.Runner)
	}
	o.BeamArgs = beamArgs
	return o, nil
}

func runRun(ctx context.Context, args []string, io stdio) error {
	o, err := parseRunFlags(args, io)
	if err != nil {
		return err
	}
	return runPipeline(ctx, o, io)
}

func runRedrive(ctx context.Context, args []string, io stdio) error {
	o, err := parseRunLikeFlags("redrive", redriveUsage, args, io)
	if err != nil {
		return err
	}
	return runPipeline(ctx, o, io)
}

// runPipeline resolves the config, prepares the target and runs the
// migration (or the redrive of o.From).
func runPipeline(ctx context.Context, o runOptions, io stdio) error {
	// Beam's flags live on the global flag set: Beam and its runners read
	// them from there, and workers are started with them.
	if err := flag.CommandLine.Parse(o.BeamArgs); err != nil {
		return usagef("run: %v", err)
	}
	if flag.NArg() > 0 {
		return usagef("run: unexpected arguments: %s", strings.Join(flag.Args(), " "))
	}
	beam.Init()
	dryRun := false
	if f := flag.Lookup("dry_run"); f != nil && f.Value.String() == "true" {
		dryRun = true
	}
	level := slog.LevelWarn // prism and the SDK log every job step at INFO
	if o.Verbose || dryRun {
		level = slog.LevelInfo // a dry run logs the translated job at INFO
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(io.err, &slog.HandlerOptions{Level: level})))
	cfg, err := loadConfig(o.Config)
	if err != nil {
		return err
	}
	job, res, err := migration.Run(ctx, cfg, migration.Options{CreateTarget: o.CreateTarget, Force: o.Force, RedriveFrom: o.From, Out: io.out},
		pipeline.Runner{Runner: o.Runner, Progress: io.err})
	if migration.IsConfigError(err) {
		return usagef("%s: %w", o.Config, err)
	}
	if dryRun && err == nil {
		fmt.Fprintf(io.out, "rekey: dry run: the %s job was translated (logged above) and not submitted\n", o.Runner)
		return nil
	}
	if res != nil {
		fmt.Fprintf(io.out, "rekey: %s in %s\n", res.Counters, res.Elapsed.Round(1e6))
		if res.Counters[migration.DeadLettered] > 0 {
			fmt.Fprintf(io.out, "rekey: %d records dead-lettered to %s\n", res.Counters[migration.DeadLettered], job.DeadLetterPath)
		}
	}
	if err != nil {
		return err
	}
	if n := res.Counters[migration.DeadLettered]; n > 0 {
		return fmt.Errorf("%d records were dead-lettered (see %s): %w", n, job.DeadLetterPath, errPartial)
	}
	return nil
}
