package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
)

// RunOptions are the parsed flags of `rekey run` (and `rekey redrive`).
type RunOptions struct {
	IO           stdio
	Config       string
	From         string // redrive: the dead-letter file
	Runner       string
	CreateTarget bool
	Force        bool
	Overwrite    bool
	Verbose      bool
	BeamArgs     []string // Beam's own flags (--project=p, --region=r, ...), as given
	// Cohorts, for run, makes it a cohort backfill of Migration's cohorts
	// (operator.Backfill); Why goes to the audit.
	Cohorts, Migration, Why string
	// Reverse makes the cohort backfill a reverse one (new → old, from
	// new_only; operator.Reverse).
	Reverse bool
	// Summary, if set, is a file the run's summary is written to as JSON
	// when it ends (runSummary).
	Summary string
	// SharedDisk says that every worker sees this machine's files at the
	// same paths (--shared-disk): local paths are then accepted on
	// runners whose workers are other processes.
	SharedDisk bool
	// WorkerPaths are the command's own paths its workers read or write
	// (--keys, --report, --from), by flag, checked as the config's are
	// (checkWorkerPaths) and made absolute.
	WorkerPaths map[string]*string
}

const runLong = `Reads the source, rewrites every record's key and writes the target, as one
Beam pipeline. Beam's own flags are accepted too (for Dataflow: --project,
--region and --staging_location=gs://BUCKET/PATH, which it needs, and
--temp_location, --service_account_email, ...); 'rekey run --help-beam'
lists them. With --runner dataflow --dry_run the job is translated, not
submitted, and its JSON is all that goes to standard output (for jq);
-v adds Beam's log, with the whole pipeline.`

const redriveLong = `Re-submits the records of a dead-letter file written by an earlier run of
the same config, after the cause was fixed: records refused while reading or
rewriting are rewritten and written, records refused while writing are
written again. What still fails is dead-lettered again (to the config's
dead_letter path, or, if that is FROM itself, next to it: dead.jsonl -> dead.redrive.jsonl).
Beam's own flags are accepted as by run; 'rekey redrive --help-beam' lists them.`

func newCmdRun(f *factory, runF func(*RunOptions) error) *cobra.Command {
	return runLikeCommand(f, &cobra.Command{Use: "run -c FILE [--runner prism|direct|dataflow|universal] [flags] [Beam flags]",
		Short: "migrate: read the source, rewrite every key, write the target (a Beam pipeline)", Long: runLong}, runF)
}

func newCmdRedrive(f *factory, runF func(*RunOptions) error) *cobra.Command {
	return runLikeCommand(f, &cobra.Command{Use: "redrive -c FILE --from DEAD_LETTERS [--runner ...] [flags] [Beam flags]",
		Short: "re-submit the records of a dead-letter file after fixing the cause", Long: redriveLong}, runF)
}

// runLikeCommand adds the flags and the action shared by run and redrive.
func runLikeCommand(f *factory, cmd *cobra.Command, runF func(*RunOptions) error) *cobra.Command {
	opts := &RunOptions{IO: f.IO}
	name := cmd.Name()
	fl := cmd.Flags()
	if name == "redrive" {
		fl.StringVar(&opts.From, "from", "", "dead-letter file to re-submit (local or gs://)")
	} else {
		fl.StringVar(&opts.Cohorts, "cohorts", "", "backfill only these cohorts (e.g. 0-99,500) of --migration, then move them to backfilled")
		fl.StringVar(&opts.Migration, "migration", "", "with --cohorts: the migration's name in the phase store")
		fl.StringVar(&opts.Why, "why", "", "with --cohorts: the reason, for the audit")
		fl.BoolVar(&opts.Reverse, "reverse", false, "with --cohorts: a reverse backfill, new to old through the inverse rewrite, from new_only back to dual_write")
	}
	fl.BoolVar(&opts.CreateTarget, "create-target", false, "create the target Spanner tables (the DDL is printed either way)")
	fl.BoolVar(&opts.Force, "force", false, "run even if the target's manifest records a different rewrite (with --cohorts: also backfill cohorts that are not in dual_write, said so in the audit)")
	fl.BoolVar(&opts.Overwrite, "overwrite", false, "replace a target file (JSON Lines, entity JSON) or Spanner export that exists already")
	fl.StringVar(&opts.Summary, "summary", "", "write the run's counters, timings and dead-letter counts as JSON to FILE when it ends")
	return pipelineCommand(cmd, opts, func(cmd *cobra.Command) error {
		if name == "redrive" && opts.From == "" {
			return usagef("redrive: --from DEAD_LETTERS is required")
		}
		if (opts.Cohorts == "") != (opts.Migration == "") {
			return usagef("%s: --cohorts LIST and --migration NAME go together (a cohort backfill)", name)
		}
		if opts.Reverse && opts.Cohorts == "" {
			return usagef("%s: --reverse needs --cohorts LIST and --migration NAME", name)
		}
		if runF != nil {
			return runF(opts)
		}
		beamFlagErrorsReturn()
		opts.WorkerPaths = map[string]*string{"--from": &opts.From}
		return runMigration(cmd.Context(), opts, opts.IO)
	})
}

// pipelineCommand adds to cmd, after its own flags, the flags of every
// command that runs a pipeline (-c, --runner, -v, --help-beam and Beam's
// own, hidden), and its action: --help-beam, or check -c and --runner
// and then run (the command's own checks and work).
func pipelineCommand(cmd *cobra.Command, opts *RunOptions, run func(cmd *cobra.Command) error) *cobra.Command {
	name := cmd.Name()
	var helpBeam bool
	fl := cmd.Flags()
	fl.StringVarP(&opts.Config, "config", "c", "", "config file (YAML)")
	fl.StringVar(&opts.Runner, "runner", "prism", "Beam runner: "+strings.Join(pipeline.Runners, ", "))
	fl.BoolVarP(&opts.Verbose, "verbose", "v", false, "show the runner's own log")
	fl.BoolVar(&helpBeam, "help-beam", false, "list Beam's flags (--project, --region, ...) and exit")
	fl.BoolVar(&opts.SharedDisk, "shared-disk", false, "every worker sees this machine's files at the same paths (workers on this machine, a shared file system): allow local paths with --runner universal or an --environment_type other than LOOPBACK")
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
	_ = cmd.RegisterFlagCompletionFunc("runner", cobra.FixedCompletions(pipeline.Runners, cobra.ShellCompDirectiveNoFileComp))
	beamFlags := beamFlagSet(&opts.BeamArgs, fl)
	addHidden(fl, beamFlags)
	cmd.Args = noArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if helpBeam {
			return printBeamFlags(opts.IO.out, name, beamFlags)
		}
		if opts.Config == "" {
			return usagef("%s: -c FILE is required", name)
		}
		if !slices.Contains(pipeline.Runners, opts.Runner) {
			return usagef("%s: --runner must be one of %s, got %q", name, strings.Join(pipeline.Runners, ", "), opts.Runner)
		}
		return run(cmd)
	}
	return cmd
}

// beamRun is what a command that runs a pipeline knows once Beam is set
// up (startBeam).
type beamRun struct {
	cfg *config.Config
	// dryRun is --dry_run on a local runner (migration.Options.DryRun:
	// read and plan, write nothing); translateOnly on Dataflow, where it
	// is Beam's (the job is translated, not submitted).
	dryRun, translateOnly bool
	runner                pipeline.Runner
}

// statusIO is io for what a command says about its run: on a Dataflow
// dry run standard output carries the translated job's JSON alone
// (jobPrinter), so the rest goes to standard error.
func (b beamRun) statusIO(io stdio) stdio {
	if b.translateOnly {
		io.out = io.err
	}
	return io
}

// startBeam parses Beam's flags into flag.CommandLine (Beam and its
// runners read them from there, and workers are started with them),
// initialises Beam and the log, and loads the config (checked for
// Dataflow when the job runs there). done restores Beam's log.
func startBeam(o *RunOptions, io stdio) (b beamRun, done func(), err error) {
	done = func() {}
	if err := flag.CommandLine.Parse(o.BeamArgs); err != nil {
		return b, done, usagef("run: %v", err)
	}
	if flag.NArg() > 0 {
		return b, done, usagef("run: unexpected arguments: %s", strings.Join(flag.Args(), " "))
	}
	beam.Init()
	dryRun := false
	if f := flag.Lookup("dry_run"); f != nil && f.Value.String() == "true" {
		dryRun = true
	}
	b.translateOnly = dryRun && o.Runner == "dataflow"
	b.dryRun = dryRun && !b.translateOnly
	// prism and the SDK log every job step at INFO, and a Dataflow dry
	// run the whole pipeline proto: shown with -v only.
	level := slog.LevelWarn
	if o.Verbose {
		level = slog.LevelInfo
	}
	var h slog.Handler = slog.NewTextHandler(io.err, &slog.HandlerOptions{Level: level})
	if !o.Verbose {
		h = quietWhenStopping{h}
	}
	slog.SetDefault(slog.New(h))
	if b.translateOnly {
		// The translated job, logged by Beam as one JSON message, is the
		// only thing on standard output (jobPrinter).
		beamlog.SetLogger(jobPrinter{out: io.out, next: &beamlog.Structural{}})
		done = func() { beamlog.SetLogger(&beamlog.Structural{}) }
	}
	if o.Runner == "dataflow" {
		if err := dataflowFlags(); err != nil {
			return b, done, err
		}
	}
	if b.cfg, err = loadConfig(o.Config, io.err); err != nil {
		return b, done, err
	}
	if err := checkWorkerPaths(o, b.cfg); err != nil {
		return b, done, err
	}
	b.runner = pipeline.Runner{Runner: o.Runner, Progress: io.err, Notes: notesTo(io.err)}
	return b, done, nil
}

// dataflowFlags checks the Beam flags Dataflow needs before anything
// runs, saying what to pass and why.
func dataflowFlags() error {
	value := func(name string) string {
		if f := flag.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	var missing []string
	for _, name := range []string{"project", "region"} {
		if value(name) == "" {
			missing = append(missing, "--"+name)
		}
	}
	if len(missing) > 0 {
		return usagef("--runner dataflow needs --project and --region (Beam's flags); missing: %s", strings.Join(missing, ", "))
	}
	switch staging := value("staging_location"); {
	case staging == "":
		return usagef("--runner dataflow needs --staging_location=gs://BUCKET/PATH (Beam's flag), also with --dry_run: Dataflow stages the pipeline and the worker binary there, and the job (translated by a dry run) names them")
	case !strings.HasPrefix(staging, "gs://"):
		return usagef("--staging_location must be a gs://BUCKET/PATH (Dataflow stages the pipeline and the worker binary there), got %q", staging)
	}
	return nil
}

// runMigration resolves the config, prepares the target and runs the
// migration (or the redrive of o.From).
func runMigration(ctx context.Context, o *RunOptions, io stdio) (err error) {
	var job *migration.Job
	var res *migration.Result
	var b beamRun
	started := time.Now()
	early := false // stopped before the job started (stoppedEarly)
	if o.Summary != "" {
		if st, serr := os.Stat(filepath.Dir(o.Summary)); serr != nil || !st.IsDir() {
			return usagef("--summary %s: its folder does not exist", o.Summary)
		}
		defer func() {
			command := "run"
			if o.From != "" {
				command = "redrive"
			}
			s := newSummary(command, o, job, res, err, started, b.dryRun, ctx.Err() != nil)
			if early {
				s.Stopped = notStarted
			}
			if werr := writeSummary(o.Summary, s); werr != nil && err == nil {
				err = werr
			}
		}()
	}
	b, done, err := startBeam(o, io)
	defer done()
	if err != nil {
		return err
	}
	cfg, runner, translateOnly := b.cfg, b.runner, b.translateOnly
	io = b.statusIO(io)
	mo := migration.Options{CreateTarget: o.CreateTarget, Force: o.Force, Overwrite: o.Overwrite, RedriveFrom: o.From, Notes: notesTo(io.out), DryRun: b.dryRun, TranslateOnly: translateOnly}
	if o.Cohorts != "" {
		rs, perr := cohort.Parse(o.Cohorts, cfg.Cohort.Buckets)
		if perr != nil {
			return usagef("--cohorts: %v", perr)
		}
		bo := operator.CohortOptions{Migration: o.Migration, Cohorts: rs, Force: o.Force, Who: operatorName(), Why: o.Why, Run: mo}
		if o.Reverse {
			job, res, _, err = operator.Reverse(ctx, cfg, bo, runner)
		} else {
			job, res, _, err = operator.Backfill(ctx, cfg, bo, runner)
		}
	} else {
		job, res, err = migration.Run(ctx, cfg, mo, runner)
	}
	if ctx.Err() != nil {
		early = res == nil
		res, err = stoppedEarly(io, res, err, started)
	}
	if stop, err := printRun(io, o, job, res, err, translateOnly, migration.WouldWrite, "written"); stop {
		return err
	}
	if res != nil {
		// A stopped run's counts do not add up: records were in flight.
		if note := countsNote(o.Runner, o.Cohorts != "", b.dryRun, res.Counters); note != "" && ctx.Err() == nil {
			fmt.Fprintln(io.out, note)
		}
		if n := res.Counters[migration.ReferencesUnmapped]; n > 0 {
			fmt.Fprintf(io.out, "rekey: %d key values point at a migrated kind through a property that neither references nor references_to names; they still point at the old keys\n", n)
		}
		if err == nil && res.Counters[migration.Read] == 0 && res.Counters[migration.DeadLettered] == 0 {
			fmt.Fprintln(io.out, nothingRead(job))
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

// stoppedEarly is, for a run stopped by a signal (its context
// cancelled), the result and error to report: a run stopped before its
// job started (while it checked the stores, read their schemas or
// prepared the target) has no result, and is given one with no counts,
// so that it says, as every stopped run does, what was done; it says
// that the job had not started. An error the stop caused is never taken
// for one of the config's (exit 2).
func stoppedEarly(io stdio, res *migration.Result, err error, started time.Time) (*migration.Result, error) {
	if migration.IsConfigError(err) {
		err = fmt.Errorf("%v: %w", err, context.Canceled)
	}
	if res == nil {
		fmt.Fprintln(io.err, "rekey: "+notStarted)
		res = &migration.Result{Counters: migration.Counters{}, Elapsed: time.Since(started)}
	}
	return res, err
}

// nothingRead is what a run that read no record says: plainly that its
// input holds none, which is no error (an export of an empty table, a
// day without rows); a path that matches no file is one.
func nothingRead(job *migration.Job) string {
	if job.RedriveFrom != "" {
		return fmt.Sprintf("rekey: the dead-letter file holds 0 records (%s): nothing to redrive", job.RedriveFrom)
	}
	src := job.Config.Source
	name := src.Name()
	if src.IsFile() {
		name = src.Path
	}
	return fmt.Sprintf("rekey: the source holds 0 records (%s %s): nothing to migrate", src.Type, name)
}

// redriveCountsNote explains a redrive's counters when it wrote more
// than it rewrote: records refused while writing held their new keys
// already, and are written without being rewritten again.
func redriveCountsNote(job *migration.Job, c migration.Counters) string {
	if job == nil || job.RedriveFrom == "" || c[migration.Written] <= c[migration.Rewritten] {
		return ""
	}
	return "rekey: rewritten counts the records this redrive rewrote (refused while reading or rewriting); those refused while writing had their new keys already and were written as they were"
}

// printRun says what a run did (what a dry run found, its counters, where
// its dead letters are) and reports whether the caller should stop there
// and return the error it gives: a config error (as a usage error) or a
// job only translated.
func printRun(io stdio, o *RunOptions, job *migration.Job, res *migration.Result, err error, translateOnly bool, wouldPrefix, done string) (stop bool, _ error) {
	if migration.IsConfigError(err) {
		return true, usagef("%s: %w", o.Config, err)
	}
	if translateOnly && err == nil {
		fmt.Fprintf(io.err, "rekey: dry run: the %s job was translated (its JSON on standard output) and not submitted\n", o.Runner)
		return true, nil
	}
	if res != nil && job != nil && job.DryRun {
		printDryRun(io.out, job, res, wouldPrefix, done)
	}
	if res != nil && res.Stop != nil {
		fmt.Fprintf(io.err, "rekey: %s; the counters below count what finished bundles reported\n", res.Stop)
	}
	if res != nil {
		fmt.Fprintf(io.out, "rekey: %s in %s\n", res.Counters, res.Elapsed.Round(1e6))
		if note := redriveCountsNote(job, res.Counters); note != "" {
			fmt.Fprintln(io.out, note)
		}
		if res.Counters[migration.DeadLettered] > 0 {
			fmt.Fprintf(io.out, "rekey: %d records dead-lettered to %s\n", res.Counters[migration.DeadLettered], job.DeadLetterPath)
		}
	}
	return false, err
}

// printDryRun says what a dry run found: the records each table or kind
// would get (counters named prefix + the table: migration.WouldWrite) or
// lose (migration.WouldDelete), done ("written", "deleted"), and a sample
// of old and new keys.
func printDryRun(w io.Writer, job *migration.Job, res *migration.Result, prefix, done string) {
	var tables []string
	var total int64
	for name, n := range res.Counters {
		if t, ok := strings.CutPrefix(name, prefix); ok {
			tables = append(tables, fmt.Sprintf("%s %d", t, n))
			total += n
		}
	}
	slices.Sort(tables)
	fmt.Fprintf(w, "rekey: dry run: nothing was %s; %d records would be %s", done, total, done)
	if len(tables) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(tables, ", "))
	}
	fmt.Fprintf(w, "; %d dead-lettered (with their reasons in %s)\n", res.Counters[migration.DeadLettered], job.DeadLetterPath)
	if len(res.Sample) > 0 {
		fmt.Fprintln(w, "rekey: the first keys, old -> new:")
		for _, line := range res.Sample {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
}

// countsNote says, for a run whose counts do not add up (every record
// read is written or dead-lettered; in a dry run, which writes nothing
// by design, every record read would be written or is dead-lettered:
// the migration.WouldWrite counters), that the counts are short and
// why, or "" when they add up. On prism, Beam's job server keeps one
// payload per metric when bundles of one stage finish before it has
// learned the metric's id from the worker, and the other bundles' counts
// are dropped (jobservices/metrics.go, contributeMetrics): the records
// were processed, only their counts were lost. Cohort backfills leave
// records out by design (cohort_other, backfill_skipped) and are not
// checked.
func countsNote(runner string, cohorts, dryRun bool, c migration.Counters) string {
	if cohorts || (runner != "prism" && runner != "universal") {
		return ""
	}
	written, what := c[migration.Written], "written"
	if dryRun {
		written, what = 0, "would be written"
		for name, n := range c {
			if strings.HasPrefix(name, migration.WouldWrite) {
				written += n
			}
		}
	}
	accounted := written + c[migration.DeadLettered]
	if c[migration.Read] == accounted {
		return ""
	}
	return fmt.Sprintf("rekey: note: the counts do not add up (read %d, %s + dead-lettered %d): the %s job server drops the counts of bundles of one step that finish at the same moment early in a job (Beam's prism, jobservices/metrics.go); the records themselves are not affected. Count the target to be sure, or run again with --runner direct for exact counts", c[migration.Read], what, accounted, runner)
}

// checkWorkerPaths refuses local paths (the config's and the command's
// WorkerPaths) where the job's workers may not see this machine's disk:
// on Dataflow always, and on the other runners when the workers are not
// this process (pipeline.InProcess) unless --shared-disk says they see
// its files. The command's own local paths are made absolute, so that a
// worker in another working folder finds them.
func checkWorkerPaths(o *RunOptions, cfg *config.Config) error {
	for _, p := range o.WorkerPaths {
		if *p != "" && !strings.Contains(*p, "://") {
			if abs, err := filepath.Abs(*p); err == nil {
				*p = abs
			}
		}
	}
	if pipeline.InProcess(o.Runner) || o.SharedDisk && o.Runner != "dataflow" {
		return nil
	}
	var errs []error
	if err := cfg.ValidateRemote(o.Runner != "dataflow"); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", o.Config, joinLines(err)))
	}
	flags := slices.Sorted(maps.Keys(o.WorkerPaths))
	for _, f := range flags {
		if p := *o.WorkerPaths[f]; p != "" && !strings.HasPrefix(p, "gs://") {
			errs = append(errs, fmt.Errorf("%s %s: %s", f, p, config.RemoteHint(o.Runner != "dataflow")))
		}
	}
	if len(errs) > 0 {
		return usagef("%w", errors.Join(errs...))
	}
	return nil
}
