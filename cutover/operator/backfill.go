package operator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/rewrite"
)

// CheckBackfill refuses a job a cohort backfill cannot run: its target
// must be a Spanner table (with its interleaved children, if the user id
// is a column each of them has) or a Datastore
// kind (where the phase store and the touched marks are), its strategy
// deterministic (the application's library computes the same new keys),
// its config must say who a record's user is (cohort.user), and it reads
// its source (not a dead-letter file).
func CheckBackfill(j *migration.Job) error {
	cfg := j.Config
	var problems []string
	if !KeepsPhases(cfg.Target.Type) {
		problems = append(problems, fmt.Sprintf("target.type %s: a cohort backfill writes a Spanner or Datastore target, where the phase store is", cfg.Target.Type))
	}
	if _, ok, err := cfg.Cohort.UserSpec(); err != nil || !ok {
		problems = append(problems, "cohort.user is not set: the config must say where a record's user id is")
	} else if p := childrenWithoutUser(j); p != "" {
		problems = append(problems, p)
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

// ErrBackfillIncomplete is wrapped by Backfill's error when the
// backfill ran but dead-lettered records: its cohorts stay where they
// were, since a verify would find those records missing.
var ErrBackfillIncomplete = errors.New("backfill incomplete")

// Backfill runs a cohort backfill of cfg (the job: jobs.Backfill): it opens the phase
// store at the target, plans the backfill (PlanBackfill: the
// cohorts must be in dual_write, held for cohort.cache_ttl + cohort.skew,
// unless o.Force), runs the backfill job through migration.Run, and on
// success, with no dead letter, moves the cohorts to backfilled
// (FinishBackfill, which refuses if they moved meanwhile). A dry
// run plans and reads but neither writes nor moves. The audit record of
// the move is returned (nil when there was none).
func Backfill(ctx context.Context, cfg *config.Config, o CohortOptions, jobs Jobs) (*migration.Job, *migration.Result, *phases.Audit, error) {
	say, st, closeStore, err := o.start(ctx, cfg, "backfill")
	if err != nil {
		return nil, nil, nil, err
	}
	defer closeStore()
	rules := phases.RulesFor(cfg)
	now, err := StoreTime(ctx, st)
	if err != nil {
		return nil, nil, nil, err
	}
	b, m, err := PlanBackfill(ctx, st, o.Migration, o.Cohorts, o.Force, rules, now)
	if err != nil {
		return nil, nil, nil, err
	}
	n := cohort.Count(b.Cohorts())
	say(migration.CohortJob{Kind: "backfill", Migration: o.Migration, Cohorts: cohort.Format(b.Cohorts()), N: n, Buckets: cfg.Cohort.Buckets, Version: m.Version})
	// The backfill reads old live, not at one read time: its argument
	// (package phases' doc) needs its reads to see every write that
	// ended before them, by the store's clock, which a read time taken
	// from this machine's clock would not promise.
	live := *cfg
	if rt := strings.TrimSpace(cfg.Source.ReadTime); rt != "" && rt != config.ReadTimeNone {
		say(migration.ReadTimeIgnored{ReadTime: rt})
	}
	live.Source.ReadTime = config.ReadTimeNone
	job, res, err := migration.Run(ctx, &live, o.Run, jobs.Backfill(b))
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
	_, a, err := FinishBackfill(ctx, st, b, o.Who, why, o.Force, rules)
	if err != nil {
		return job, res, nil, fmt.Errorf("the backfill ran, but its cohorts were not moved to backfilled: %w", err)
	}
	say(moved(a))
	return job, res, &a, nil
}

// childrenWithoutUser names the interleaved tables of j's Spanner source
// whose rows do not carry the user id (a column of the main table's key
// that every child has, as the application library routes them), "" if
// none.
func childrenWithoutUser(j *migration.Job) string {
	if j.Spanner == nil || len(j.Spanner.Children) == 0 {
		return ""
	}
	u, _, _ := j.Config.Cohort.UserSpec()
	var missing []string
	for name, t := range j.Spanner.Children {
		if u.From != cohort.FromField || t.Column(u.Name) == nil {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	sort.Strings(missing)
	return fmt.Sprintf("cohort.user %s is not a column of interleaved tables %s: with interleaved tables it must be a column of the main table's key, which every child row carries", j.Config.Cohort.User, strings.Join(missing, ", "))
}

// CheckVerify refuses a job a verify (and a repair) cannot run: what
// CheckBackfill refuses.
func CheckVerify(j *migration.Job) error { return CheckBackfill(j) }
