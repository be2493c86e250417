package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/migration"
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
new, or differ, plus the cohort's entries in the repair log. It prints the
totals, the cohorts with findings and --examples example keys in all, and
writes every cohort with every differing key as JSON Lines (--report).
Each finding is read again, old and new at one moment, before it counts.
With --mark, the cohorts move to verified when nothing differs but records
the library routes around (whose latest repair-log entry says new missed a
write old took, reported as "logged, routed around").`

const repairLong = `Puts right what verify finds, for cohorts in which old is authoritative
(dual_write to shadow): a record missing in new or different there is copied
from old through the rewrite, a record extra in new is deleted from new, each
unless the application wrote or deleted it after the repair began (it is then
newer than what the repair read). In read_new (new authoritative) it puts
right what the repair log names: old is made as new holds the records whose
writes it missed, and records whose writes new missed while old was
authoritative are copied from old. It runs verify's Beam job with the
repairs (each difference read again first: one old and new agree on then was
a write in flight, settled on recheck, and is left alone), clears the
cohorts' repair-log entries logged before it began, and prints per side what
it found, from the authoritative store's side, and how each difference ended:
found = repaired + settled on recheck + left (with why). A verify after it
is clean.`

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
	fl.StringVar(&o.Report, "report", "", "where to write the report (JSON Lines, one line per cohort; local or gs://; default: a new file under "+filepath.Join(os.TempDir(), "rekey-reports")+", named in the output; required with --runner dataflow)")
	fl.IntVar(&o.Examples, "examples", 5, "example keys printed in all (the report keeps this many per finding and cohort, and every differing key)")
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
		if o.Report == "" {
			if opts.Runner == "dataflow" {
				return usagef("%s: --report gs://BUCKET/PATH is required with --runner dataflow (its workers write the report)", name)
			}
			o.Report = defaultReport(name, opts.Migration, time.Now())
		}
		beamFlagErrorsReturn()
		opts.WorkerPaths = map[string]*string{"--report": &o.Report}
		return runVerify(cmd.Context(), opts, o, repair)
	})
}

// defaultReport is where verify or repair (name) writes its report when
// --report is not given: a new file under the OS's temporary folder,
// rekey/MIGRATION-NAME-TIME.jsonl, never in the working folder (the
// output names it). A folder it cannot make is left to the write to say.
func defaultReport(name, migration string, now time.Time) string {
	dir := filepath.Join(os.TempDir(), "rekey-reports")
	_ = os.MkdirAll(dir, 0o755)
	safe := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, migration)
	return filepath.Join(dir, fmt.Sprintf("%s-%s-%s.jsonl", safe, name, now.UTC().Format("20060102T150405.000Z")))
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
	var report []operator.VerifyCohort
	var res *migration.Result
	var a *phases.Audit
	var sides []operator.RepairSide
	if repair {
		var r operator.RepairOutcome
		r, err = operator.RepairTallied(ctx, cfg, operator.RepairOptions{Migration: opts.Migration, Cohorts: rs, Examples: o.Examples, ReportPath: o.Report, Who: operatorName()}, runner)
		report, res, sides = r.Report, r.Result, r.Sides
	} else {
		report, res, a, err = operator.Verify(ctx, cfg, operator.VerifyOptions{Migration: opts.Migration, Cohorts: rs, Examples: o.Examples, ReportPath: o.Report, Mark: o.Mark, Who: operatorName()}, runner)
	}
	if migration.IsConfigError(err) {
		return usagef("%s: %w", opts.Config, err)
	}
	if report != nil {
		printVerify(opts.IO, report, o.Examples)
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
		printRepair(opts.IO, sides, res.Counters[operator.RepairLogCleared])
		return nil
	}
	for _, v := range report {
		if !v.Markable() {
			return fmt.Errorf("verify found differences: %w", errPartial)
		}
	}
	return nil
}

// maxVerifyRows is the most cohorts with findings printed one to a row;
// the rest are summed on one row and named in a list.
const maxVerifyRows = 20

// printVerify writes the report for a person: the totals, a table of the
// cohorts with findings (at most maxVerifyRows of them, the rest summed
// and listed), the clean cohorts on one row, then at most examples
// example keys in all, taken in turn from the cohorts and findings. The
// JSON report holds every differing key.
func printVerify(io stdio, report []operator.VerifyCohort, examples int) {
	total := operator.TotalOf(report)
	var unclean, clean []operator.VerifyCohort
	for _, v := range report {
		if v.Clean() {
			clean = append(clean, v)
		} else {
			unclean = append(unclean, v)
		}
	}
	compared := total.Matching + total.Findings() + total.Settled
	fmt.Fprintf(io.out, "rekey: compared %d records of %d cohorts: %d matching, %d missing in new, %d extra in new, %d mismatched, %d logged and routed around, %d settled on recheck; %d repair-log entries (%d routed around)\n",
		compared, len(report), total.Matching, total.Missing, total.Extra, total.Mismatched, total.Routed, total.Settled, total.RepairLog, total.RepairLogRouted)
	tw := tabwriter.NewWriter(io.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COHORTS\tMATCHING\tMISSING IN NEW\tEXTRA IN NEW\tMISMATCHED\tROUTED AROUND\tREPAIR LOG")
	row := func(name string, v operator.VerifyCohort) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\n", name, v.Matching, v.Missing, v.Extra, v.Mismatched, v.Routed, v.RepairLog)
	}
	sum := func(vs []operator.VerifyCohort) (operator.VerifyCohort, []cohort.Range) {
		var rs []cohort.Range
		for _, v := range vs {
			rs = append(rs, cohort.Range{First: v.Cohort, Last: v.Cohort})
		}
		return operator.TotalOf(vs), cohort.Merge(rs)
	}
	for i, v := range unclean {
		if i == maxVerifyRows {
			s, _ := sum(unclean[i:])
			row(fmt.Sprintf("%d more", len(unclean)-i), s)
			break
		}
		row(fmt.Sprint(v.Cohort), v)
	}
	if len(clean) > 0 {
		s, rs := sum(clean)
		name := cohort.Format(rs)
		if len(rs) > 3 {
			name = fmt.Sprintf("%d clean cohorts", len(clean))
		}
		row(name, s)
	}
	tw.Flush()
	if len(unclean) > maxVerifyRows {
		_, rs := sum(unclean)
		fmt.Fprintf(io.out, "rekey: the %d cohorts with findings or repair-log entries: %s\n", len(unclean), cohort.Format(rs))
	}
	// Examples in turn: each cohort's first of each finding, then the
	// second, … up to examples in all.
	type ex struct {
		cohort int
		what   string
		keys   []string
	}
	var lists []ex
	for _, v := range unclean {
		for _, f := range []ex{{v.Cohort, "missing in new", v.Examples.Missing}, {v.Cohort, "extra in new", v.Examples.Extra}, {v.Cohort, "mismatched", v.Examples.Mismatched}, {v.Cohort, "logged, routed around", v.Examples.Routed}, {v.Cohort, "in the repair log", v.Examples.RepairLog}} {
			if len(f.keys) > 0 {
				lists = append(lists, f)
			}
		}
	}
	shown := 0
	for depth := 0; shown < examples; depth++ {
		any := false
		for _, l := range lists {
			if depth < len(l.keys) && shown < examples {
				fmt.Fprintf(io.out, "  cohort %d, %s: %s\n", l.cohort, l.what, l.keys[depth])
				shown++
				any = true
			}
		}
		if !any {
			break
		}
	}
	if more := total.Findings() + total.RepairLog - shown; more > 0 && shown > 0 {
		fmt.Fprintf(io.out, "  … and %d more (every key is in the report)\n", more)
	}
}

// printRepair writes a repair's tally for a person: per side (the cohorts
// where old is authoritative, then those in read_new) its differences
// from the authoritative store's side, then found = repaired + settled +
// left, each left one with why; then the repair-log entries cleared.
func printRepair(io stdio, sides []operator.RepairSide, cleared int64) {
	for _, s := range sides {
		auth, other := s.Authoritative, "new"
		how := "new is repaired from old"
		if auth == "new" {
			other, how = "old", "read_new: old is repaired through the repair log"
		}
		fmt.Fprintf(io.out, "rekey: cohorts %s (%s is authoritative; %s): %s lacked %d of %s's records, held %d that %s lacks, %d differed; %d more settled on recheck (writes in flight)\n",
			cohort.Format(s.Cohorts), auth, how, other, s.Lacks, auth, s.Extra, auth, s.Differ, s.Settled)
		repaired := fmt.Sprintf("%d repaired", s.Repaired())
		if s.RepairedOld > 0 {
			repaired += fmt.Sprintf(" (%d in old from the repair log)", s.RepairedOld)
		}
		if s.Skipped < 0 {
			repaired = fmt.Sprintf("%d repaired or left as the application wrote them since (%d left so, of both sides' writes and deletes)", s.Repaired(), s.SkippedBoth)
		}
		var why []string
		if s.Skipped > 0 {
			why = append(why, fmt.Sprintf("%d written or deleted by the application since the repair began", s.Skipped))
		}
		if s.Unlogged > 0 {
			why = append(why, fmt.Sprintf("%d not in the repair log as of the repair's start (old's differences; new is authoritative)", s.Unlogged))
		}
		left := fmt.Sprintf("%d left", s.Left())
		if len(why) > 0 {
			left += ": " + strings.Join(why, ", ")
		}
		fmt.Fprintf(io.out, "rekey:   %d found = %s + %d settled on recheck + %s\n", s.Found(), repaired, s.Settled, left)
	}
	fmt.Fprintf(io.out, "rekey: %d repair-log entries cleared; run verify to check\n", cleared)
}
