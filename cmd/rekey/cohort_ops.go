package main

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/internal/config"
)

// CohortOpsOptions are the flags of the phase commands (status, log,
// move, rollback).
type CohortOpsOptions struct {
	IO        stdio
	Config    string
	Migration string
	Cohorts   string
	To        string
	Why       string
	Force     bool
	// Percent, for advance, is the share of the users to have at To or
	// beyond after the move (the next cohorts in order are moved);
	// MaxGrowth and Dwell bound each step.
	Percent   float64
	MaxGrowth float64
	Dwell     time.Duration
}

// phaseStore opens the phase store at the config's target (creating its
// Spanner tables where missing when create is set: a first move needs
// them) and returns it with the config.
func phaseStore(ctx context.Context, o *CohortOpsOptions, create bool) (cutover.Store, *config.Config, func(), error) {
	if o.Config == "" || o.Migration == "" {
		return nil, nil, nil, usagef("-c FILE and --migration NAME are required")
	}
	cfg, err := loadConfig(o.Config, o.IO.err)
	if err != nil {
		return nil, nil, nil, err
	}
	if t := cfg.Target.Type; t != config.TypeSpanner && t != config.TypeDatastore {
		return nil, nil, nil, usagef("the phase store is kept at a Spanner or Datastore target; this config's target is %s", t)
	}
	st, done, err := cutover.OpenStore(ctx, cfg.Target, create)
	if err != nil {
		return nil, nil, nil, err
	}
	return st, cfg, done, nil
}

func cohortOpsFlags(cmd *cobra.Command, o *CohortOpsOptions) {
	cmd.Flags().StringVarP(&o.Config, "config", "c", "", "the migration's config file (YAML)")
	cmd.Flags().StringVar(&o.Migration, "migration", "", "the migration's name in the phase store")
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
}

func newCmdCohortStatus(f *factory) *cobra.Command {
	o := &CohortOpsOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "status -c FILE --migration NAME",
		Short: "print the cohorts' phases, contiguous cohorts merged into ranges",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, cfg, done, err := phaseStore(cmd.Context(), o, false)
			if err != nil {
				return err
			}
			defer done()
			buckets := cfg.Cohort.Buckets
			m, err := st.Load(cmd.Context(), o.Migration)
			if err != nil {
				return err
			}
			printStatus(o.IO, m, buckets)
			return nil
		},
	}
	cohortOpsFlags(cmd, o)
	return cmd
}

// printStatus writes the map as a table: ranges of one phase (neighbours
// merged whatever their move), their cohorts and share of the users, the
// latest change and by whom; the cohorts no move touched are old.
func printStatus(io stdio, m *cutover.Map, buckets int) {
	if m.Buckets > 0 {
		buckets = m.Buckets
	}
	w := tabwriter.NewWriter(io.out, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "COHORTS\tPHASE\tCOUNT\tUSERS\tSINCE\tBY\n")
	type row struct {
		r     cohort.Range
		p     cutover.Phase
		since time.Time
		by    string
	}
	var rows []row
	next := 0
	add := func(r row) {
		if n := len(rows); n > 0 && rows[n-1].p == r.p && rows[n-1].r.Last+1 == r.r.First {
			rows[n-1].r.Last = r.r.Last
			if r.since.After(rows[n-1].since) {
				rows[n-1].since, rows[n-1].by = r.since, r.by
			}
			return
		}
		rows = append(rows, r)
	}
	for _, s := range m.Spans {
		if s.First > next {
			add(row{r: cohort.Range{First: next, Last: s.First - 1}, p: cutover.Old})
		}
		add(row{r: s.Range, p: s.Phase, since: s.Since, by: s.By})
		next = s.Last + 1
	}
	if next < buckets {
		add(row{r: cohort.Range{First: next, Last: buckets - 1}, p: cutover.Old})
	}
	for _, r := range rows {
		since, by := "-", "-"
		if !r.since.IsZero() {
			since, by = r.since.UTC().Format(time.RFC3339), r.by
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%.2f%%\t%s\t%s\n", r.r, r.p, r.r.Len(), 100*float64(r.r.Len())/float64(buckets), since, by)
	}
	_ = w.Flush()
	fmt.Fprintf(io.out, "migration %s: %d cohorts, version %d\n", m.Migration, buckets, m.Version)
}

func newCmdCohortLog(f *factory) *cobra.Command {
	o := &CohortOpsOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "log -c FILE --migration NAME",
		Short: "print the audit of the migration's phase moves (and cleanups), oldest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, _, done, err := phaseStore(cmd.Context(), o, false)
			if err != nil {
				return err
			}
			defer done()
			audits, err := st.Audits(cmd.Context(), o.Migration)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(o.IO.out, 2, 4, 2, ' ', 0)
			fmt.Fprintf(w, "VERSION\tAT\tWHO\tCOHORTS\tFROM\tTO\tWHY\n")
			for _, a := range audits {
				to := string(a.To)
				if a.Action != "" {
					to = "(" + a.Action + ")" // a note: the cohorts stayed where they were
				}
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Version, a.At.UTC().Format(time.RFC3339), a.Who, a.Cohorts, a.From, to, auditWhy(a))
			}
			return w.Flush()
		},
	}
	cohortOpsFlags(cmd, o)
	return cmd
}

// auditWhy is an audit record's reason, said to be forced if it was.
func auditWhy(a cutover.Audit) string {
	if a.Forced {
		return "(forced) " + a.Why
	}
	return a.Why
}

// newCmdCohortMove is `rekey cohort advance` (rollback false) or `rekey
// cohort rollback`.
func newCmdCohortMove(f *factory, rollback bool) *cobra.Command {
	o := &CohortOpsOptions{IO: f.IO}
	use, short := "advance -c FILE --migration NAME --cohorts LIST --to PHASE", "move cohorts forward to a phase, by the rules"
	if rollback {
		use, short = "rollback -c FILE --migration NAME --cohorts LIST [--to dual_write|old]", "move cohorts back to dual_write (default) or old"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			to := o.To
			if rollback && to == "" {
				to = string(cutover.DualWrite)
			}
			p, err := cutover.ParsePhase(to)
			if err != nil {
				return usagef("--to: %v", err)
			}
			if rollback && p != cutover.DualWrite && p != cutover.Old {
				return usagef("rollback --to: want dual_write or old, got %s", p)
			}
			if (o.Cohorts == "") == (o.Percent == 0) {
				if rollback {
					return usagef("--cohorts LIST is required (e.g. 0-99,500)")
				}
				return usagef("give --cohorts LIST (e.g. 0-99,500) or --percent P")
			}
			st, cfg, done, err := phaseStore(cmd.Context(), o, true)
			if err != nil {
				return err
			}
			defer done()
			buckets := cfg.Cohort.Buckets
			var rs []cohort.Range
			if o.Percent != 0 {
				m, err := st.Load(cmd.Context(), o.Migration)
				if err != nil {
					return err
				}
				if rs, err = nextCohorts(m, buckets, p, o, time.Now()); err != nil {
					return err
				}
			} else if rs, err = cohort.Parse(o.Cohorts, buckets); err != nil {
				return usagef("--cohorts: %v", err)
			}
			m, a, err := st.Move(cmd.Context(), cutover.Move{Migration: o.Migration, Buckets: buckets, Cohorts: rs, To: p, Who: operator(), Why: o.Why, Force: o.Force, Rules: cutover.RulesFor(cfg)})
			if err != nil {
				return err
			}
			fmt.Fprintf(o.IO.out, "moved cohorts %s from %s to %s (version %d)\n", a.Cohorts, a.From, a.To, a.Version)
			printStatus(o.IO, m, buckets)
			return nil
		},
	}
	cohortOpsFlags(cmd, o)
	cmd.Flags().StringVar(&o.Cohorts, "cohorts", "", "cohorts and ranges, e.g. 0-99,500")
	cmd.Flags().StringVar(&o.To, "to", "", "the phase to move to")
	cmd.Flags().StringVar(&o.Why, "why", "", "the reason, for the audit")
	cmd.Flags().BoolVar(&o.Force, "force", false, "skip the rules (said so in the audit)")
	if !rollback {
		cmd.Flags().Float64Var(&o.Percent, "percent", 0, "move the next cohorts in order so that this share of the users (0-100) is at --to or beyond")
		cmd.Flags().Float64Var(&o.MaxGrowth, "max-growth", 2, "with --percent: the most the share at --to or beyond may grow by in one step (2: double)")
		cmd.Flags().DurationVar(&o.Dwell, "dwell", 10*time.Minute, "with --percent: the least time since the last move to --to")
		cmd.Use = "advance -c FILE --migration NAME (--cohorts LIST | --percent P) --to PHASE"
	}
	_ = cmd.RegisterFlagCompletionFunc("to", func(_ *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return phaseCompletions(rollback, prefix), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// phaseWhat says what the application does in each phase, for completion.
var phaseWhat = map[cutover.Phase]string{
	cutover.Old:        "old keys only",
	cutover.DualWrite:  "writes old, then new; reads old",
	cutover.Backfilled: "the backfill copied the cohorts (rekey run --cohorts moves them)",
	cutover.Verified:   "verify found old and new equal (rekey verify --mark moves them)",
	cutover.Shadow:     "reads both, returns old, compares",
	cutover.ReadNew:    "new authoritative: writes new, then old; reads new",
	cutover.NewOnly:    "new keys only",
	cutover.Done:       "the old records may go (rekey cohort cleanup)",
}

// phaseCompletions are the phases starting with prefix that --to may
// name: for advance every phase after old, in order; for rollback
// dual_write and old.
func phaseCompletions(rollback bool, prefix string) []cobra.Completion {
	phases := cutover.Phases[1:]
	if rollback {
		phases = []cutover.Phase{cutover.DualWrite, cutover.Old}
	}
	var out []cobra.Completion
	for _, p := range phases {
		if strings.HasPrefix(string(p), strings.ToLower(prefix)) {
			out = append(out, cobra.CompletionWithDesc(string(p), phaseWhat[p]))
		}
	}
	return out
}

// nextCohorts picks, for advance --percent, the cohorts to move to to:
// the lowest-numbered cohorts in a phase that may move to to, enough that
// o.Percent of the users are at to or beyond. New-key traffic grows
// gradually (a burst onto a fresh key range is a hotspot itself): the
// share may grow by at most o.MaxGrowth times per step (a first step of
// at most 1%), and not within o.Dwell of the last move to to.
func nextCohorts(m *cutover.Map, buckets int, to cutover.Phase, o *CohortOpsOptions, now time.Time) ([]cohort.Range, error) {
	if o.Percent <= 0 || o.Percent > 100 {
		return nil, usagef("--percent: want more than 0 and at most 100, got %g", o.Percent)
	}
	rank := func(p cutover.Phase) int {
		for i, q := range cutover.Phases {
			if q == p {
				return i
			}
		}
		return -1
	}
	at, last := 0, time.Time{}
	var candidates []int
	for c := 0; c < buckets; c++ {
		p := m.Phase(c)
		switch {
		case rank(p) >= rank(to):
			at++
		case cutover.Check(cohort.Range{First: c, Last: c}, p, to, time.Time{}, now, cutover.Rules{DualWriteHold: time.Nanosecond}) == nil:
			candidates = append(candidates, c)
		}
	}
	for _, s := range m.Spans {
		if s.Phase == to && s.Since.After(last) {
			last = s.Since
		}
	}
	share := 100 * float64(at) / float64(buckets)
	want := int(o.Percent/100*float64(buckets) + 0.5)
	switch {
	case want <= at:
		return nil, fmt.Errorf("%.2f%% of the users are at %s or beyond already (%d cohorts); nothing to move", share, to, at)
	case at == 0 && o.Percent > 1:
		return nil, fmt.Errorf("a first step to %s moves at most 1%% of the users, not %g%%", to, o.Percent)
	case at > 0 && o.Percent > share*o.MaxGrowth:
		return nil, fmt.Errorf("%g%% is more than %g times the %.2f%% at %s now: grow in smaller steps (--max-growth)", o.Percent, o.MaxGrowth, share, to)
	case !last.IsZero() && now.Sub(last) < o.Dwell:
		return nil, fmt.Errorf("the last move to %s was %s ago, less than the dwell time %s (--dwell)", to, now.Sub(last).Round(time.Second), o.Dwell)
	case want-at > len(candidates):
		return nil, fmt.Errorf("%d more cohorts are needed at %s, only %d can move there now", want-at, to, len(candidates))
	}
	var rs []cohort.Range
	for _, c := range candidates[:want-at] {
		rs = append(rs, cohort.Range{First: c, Last: c})
	}
	return cohort.Merge(rs), nil
}

// operator names who moves cohorts in the audit: user@host.
func operator() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	h, _ := os.Hostname()
	return strings.TrimSuffix(name+"@"+h, "@")
}
