package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/migration"
)

const cohortPrepareLong = `Makes a staged cutover ready for its first move, before the application
is deployed with the library: what 'rekey cohort advance' then checks
before every forward move.

  - the target's tables, as 'rekey run --create-target' creates them (a
    Spanner target from a Spanner source, interleaved child tables and
    secondary indexes included; the DDL is printed), and the rewrite
    recorded in the target's manifest. A Datastore kind needs nothing
    created. A Spanner target from a Datastore source is yours to create
    (rekey cannot know a kind's columns): the check below names it.
  - the phase store at the target: in Spanner its tables (phase map,
    audit, repair log, touched marks); in Datastore nothing (a namespace).
  - a check that the application library opens on the migration as an
    application opens it: old's and new's tables, new's with the
    rewritten key, and the phase map.

What exists is kept; running it again changes nothing.`

func newCmdCohortPrepare(f *factory) *cobra.Command {
	o := &CohortOpsOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:     "prepare -c FILE --migration NAME",
		Short:   "create the target's tables and the phase store, and check the library opens: the first step of a staged cutover",
		Long:    cohortPrepareLong,
		Example: "  rekey cohort prepare -c migration.yaml --migration logs-v2",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Config == "" || o.Migration == "" {
				return usagef("-c FILE and --migration NAME are required")
			}
			cfg, err := loadConfig(o.Config, o.IO.err)
			if err != nil {
				return err
			}
			p, err := operator.Prepare(cmd.Context(), cfg, o.Migration, migration.Options{Notes: notesTo(o.IO.out)})
			if len(p.PhaseStoreDDL) > 0 {
				fmt.Fprintf(o.IO.out, "created the phase store: %s\n", strings.Join(operator.DDLNames(p.PhaseStoreDDL), ", "))
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(o.IO.out, "migration %s is ready: the target's tables, the phase store, and the application library opens; deploy the application, then 'rekey cohort advance -c %s --migration %s --percent 1 --to dual_write'\n", o.Migration, o.Config, o.Migration)
			return nil
		},
	}
	cohortOpsFlags(cmd, o)
	return cmd
}
