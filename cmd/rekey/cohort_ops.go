package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/migration/config"
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

// phaseStore opens the phase store at the config's target ('rekey
// cohort prepare' creates it) and returns it with the config.
func phaseStore(ctx context.Context, o *CohortOpsOptions) (phases.Store, *config.Config, func(), error) {
	if o.Config == "" || o.Migration == "" {
		return nil, nil, nil, usagef("-c FILE and --migration NAME are required")
	}
	cfg, err := loadConfig(o.Config, o.IO.err)
	if err != nil {
		return nil, nil, nil, err
	}
	if t := cfg.Target.Type; !operator.KeepsPhases(t) {
		return nil, nil, nil, usagef("%v; this config's target is %s", operator.ErrNoPhaseStoreKind, t)
	}
	st, done, err := operator.OpenStore(ctx, cfg.Target, false)
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
			st, cfg, done, err := phaseStore(cmd.Context(), o)
			if err != nil {
				return err
			}
			defer done()
			m, err := loadMap(cmd.Context(), st, o.Migration)
			if err != nil {
				return err
			}
			printStatus(o.IO, m, cfg.Cohort.Buckets)
			return nil
		},
	}
	cohortOpsFlags(cmd, o)
	return cmd
}

// loadMap reads the migration's phase map; a phase store that does not
// exist yet (no move was ever made at the target) is an empty map, every
// cohort old, as a Datastore store without the migration's entities.
// Nothing is created: rekey cohort prepare does that.
func loadMap(ctx context.Context, st phases.Store, migration string) (*phases.Map, error) {
	m, err := st.Load(ctx, migration)
	if errors.Is(err, phases.ErrNoPhaseStore) {
		return &phases.Map{Migration: migration}, nil
	}
	return m, err
}

// rolledBack says whether s's cohorts came to their phase by a move back
// (a rollback, a reverse backfill), from what phase.
func rolledBack(s phases.Span) (phases.Phase, bool) {
	return s.Prev, s.Prev != "" && phaseRank(s.Prev) > phaseRank(s.Phase)
}

// phaseRank is p's place in phases.Phases (-1 for none).
func phaseRank(p phases.Phase) int {
	for i, q := range phases.Phases {
		if q == p {
			return i
		}
	}
	return -1
}

// printStatus writes the map as a table: ranges of one phase and one
// history (neighbours that moved there merged whatever their move, those
// moved back there apart, by the phase they left, and those no move ever
// touched apart), their cohorts and share of the users, the latest change
// and by whom, and a note for cohorts moved back.
func printStatus(io stdio, m *phases.Map, buckets int) {
	if m.Buckets > 0 {
		buckets = m.Buckets
	}
	w := tabwriter.NewWriter(io.out, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "COHORTS\tPHASE\tCOUNT\tUSERS\tSINCE\tBY\tNOTE\n")
	type row struct {
		r     cohort.Range
		p     phases.Phase
		since time.Time
		by    string
		note  string
	}
	var rows []row
	next := 0
	add := func(r row) {
		if n := len(rows); n > 0 {
			last := &rows[n-1]
			if last.p == r.p && last.r.Last+1 == r.r.First && last.note == r.note && last.since.IsZero() == r.since.IsZero() {
				last.r.Last = r.r.Last
				if r.since.After(last.since) {
					last.since, last.by = r.since, r.by
				}
				return
			}
		}
		rows = append(rows, r)
	}
	for _, s := range m.Spans {
		if s.First > next {
			add(row{r: cohort.Range{First: next, Last: s.First - 1}, p: phases.Old})
		}
		r := row{r: s.Range, p: s.Phase, since: s.Since, by: s.By}
		if from, ok := rolledBack(s); ok {
			r.note = "rolled back from " + string(from)
		}
		add(r)
		next = s.Last + 1
	}
	if next < buckets {
		add(row{r: cohort.Range{First: next, Last: buckets - 1}, p: phases.Old})
	}
	for _, r := range rows {
		since, by := "-", "-"
		if !r.since.IsZero() {
			since, by = r.since.UTC().Format(time.RFC3339), r.by
		}
		note := r.note
		if r.since.IsZero() {
			note = "never moved"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%.2f%%\t%s\t%s\t%s\n", r.r, r.p, r.r.Len(), 100*float64(r.r.Len())/float64(buckets), since, by, note)
	}
	_ = w.Flush()
	if m.Version == 0 {
		fmt.Fprintf(io.out, "migration %s: %d cohorts, no move yet (every cohort old)\n", m.Migration, buckets)
		return
	}
	fmt.Fprintf(io.out, "migration %s: %d cohorts, version %d\n", m.Migration, buckets, m.Version)
}

func newCmdCohortLog(f *factory) *cobra.Command {
	o := &CohortOpsOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "log -c FILE --migration NAME",
		Short: "print the audit of the migration's phase moves (and cleanups), oldest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, _, done, err := phaseStore(cmd.Context(), o)
			if err != nil {
				return err
			}
			defer done()
			audits, err := st.Audits(cmd.Context(), o.Migration)
			if errors.Is(err, phases.ErrNoPhaseStore) {
				audits, err = nil, nil // no move yet
			}
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
func auditWhy(a phases.Audit) string {
	if a.Forced {
		return "(forced) " + a.Why
	}
	return a.Why
}

const cohortAdvanceLong = `Moves cohorts forward to a phase (--to), by the rules: one phase at a time
(shadow may be skipped), dual_write and read_new held for the config's
cohort.cache_ttl + cohort.skew before the next phase.

--cohorts A-B,C moves the cohorts listed; those at --to already stay as
they are (said so), and cohorts beyond --to are refused (rollback moves
back). --percent P makes P% of the users be at --to or beyond: the
cohorts there already count, and the next cohorts in order that may move
there move until at least P% are; if P% are there already, nothing moves.
The share at --to or beyond may at most double in one step
(--max-growth), a first step takes at most 1%, and a step waits --dwell
after the last move to --to. --cohorts is held to the same growth, with
--max-growth 10 unless given (the operator guide's 1%, 10%, 50%, 100%):
a first step of at most 1% of the users, each later one at most ten
times the share at --to or beyond; --force moves anyway. The move is one transaction at the phase
store with its audit record.

Before it moves anything, advance checks that the migration is ready for
its users to be on new: the phase store at the target is whole (phase
map, audit, repair log, touched marks) and the application library opens
on the migration (old's and new's tables, new's with the rewritten key).
What is missing is named; 'rekey cohort prepare' makes it.`

const cohortRollbackLong = `Moves cohorts back to dual_write (default) or old, by the rules: from
read_new only to dual_write, once read_new has been held for the config's
cohort.cache_ttl + cohort.skew; from new_only on, only a reverse backfill
(rekey run --reverse) goes back. Cohorts at --to already stay as they are
(said so); cohorts before --to are refused (advance moves forward).`

// newCmdCohortMove is `rekey cohort advance` (rollback false) or `rekey
// cohort rollback`.
func newCmdCohortMove(f *factory, rollback bool) *cobra.Command {
	o := &CohortOpsOptions{IO: f.IO}
	use, short := "advance -c FILE --migration NAME --cohorts LIST --to PHASE", "move cohorts forward to a phase, by the rules"
	if rollback {
		use, short = "rollback -c FILE --migration NAME --cohorts LIST [--to dual_write|old]", "move cohorts back to dual_write (default) or old"
	}
	long := cohortAdvanceLong
	if rollback {
		long = cohortRollbackLong
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			to := o.To
			if rollback && to == "" {
				to = string(phases.DualWrite)
			}
			p, err := phases.ParsePhase(to)
			if err != nil {
				return usagef("--to: %v", err)
			}
			if rollback && p != phases.DualWrite && p != phases.Old {
				return usagef("rollback --to: want dual_write or old, got %s", p)
			}
			if (o.Cohorts == "") == (o.Percent == 0) {
				if rollback {
					return usagef("--cohorts LIST is required (e.g. 0-99,500)")
				}
				return usagef("give --cohorts LIST (e.g. 0-99,500) or --percent P")
			}
			var asked []cohort.Range
			if o.Percent != 0 {
				if o.Percent < 0 || o.Percent > 100 {
					return usagef("--percent: want more than 0 and at most 100, got %g", o.Percent)
				}
			}
			st, cfg, done, err := phaseStore(cmd.Context(), o)
			if err != nil {
				return err
			}
			defer done()
			if !rollback {
				// Forward moves put the cohorts' users on new: what
				// the phases need must be there (a rollback needs no
				// more than the move that came before it).
				if err := operator.Ready(cmd.Context(), cfg, o.Migration); err != nil {
					return err
				}
			}
			buckets := cfg.Cohort.Buckets
			if o.Cohorts != "" {
				if asked, err = cohort.Parse(o.Cohorts, buckets); err != nil {
					return usagef("--cohorts: %v", err)
				}
			}
			if o.MaxGrowth == 0 {
				o.MaxGrowth = defaultGrowth(o)
			} else if o.MaxGrowth < 1 {
				return usagef("--max-growth: want 1 or more, got %g", o.MaxGrowth)
			}
			return runCohortMove(cmd.Context(), o, st, phases.RulesFor(cfg), buckets, asked, p, rollback)
		},
	}
	cohortOpsFlags(cmd, o)
	cmd.Flags().StringVar(&o.Cohorts, "cohorts", "", "cohorts and ranges, e.g. 0-99,500")
	cmd.Flags().StringVar(&o.To, "to", "", "the phase to move to")
	cmd.Flags().StringVar(&o.Why, "why", "", "the reason, for the audit")
	cmd.Flags().BoolVar(&o.Force, "force", false, "skip the rules (said so in the audit)")
	if !rollback {
		cmd.Flags().Float64Var(&o.Percent, "percent", 0, "move the next cohorts in order so that this share of the users (0-100) is at --to or beyond")
		cmd.Flags().Float64Var(&o.MaxGrowth, "max-growth", 0, "the most the share at --to or beyond may grow by in one step (default: 2, double, with --percent; 10 with --cohorts, the guide's 1%, 10%, 50%, 100%)")
		cmd.Flags().DurationVar(&o.Dwell, "dwell", 10*time.Minute, "with --percent: the least time since the last move to --to")
		cmd.Use = "advance -c FILE --migration NAME (--cohorts LIST | --percent P) --to PHASE"
	}
	_ = cmd.RegisterFlagCompletionFunc("to", func(_ *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return phaseCompletions(rollback, prefix), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// phaseWhat says what the application does in each phase, for completion.
var phaseWhat = map[phases.Phase]string{
	phases.Old:        "old keys only",
	phases.DualWrite:  "writes old, then new; reads old",
	phases.Backfilled: "the backfill copied the cohorts (rekey run --cohorts moves them)",
	phases.Verified:   "verify found old and new equal (rekey verify --mark moves them)",
	phases.Shadow:     "reads both, returns old, compares",
	phases.ReadNew:    "new authoritative: writes new, then old; reads new",
	phases.NewOnly:    "new keys only",
	phases.Done:       "the old records may go (rekey cohort cleanup)",
}

// phaseCompletions are the phases starting with prefix that --to may
// name: for advance every phase after old, in order; for rollback
// dual_write and old.
func phaseCompletions(rollback bool, prefix string) []cobra.Completion {
	names := phases.Phases[1:]
	if rollback {
		names = []phases.Phase{phases.DualWrite, phases.Old}
	}
	var out []cobra.Completion
	for _, p := range names {
		if strings.HasPrefix(string(p), strings.ToLower(prefix)) {
			out = append(out, cobra.CompletionWithDesc(string(p), phaseWhat[p]))
		}
	}
	return out
}

// movePlan is what a move is to do: the cohorts to move, and what to say
// before the move (cohorts left where they are) and after it.
type movePlan struct {
	move  []cohort.Range
	said  []string
	after string
}

// runCohortMove plans the move (the cohorts asked, or the next ones for
// --percent) on the stored map and makes it at that map's version, so
// that what was planned is what is judged; when another move came first
// it plans again on the new map.
func runCohortMove(ctx context.Context, o *CohortOpsOptions, st phases.Store, rules phases.Rules, buckets int, asked []cohort.Range, to phases.Phase, rollback bool) error {
	for attempt := 1; ; attempt++ {
		m, err := st.Load(ctx, o.Migration)
		if err != nil {
			return err
		}
		var plan movePlan
		if o.Percent != 0 {
			plan, err = nextCohorts(m, buckets, to, o, time.Now())
		} else {
			plan, err = cohortsToMove(m, asked, to, rollback, o.Force)
		}
		if err == nil && !rollback && o.Percent == 0 && !o.Force {
			err = growthGuard(m, buckets, to, plan.move, o.MaxGrowth)
		}
		if err != nil {
			return err
		}
		for _, line := range plan.said {
			fmt.Fprintln(o.IO.out, line)
		}
		if len(plan.move) == 0 {
			printStatus(o.IO, m, buckets)
			return nil
		}
		m2, a, err := st.Move(ctx, phases.Move{Migration: o.Migration, Buckets: buckets, Cohorts: plan.move, To: to, Version: m.Version, Who: operatorName(), Why: o.Why, Force: o.Force, Rules: rules})
		if errors.Is(err, phases.ErrConflict) && attempt < 5 {
			fmt.Fprintf(o.IO.out, "another move came first (version %d): planning again\n", m.Version+1)
			continue
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(o.IO.out, "moved cohorts %s from %s to %s (version %d)\n", a.Cohorts, a.From, a.To, a.Version)
		if !rollback {
			at, _ := atOrBeyond(m2, buckets, to)
			fmt.Fprintf(o.IO.out, "%s of the users are at %s or beyond now (%d cohorts)\n", pct(at, buckets), to, at)
		}
		printStatus(o.IO, m2, buckets)
		return nil
	}
}

// defaultGrowth is --max-growth's default: 2 (double) for --percent's
// automatic steps, 10 for a list of cohorts (the operator guide's 1%,
// 10%, 50%, 100%).
func defaultGrowth(o *CohortOpsOptions) float64 {
	if o.Percent != 0 {
		return 2
	}
	return 10
}

// growthGuard refuses an advance --cohorts that would grow the share of
// the users at to or beyond too fast: new-key traffic grows gradually (a
// burst onto a fresh key range is a hotspot itself, and a fault in the
// new path reaches fewer users), as --percent's steps do: a first step of
// at most 1% (or one cohort), each later one at most maxGrowth times the
// share there already. --force moves anyway (said so in the audit).
func growthGuard(m *phases.Map, buckets int, to phases.Phase, move []cohort.Range, maxGrowth float64) error {
	n := 0
	for _, r := range move {
		for _, seg := range m.Segments(r) {
			if phases.Check(seg.Range, seg.Phase, to, time.Time{}, time.Now(), phases.Rules{DualWriteHold: time.Nanosecond}) != nil {
				return nil // the store refuses the move by the phase rules, and says why
			}
		}
		n += r.Len()
	}
	if n == 0 {
		return nil
	}
	at, _ := atOrBeyond(m, buckets, to)
	after := at + n
	first := max(int(math.Ceil(float64(buckets)/100-1e-9)), 1)
	switch {
	case at == 0 && after > first:
		return fmt.Errorf("%w: cohorts %s would put %s of the users at %s at once, and none are there yet: a first step moves at most 1%% (%s, e.g. --cohorts %s or --percent 1); --force to move anyway (said so in the audit)",
			phases.ErrIllegal, cohort.Format(move), pct(after, buckets), to, plural(first, "cohort"), cohort.Format([]cohort.Range{{First: 0, Last: first - 1}}))
	case at > 0 && float64(after) > float64(at)*maxGrowth+1e-9:
		return fmt.Errorf("%w: cohorts %s would take the users at %s or beyond from %s to %s in one step, more than %g times as many (--max-growth): at most %d more cohorts now; --force to move anyway (said so in the audit)",
			phases.ErrIllegal, cohort.Format(move), to, pct(at, buckets), pct(after, buckets), maxGrowth, int(float64(at)*maxGrowth+1e-9)-at)
	}
	return nil
}

// pct is n cohorts' share of buckets, as a percentage.
func pct(n, buckets int) string { return fmt.Sprintf("%.2f%%", 100*float64(n)/float64(buckets)) }

// atOrBeyond counts the cohorts at to or a later phase, and returns the
// others, before to.
func atOrBeyond(m *phases.Map, buckets int, to phases.Phase) (int, []int) {
	at := 0
	var before []int
	for c := 0; c < buckets; c++ {
		if phaseRank(m.Phase(c)) >= phaseRank(to) {
			at++
		} else {
			before = append(before, c)
		}
	}
	return at, before
}

// cohortsToMove plans advance or rollback --cohorts: the cohorts asked
// that are at to already stay as they are (said so), the rest move; an
// advance of cohorts beyond to, or a rollback of cohorts before it, is
// refused unless forced (the store's rules judge the rest: a phase
// skipped, a hold not kept).
func cohortsToMove(m *phases.Map, asked []cohort.Range, to phases.Phase, rollback, force bool) (movePlan, error) {
	var plan movePlan
	var already, wrong []cohort.Range
	for _, r := range cohort.Merge(asked) {
		for _, seg := range m.Segments(r) {
			switch d := phaseRank(seg.Phase) - phaseRank(to); {
			case d == 0:
				already = append(already, seg.Range)
			case !force && (d > 0 && !rollback || d < 0 && rollback):
				wrong = append(wrong, seg.Range)
			default:
				plan.move = append(plan.move, seg.Range)
			}
		}
	}
	if len(wrong) > 0 {
		if rollback {
			return plan, fmt.Errorf("%w: cohorts %s are before %s (%s): rollback moves cohorts back only ('rekey cohort advance' moves them forward)", phases.ErrIllegal, cohort.Format(cohort.Merge(wrong)), to, m.PhasesOf(wrong))
		}
		return plan, fmt.Errorf("%w: cohorts %s are beyond %s (%s): advance moves cohorts forward only ('rekey cohort rollback' moves them back)", phases.ErrIllegal, cohort.Format(cohort.Merge(wrong)), to, m.PhasesOf(wrong))
	}
	if len(already) > 0 {
		what := "left as they are"
		if len(plan.move) == 0 {
			what = "nothing to move"
		}
		plan.said = append(plan.said, fmt.Sprintf("cohorts %s are at %s already: %s", cohort.Format(cohort.Merge(already)), to, what))
	}
	plan.move = cohort.Merge(plan.move)
	return plan, nil
}

// nextCohorts plans advance --percent P --to PHASE: P%% of the users are
// to be at PHASE or a later phase. The cohorts there already count; the
// next cohorts in order that are before PHASE and may move there (by the
// phase rules, their holds left to the store) move until enough are: at
// least P%%. New-key traffic grows gradually (a burst onto a fresh key
// range is a hotspot itself): the share at PHASE or beyond may grow by at
// most o.MaxGrowth times per step (a first step of at most 1%%), and not
// within o.Dwell of the last move to PHASE. Enough there already is
// nothing to move.
func nextCohorts(m *phases.Map, buckets int, to phases.Phase, o *CohortOpsOptions, now time.Time) (movePlan, error) {
	var plan movePlan
	if o.Percent <= 0 || o.Percent > 100 {
		return plan, usagef("--percent: want more than 0 and at most 100, got %g", o.Percent)
	}
	at, before := atOrBeyond(m, buckets, to)
	var candidates, blocked []int
	for _, c := range before {
		if phases.Check(cohort.Range{First: c, Last: c}, m.Phase(c), to, time.Time{}, now, phases.Rules{DualWriteHold: time.Nanosecond}) == nil {
			candidates = append(candidates, c)
		} else {
			blocked = append(blocked, c)
		}
	}
	last := time.Time{}
	for _, s := range m.Spans {
		if s.Phase == to && s.Since.After(last) {
			last = s.Since
		}
	}
	share := pct(at, buckets)
	// The least count of cohorts that holds P% of the users (a hair
	// less, for the float's rounding of a whole count).
	want := min(int(math.Ceil(o.Percent/100*float64(buckets)-1e-9)), buckets)
	switch {
	case want <= at:
		plan.said = append(plan.said, fmt.Sprintf("%s of the users are at %s or beyond already (%d cohorts), at least the %g%% asked: nothing to move", share, to, at, o.Percent))
		return plan, nil
	case at == 0 && o.Percent > 1:
		return plan, fmt.Errorf("no users are at %s or beyond yet: a first step moves at most 1%% of them, not %g%%", to, o.Percent)
	case at > 0 && o.Percent > 100*float64(at)/float64(buckets)*o.MaxGrowth:
		return plan, fmt.Errorf("%s of the users are at %s or beyond now; %g%% would be more than %g times as many in one step: at most %.2f%% now (--max-growth)",
			share, to, o.Percent, o.MaxGrowth, 100*float64(at)/float64(buckets)*o.MaxGrowth)
	case !last.IsZero() && now.Sub(last) < o.Dwell:
		return plan, fmt.Errorf("the last move to %s was %s ago, less than the dwell time %s (--dwell)", to, now.Sub(last).Round(time.Second), o.Dwell)
	case want-at > len(candidates):
		err := fmt.Errorf("%g%% of the users at %s or beyond needs %d more cohorts there; %d can move there now", o.Percent, to, want-at, len(candidates))
		if len(blocked) > 0 {
			rs := cohortRanges(blocked)
			err = fmt.Errorf("%w (cohorts %s cannot: %s; %s)", err, cohort.Format(rs), m.PhasesOf(rs), phaseNeeds(to))
		}
		return plan, err
	}
	plan.move = cohortRanges(candidates[:want-at])
	plan.said = append(plan.said, fmt.Sprintf("%s of the users are at %s or beyond (%d cohorts); for %g%%: cohorts %s (%s) move", share, to, at, o.Percent, cohort.Format(plan.move), pct(want-at, buckets)))
	return plan, nil
}

// cohortRanges merges cohorts into ranges.
func cohortRanges(cs []int) []cohort.Range {
	rs := make([]cohort.Range, len(cs))
	for i, c := range cs {
		rs[i] = cohort.Range{First: c, Last: c}
	}
	return cohort.Merge(rs)
}

// phaseNeeds says from what phases a cohort may move forward to to.
func phaseNeeds(to phases.Phase) string {
	var from []string
	for _, p := range phases.Phases {
		if phaseRank(p) < phaseRank(to) && phases.Check(cohort.Range{}, p, to, time.Time{}, time.Now(), phases.Rules{DualWriteHold: time.Nanosecond}) == nil {
			from = append(from, string(p))
		}
	}
	return fmt.Sprintf("%s needs %s", to, strings.Join(from, " or "))
}

// operator names who moves cohorts in the audit: user@host.
func operatorName() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	h, _ := os.Hostname()
	return strings.TrimSuffix(name+"@"+h, "@")
}
