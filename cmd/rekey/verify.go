package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/pipeline"
)

// VerifyOptions are the flags of `rekey verify` and `rekey repair`
// besides those every pipeline command has (RunOptions).
type VerifyOptions struct {
	Report   string
	Examples int
	Mark     bool
}

const verifyLong = `Compares old and new for some cohorts, as a Beam job on the same runners and
sources as a migration: it reads the cohorts' old records, maps each through
the migration's rewrite, reads the new records, joins them by new key and
reports per cohort the records that match, are missing in new, are extra in
new, or differ, with example keys, plus the cohort's entries in the repair
log. The report is printed as a table and written as JSON Lines (--report).
With --mark, a clean report moves the cohorts to verified.`

const repairLong = `Puts right what verify finds, for cohorts in which old is authoritative
(dual_write to shadow): a record missing in new or different there is copied
from old through the rewrite, a record extra in new is deleted from new, each
unless the application wrote or deleted it after the repair began (it is then
newer than what the repair read). It runs verify's Beam job with the repairs,
prints what it found (so what it repaired) and clears the cohorts' repair-log
entries logged before it began. A verify after it is clean.`

func newCmdVerify(f *factory, repair bool) *cobra.Command {
	opts := &RunOptions{IO: f.IO}
	o := &VerifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify -c FILE --migration NAME --cohorts LIST [--report FILE] [--mark] [--runner ...] [Beam flags]",
		Short: "compare old and new for some cohorts (a Beam job); --mark moves clean ones to verified",
		Long:  verifyLong,
	}
	name := "verify"
	if repair {
		name = "repair"
		cmd.Use = "repair -c FILE --migration NAME --cohorts LIST [--report FILE] [--runner ...] [Beam flags]"
		cmd.Short = "copy again from old what verify finds missing or different in new, delete what is extra (a Beam job)"
		cmd.Long = repairLong
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Migration, "migration", "", "the migration's name in the phase store")
	fl.StringVar(&opts.Cohorts, "cohorts", "", "cohorts and ranges, e.g. 0-99,500")
	fl.StringVar(&o.Report, "report", "rekey-"+name+".jsonl", "where to write the report (JSON Lines, one line per cohort; local or gs://)")
	fl.IntVar(&o.Examples, "examples", 5, "example keys kept per finding and cohort")
	if !repair {
		fl.BoolVar(&o.Mark, "mark", false, "move the cohorts to verified if every one is clean")
	}
	return pipelineCommand(cmd, opts, func(cmd *cobra.Command) error {
		if opts.Migration == "" || opts.Cohorts == "" {
			return usagef("%s: -c FILE, --migration NAME and --cohorts LIST are required", name)
		}
		if o.Examples < 1 {
			return usagef("%s: --examples must be at least 1", name)
		}
		beamFlagErrorsReturn()
		return runVerify(cmd.Context(), opts, o, repair)
	})
}

// runVerify runs verify (or repair) and prints the report.
func runVerify(ctx context.Context, opts *RunOptions, o *VerifyOptions, repair bool) error {
	b, done, err := startBeam(opts, opts.IO)
	defer done()
	if err != nil {
		return err
	}
	cfg, runner := b.cfg, b.runner
	rs, err := cohort.Parse(opts.Cohorts, cfg.Cohort.Buckets)
	if err != nil {
		return usagef("--cohorts: %v", err)
	}
	var report []pipeline.VerifyCohort
	var res *migration.Result
	var a *cutover.Audit
	if repair {
		report, res, err = pipeline.RunRepair(ctx, cfg, pipeline.RepairOptions{Migration: opts.Migration, Cohorts: rs, Examples: o.Examples, ReportPath: o.Report, Who: operator()}, runner)
	} else {
		report, res, a, err = pipeline.RunVerify(ctx, cfg, pipeline.VerifyOptions{Migration: opts.Migration, Cohorts: rs, Examples: o.Examples, ReportPath: o.Report, Mark: o.Mark, Who: operator()}, runner)
	}
	if migration.IsConfigError(err) {
		return usagef("%s: %w", opts.Config, err)
	}
	if report != nil {
		printVerify(opts.IO, report)
		fmt.Fprintf(opts.IO.out, "rekey: report written to %s\n", o.Report)
	}
	if res != nil && res.Counters[migration.DeadLettered] > 0 {
		fmt.Fprintf(opts.IO.out, "rekey: %d records could not be read or rewritten (see the dead letters); the verify is not clean\n", res.Counters[migration.DeadLettered])
	}
	if a != nil {
		fmt.Fprintf(opts.IO.out, "moved cohorts %s from %s to %s (version %d)\n", a.Cohorts, a.From, a.To, a.Version)
	}
	if err != nil {
		return err
	}
	if repair {
		fmt.Fprintf(opts.IO.out, "rekey: repaired: %d written, %d deleted, %d left as the application wrote them since; %d repair-log entries cleared; run verify to check\n",
			res.Counters[pipeline.RepairWritten], res.Counters[pipeline.RepairDeleted], res.Counters[migration.BackfillSkipped], res.Counters[pipeline.RepairLogCleared])
		return nil
	}
	for _, v := range report {
		if !v.Clean() {
			return fmt.Errorf("verify found differences: %w", errPartial)
		}
	}
	return nil
}

// printVerify writes the report as a table: clean neighbouring cohorts
// merged into a range, each cohort with findings on its own line, then the
// findings' example keys.
func printVerify(io stdio, report []pipeline.VerifyCohort) {
	tw := tabwriter.NewWriter(io.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COHORTS\tMATCHING\tMISSING IN NEW\tEXTRA IN NEW\tMISMATCHED\tREPAIR LOG")
	for i := 0; i < len(report); {
		v := report[i]
		if !v.Clean() {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\n", v.Cohort, v.Matching, v.Missing, v.Extra, v.Mismatched, v.RepairLog)
			i++
			continue
		}
		j, matching := i, 0
		for j < len(report) && report[j].Clean() && report[j].Cohort == v.Cohort+(j-i) {
			matching += report[j].Matching
			j++
		}
		fmt.Fprintf(tw, "%s\t%d\t0\t0\t0\t0\n", cohort.Range{First: v.Cohort, Last: report[j-1].Cohort}, matching)
		i = j
	}
	tw.Flush()
	for _, v := range report {
		for _, f := range []struct {
			what string
			keys []string
		}{{"missing in new", v.Examples.Missing}, {"extra in new", v.Examples.Extra}, {"mismatched", v.Examples.Mismatched}, {"in the repair log", v.Examples.RepairLog}} {
			for _, k := range f.keys {
				fmt.Fprintf(io.out, "  cohort %d, %s: %s\n", v.Cohort, f.what, k)
			}
		}
	}
}
