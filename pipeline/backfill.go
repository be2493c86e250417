package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/internal/config"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/rewrite"
	"github.com/rekeyio/rekey/transforms"
)

// Backfill returns the graph of a cohort backfill: Migrate restricted to
// the records of b's cohorts (a Spanner source filters in its query, the
// cohort function being SQL; every source is filtered again as it is
// read), each written only where the application has not touched it
// since its cohort's phase began (cutover.Backfill), so a backfill
// neither overwrites a newer dual write nor brings back a deleted record.
// CheckBackfill says which jobs can be backfilled.
func Backfill(b cutover.Backfill) Graph {
	return func(s beam.Scope, j *migration.Job) error {
		if err := CheckBackfill(j); err != nil {
			return err
		}
		return migrate(s, j, &b)
	}
}

// CheckBackfill refuses a job a cohort backfill cannot run: its target
// must be a Spanner table without interleaved children or a Datastore
// kind (where the phase store and the touched marks are), its strategy
// deterministic (the application's library computes the same new keys),
// its config must say who a record's user is (cohort.user), and it reads
// its source (not a dead-letter file).
func CheckBackfill(j *migration.Job) error {
	cfg := j.Config
	var problems []string
	switch cfg.Target.Type {
	case config.TypeSpanner:
		if j.Spanner != nil && (len(j.Spanner.Targets) > 1 || len(j.Spanner.Children) > 0) {
			problems = append(problems, "the target has interleaved child tables, which a cohort backfill does not copy yet")
		}
	case config.TypeDatastore:
	default:
		problems = append(problems, fmt.Sprintf("target.type %s: a cohort backfill writes a Spanner or Datastore target, where the phase store is", cfg.Target.Type))
	}
	if _, ok, err := cfg.Cohort.UserSpec(); err != nil || !ok {
		problems = append(problems, "cohort.user is not set: the config must say where a record's user id is")
	}
	if st, err := rewrite.New(j.Spec.Strategy); err == nil && !st.Info().Deterministic {
		problems = append(problems, fmt.Sprintf("strategy %s does not give the same new key for the same old key, so the application and the backfill would disagree", st.Info().Name))
	}
	if j.RedriveFrom != "" {
		problems = append(problems, "a redrive is not a cohort backfill; run the backfill again instead")
	}
	if len(problems) > 0 {
		return &migration.ConfigError{Err: fmt.Errorf("cohort backfill: %s", strings.Join(problems, "; "))}
	}
	return nil
}

// selectCohorts keeps the records of cohorts (as read from the source,
// before the rewrite).
func selectCohorts(s beam.Scope, j *migration.Job, cohorts []cohort.Range, batches beam.PCollection) (kept, dead beam.PCollection) {
	return transforms.Cohorts(s, transforms.CohortSelection{User: j.Config.Cohort.User, Buckets: j.Config.Cohort.Buckets, Cohorts: cohort.Format(cohorts)}, batches)
}

// cohortFilter is the Spanner SQL condition that pushes cohorts into the
// source's query, "" when the user id is not a column of the source table
// of a type with a SQL expression (then the records are filtered as they
// are read).
func cohortFilter(j *migration.Job, cohorts []cohort.Range) string {
	u, ok, err := j.Config.Cohort.UserSpec()
	if err != nil || !ok || u.From != cohort.FromField || j.Spanner == nil || j.Spanner.Source == nil {
		return ""
	}
	col := j.Spanner.Source.Column(u.Name)
	if col == nil {
		return ""
	}
	ct, err := spannerdb.ParseColumnType(col.Type)
	if err != nil || ct.Array {
		return ""
	}
	t, err := rewrite.ParseType(ct.Base)
	if err != nil {
		return ""
	}
	expr, err := cohort.SQLExpr(u, t)
	if err != nil {
		return ""
	}
	c := cohort.SQL(expr, j.Config.Cohort.Buckets)
	var ors []string
	for _, r := range cohort.Merge(cohorts) {
		if r.First == r.Last {
			ors = append(ors, fmt.Sprintf("%s = %d", c, r.First))
		} else {
			ors = append(ors, fmt.Sprintf("%s BETWEEN %d AND %d", c, r.First, r.Last))
		}
	}
	return strings.Join(ors, " OR ")
}

// andFilter joins two SQL conditions, either of which may be empty.
func andFilter(a, b string) string {
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return "(" + a + ") AND (" + b + ")"
}

// CohortOptions say which cohorts of a migration a run for them
// (RunBackfill, RunCleanup) takes.
type CohortOptions struct {
	// Migration names the migration in the phase store; Cohorts are the
	// cohorts to copy or clean up.
	Migration string
	Cohorts   []cohort.Range
	// Force takes cohorts that are not where the run needs them, said so
	// in the audit: a backfill copies cohorts that are not in dual_write,
	// or not held there long enough, and moves them to backfilled anyway;
	// a cleanup deletes the old records of cohorts that are not done.
	Force bool
	// Who and Why go to the run's audit record (the move to backfilled,
	// the note of the cleanup).
	Who, Why string
	// Run are the options of the run itself (Out, DryRun, ...).
	Run migration.Options
}

// BackfillOptions say which cohorts RunBackfill copies.
type BackfillOptions = CohortOptions

// start checks o and cfg's target for a run (what it is, for messages),
// checks that the stores can be reached (not for a translate-only run),
// and opens the phase store at the target; say is o.Run.Notes.Say.
func (o CohortOptions) start(ctx context.Context, cfg *config.Config, what string) (say func(migration.Note), st cutover.Store, closeStore func(), err error) {
	say = o.Run.Notes.Say
	if o.Migration == "" || len(o.Cohorts) == 0 {
		return nil, nil, nil, &migration.ConfigError{Err: fmt.Errorf("a cohort %s needs the migration's name and the cohorts", what)}
	}
	if t := cfg.Target.Type; t != config.TypeSpanner && t != config.TypeDatastore {
		return nil, nil, nil, &migration.ConfigError{Err: fmt.Errorf("cohort %s: the phase store is kept at a Spanner or Datastore target; this config's target is %s", what, t)}
	}
	if !o.Run.TranslateOnly {
		if err := migration.Reach(ctx, cfg); err != nil {
			return nil, nil, nil, err
		}
	}
	if st, closeStore, err = cutover.OpenStore(ctx, cfg.Target, false); err != nil {
		return nil, nil, nil, fmt.Errorf("phase store: %w", err)
	}
	return say, st, closeStore, nil
}

// moved is the note of a move.
func moved(a cutover.Audit) migration.Note {
	return migration.Moved{Cohorts: a.Cohorts, From: a.From, To: string(a.To), Version: a.Version}
}

// ErrBackfillIncomplete is wrapped by RunBackfill's error when the
// backfill ran but dead-lettered records: its cohorts stay where they
// were, since a verify would find those records missing.
var ErrBackfillIncomplete = errors.New("backfill incomplete")

// RunBackfill runs a cohort backfill of cfg on r: it opens the phase
// store at the target, plans the backfill (cutover.PlanBackfill: the
// cohorts must be in dual_write, held for cohort.cache_ttl + cohort.skew,
// unless o.Force), runs the Backfill graph through migration.Run, and on
// success, with no dead letter, moves the cohorts to backfilled
// (cutover.FinishBackfill, which refuses if they moved meanwhile). A dry
// run plans and reads but neither writes nor moves. The audit record of
// the move is returned (nil when there was none).
func RunBackfill(ctx context.Context, cfg *config.Config, o BackfillOptions, r Runner) (*migration.Job, *migration.Result, *cutover.Audit, error) {
	say, st, closeStore, err := o.start(ctx, cfg, "backfill")
	if err != nil {
		return nil, nil, nil, err
	}
	defer closeStore()
	rules := cutover.RulesFor(cfg)
	now, err := cutover.StoreTime(ctx, st)
	if err != nil {
		return nil, nil, nil, err
	}
	b, m, err := cutover.PlanBackfill(ctx, st, o.Migration, o.Cohorts, o.Force, rules, now)
	if err != nil {
		return nil, nil, nil, err
	}
	n := cohort.Count(b.Cohorts())
	say(migration.CohortJob{Kind: "backfill", Migration: o.Migration, Cohorts: cohort.Format(b.Cohorts()), N: n, Buckets: cfg.Cohort.Buckets, Version: m.Version})
	r.Backfill = &b
	// The backfill reads old live, not at one read time: its argument
	// (cutover's package doc) needs its reads to see every write that
	// ended before them, by the store's clock, which a read time taken
	// from this machine's clock would not promise.
	live := *cfg
	if rt := strings.TrimSpace(cfg.Source.ReadTime); rt != "" && rt != config.ReadTimeNone {
		say(migration.ReadTimeIgnored{ReadTime: rt})
	}
	live.Source.ReadTime = config.ReadTimeNone
	job, res, err := migration.Run(ctx, &live, o.Run, r)
	if err != nil || job.DryRun || job.TranslateOnly {
		return job, res, nil, err
	}
	if d := res.Counters[migration.DeadLettered]; d > 0 {
		return job, res, nil, fmt.Errorf("%w: %d records were dead-lettered (see %s); cohorts %s stay where they were: fix the cause and run the backfill again",
			ErrBackfillIncomplete, d, job.DeadLetterPath, cohort.Format(b.Cohorts()))
	}
	why := o.Why
	if why == "" {
		why = fmt.Sprintf("backfill: %d written, %d left as the application wrote them, %d of other cohorts", res.Counters[migration.Written], res.Counters[migration.BackfillSkipped], res.Counters[migration.CohortOther])
	}
	_, a, err := cutover.FinishBackfill(ctx, st, b, o.Who, why, o.Force, rules)
	if err != nil {
		return job, res, nil, fmt.Errorf("the backfill ran, but its cohorts were not moved to backfilled: %w", err)
	}
	say(moved(a))
	return job, res, &a, nil
}
