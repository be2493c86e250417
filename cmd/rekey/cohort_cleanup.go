package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/migration"
)

const cohortCleanupLong = `Deletes the old records of cohorts that are done: the records of the
migration's source (table or kind) whose user is in one of the cohorts, as
one Beam pipeline. In done the application library neither reads nor writes
old any more, so nothing that is still in use goes; cohorts in another phase
are refused, naming each with its phase, unless --force (said so in the
audit).

The deletes are planned as a migration's writes are, by the old key:
shuffled over the whole key range, each commit a few neighbouring keys (a
mass delete in one narrow range leaves tombstones that slow the reads
there), under the config's ramp-up (whose lease a Spanner source then
keeps in a RekeyRamp table, created where missing), retries and adaptive
throttle. The target is not touched but for the audit record of the
cleanup, which 'rekey cohort log' shows. With --dry_run (local runners) the records are
read and the deletes planned and counted; nothing is deleted or recorded.
Beam's own flags are accepted as by run; 'rekey cohort cleanup --help-beam'
lists them.`

func newCmdCohortCleanup(f *factory, runF func(*RunOptions) error) *cobra.Command {
	opts := &RunOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "cleanup -c FILE --migration NAME --cohorts LIST [--force] [--why TEXT] [--runner prism|direct|dataflow|universal] [Beam flags]",
		Short: "delete the old records of cohorts that are done (shuffled, ramped, key-local deletes), with an audit record",
		Long:  cohortCleanupLong,
		Example: `  rekey cohort cleanup -c migration.yaml --migration logs-v2 --cohorts 0-99 --dry_run
  rekey cohort cleanup -c migration.yaml --migration logs-v2 --cohorts 0-99,500 --why "verified 2 weeks ago"`,
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Migration, "migration", "", "the migration's name in the phase store")
	fl.StringVar(&opts.Cohorts, "cohorts", "", "the cohorts whose old records to delete, e.g. 0-99,500")
	fl.StringVar(&opts.Why, "why", "", "the reason, for the audit (default: the counts)")
	fl.BoolVar(&opts.Force, "force", false, "also delete the old records of cohorts that are not done (said so in the audit)")
	return pipelineCommand(cmd, opts, func(cmd *cobra.Command) error {
		if opts.Migration == "" {
			return usagef("cohort cleanup: --migration NAME is required")
		}
		if opts.Cohorts == "" {
			return usagef("cohort cleanup: --cohorts LIST is required (e.g. 0-99,500)")
		}
		if runF != nil {
			return runF(opts)
		}
		beamFlagErrorsReturn()
		return runCohortCleanup(cmd.Context(), opts, opts.IO)
	})
}

// runCohortCleanup runs the cleanup (operator.Cleanup) and says what it
// did: the counters, the dead letters, the audit record.
func runCohortCleanup(ctx context.Context, o *RunOptions, io stdio) error {
	b, done, err := startBeam(o, io)
	defer done()
	if err != nil {
		return err
	}
	io = b.statusIO(io)
	rs, err := cohort.Parse(o.Cohorts, b.cfg.Cohort.Buckets)
	if err != nil {
		return usagef("--cohorts: %v", err)
	}
	job, res, a, err := operator.Cleanup(ctx, b.cfg, operator.CohortOptions{Migration: o.Migration, Cohorts: rs, Force: o.Force, Who: operatorName(), Why: o.Why,
		Run: migration.Options{Notes: notesTo(io.out), DryRun: b.dryRun, TranslateOnly: b.translateOnly}}, b.runner)
	if stop, err := printRun(io, o, job, res, err, b.translateOnly, migration.WouldDelete, "deleted"); stop {
		return err
	}
	if a != nil {
		fmt.Fprintf(io.out, "rekey: audit version %d: %s of cohorts %s (%s) by %s: %s\n", a.Version, a.Action, a.Cohorts, a.From, a.Who, auditWhy(*a))
	}
	return err
}
