package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/cohort"
)

// CohortIDOptions are the parsed flags and arguments of `rekey cohort id`.
type CohortIDOptions struct {
	IO     stdio
	Config string
	// Buckets is --buckets; BucketsSet says whether it was given (else
	// the config's cohort.buckets, else cohort.DefaultBuckets).
	Buckets    int
	BucketsSet bool
	// IDs are the ids given as arguments; none means standard input.
	IDs []string
}

const cohortLong = `Users' cohorts, the unit a staged cutover moves to the new keys:

  cohort = MOD(MOD(FARM_FINGERPRINT(id), B) + B, B)

of the user id's text, B cohorts (10000 unless the config's cohort.buckets
says otherwise). The same function runs in Go, in Spanner and BigQuery SQL,
and in any language with farmhash's Fingerprint64.`

const cohortIDLong = `Prints each user id with its cohort, "ID<TAB>COHORT", one a line: the ids
given as arguments, else the lines of standard input, one id a line (a
CR before the line feed is dropped; nothing else is trimmed, and an empty
line is the empty id).

The cohort is MOD(MOD(FARM_FINGERPRINT(id), B) + B, B) of the id's bytes,
B = --buckets, else cohort.buckets of the config given with -c, else 10000.
A user id held as a number is its decimal digits, as bytes its base64
(see cohort.user in the README).`

func newCmdCohort(f *factory, runID func(*CohortIDOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cohort",
		Short: "users' cohorts for a staged cutover: rekey cohort id ID...",
		Long:  cohortLong,
		Args:  unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Help()
			return usagef("cohort: no subcommand given")
		},
	}
	cmd.SuggestionsMinimumDistance = 2
	cmd.AddCommand(newCmdCohortID(f, runID), newCmdCohortPrepare(f), newCmdCohortStatus(f), newCmdCohortLog(f), newCmdCohortMove(f, false), newCmdCohortMove(f, true), newCmdCohortCleanup(f, nil))
	return cmd
}

func newCmdCohortID(f *factory, runF func(*CohortIDOptions) error) *cobra.Command {
	opts := &CohortIDOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "id [--buckets B] [-c FILE] [ID...]",
		Short: "print the cohort of each user id (arguments, or stdin one a line)",
		Long:  cohortIDLong,
		Example: `  rekey cohort id alice bob
  rekey cohort id --buckets 100 < user-ids.txt
  rekey cohort id -c migration.yaml 42`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.BucketsSet = cmd.Flags().Changed("buckets")
			if opts.BucketsSet && (opts.Buckets < 1 || opts.Buckets > cohort.MaxBuckets) {
				return usagef("cohort id: --buckets must be 1..%d, got %d", cohort.MaxBuckets, opts.Buckets)
			}
			opts.IDs = args
			if runF != nil {
				return runF(opts)
			}
			return runCohortID(opts)
		},
	}
	cmd.Flags().IntVar(&opts.Buckets, "buckets", 0, fmt.Sprintf("number of cohorts, 1..%d (default: the config's cohort.buckets with -c, else %d)", cohort.MaxBuckets, cohort.DefaultBuckets))
	cmd.Flags().StringVarP(&opts.Config, "config", "c", "", "config file (YAML) whose cohort.buckets to use")
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
	return cmd
}

func runCohortID(o *CohortIDOptions) error {
	buckets := cohort.DefaultBuckets
	if o.Config != "" {
		cfg, err := loadConfig(o.Config, o.IO.err)
		if err != nil {
			return err
		}
		buckets = cfg.Cohort.Buckets
	}
	if o.BucketsSet {
		buckets = o.Buckets
	}
	w := bufio.NewWriter(o.IO.out)
	emit := func(id string) {
		fmt.Fprintf(w, "%s\t%d\n", id, cohort.Of(id, buckets))
	}
	if len(o.IDs) > 0 {
		for _, id := range o.IDs {
			emit(id)
		}
		return w.Flush()
	}
	if o.IO.in == nil {
		return usagef("cohort id: no ids given and no standard input")
	}
	r := bufio.NewReader(o.IO.in)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			line = strings.TrimSuffix(line, "\n")
			emit(strings.TrimSuffix(line, "\r"))
		}
		if r.Buffered() == 0 {
			// Before waiting for more input: an operator typing ids sees
			// each cohort at once.
			if ferr := w.Flush(); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			_ = w.Flush()
			return fmt.Errorf("cohort id: reading standard input: %w", err)
		}
	}
	return w.Flush()
}
