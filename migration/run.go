package migration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rekeyio/rekey/migration/config"
)

// Options control Run (and Job.Prepare).
type Options struct {
	// CreateTarget runs the target DDL; without it the DDL is only
	// printed and a missing target table is refused.
	CreateTarget bool
	// Force runs even if the target's manifest records a different spec.
	Force bool
	// RedriveFrom re-submits this dead-letter file instead of reading the
	// source (see Job.Redrive).
	RedriveFrom string
	// Notes receives what a run has to tell before it starts (the target
	// DDL, the job's summary, how writes are planned) and while it runs,
	// as facts for the command to word (nil: none are wanted).
	Notes Notes
	// DryRun runs the job as Job.DryRun says: the target is neither
	// prepared nor written; the DDL it would run is printed.
	DryRun bool
	// TranslateOnly is for a runner that only translates the job and
	// submits nothing (Dataflow's --dry_run): the job is the real one, but
	// the target is not prepared (no DDL, no manifest); the DDL a run
	// would execute is printed.
	TranslateOnly bool
	// Overwrite lets a run replace a JSON Lines target file that exists
	// already; without it such a run is refused before anything is read.
	Overwrite bool
}

// Runner builds and runs a job's migration pipeline to completion
// (pipeline.Runner on Beam's runners).
type Runner interface {
	// Name is the runner's name, for messages.
	Name() string
	// Describe says in one line how the job's writes are planned ("" if
	// there is nothing to say).
	Describe(j *Job) string
	// Migrate runs the job.
	Migrate(ctx context.Context, j *Job) (*Result, error)
}

// Result is what a run did.
type Result struct {
	// Counters are the run's counters: read, rewritten, written,
	// dead_lettered, retried (and any others stages add). read counts
	// every record taken from the input, those dead-lettered while
	// reading too, so read = written + dead_lettered (+ the records left
	// out on purpose: cohort_other, backfill_skipped).
	Counters Counters
	Elapsed  time.Duration
	JobID    string
	// Sample is, for a dry run, the first records' keys before and after
	// the rewrite, "old -> new" (or "old: reason" where it is refused).
	Sample []string
	// Stop is, for a run stopped before its end (its context cancelled),
	// what the runner said of the stop; nil otherwise.
	Stop *Stop
}

// Stop is what a runner said when a run was stopped: whether its job
// reached an end (State, e.g. "CANCELLED") within Waited, and whether its
// workers are this process (InProcess: they stop when it exits).
type Stop struct {
	State     string
	Confirmed bool
	Waited    time.Duration
	InProcess bool
}

// String says in a sentence what a stopped run may still do.
func (s *Stop) String() string {
	switch {
	case s.Confirmed && s.InProcess:
		return fmt.Sprintf("the job was cancelled (%s after %s); its workers were this process, so nothing of it writes once rekey has exited", s.State, s.Waited.Round(time.Millisecond))
	case s.Confirmed:
		return fmt.Sprintf("the job server reports the job %s after %s; bundles its workers had started may still commit until the engine stops those workers", s.State, s.Waited.Round(time.Millisecond))
	default:
		return fmt.Sprintf("the job server did not confirm the stop within %s (last state: %s): its workers may still be writing; check the job on the engine", s.Waited.Round(time.Millisecond), s.State)
	}
}

// WouldWrite is the prefix of a dry run's counters of records per target
// table or kind: "would_write:Customers"; WouldDelete that of a cohort
// cleanup's dry run, per source table or kind.
const (
	WouldWrite  = "would_write:"
	WouldDelete = "would_delete:"
)

// Counters are a run's counts by name.
type Counters map[string]int64

// Counter names every run reports.
const (
	Read         = "read"
	Rewritten    = "rewritten"
	Written      = "written"
	DeadLettered = "dead_lettered"
	Retried      = "retried"
	// ClientRetried counts the commit RPCs the client libraries repeated
	// on their own, apart from Retried (rekey's retries).
	ClientRetried = "client_retried"
	// ReferencesUnmapped counts key values pointing at a migrated kind
	// through a property no reference setting names.
	ReferencesUnmapped = "references_unmapped"
	// CohortOther counts the records a cohort backfill read and left out
	// (other cohorts); BackfillSkipped those it did not write because
	// the application wrote or deleted them after the backfill read them.
	CohortOther     = "cohort_other"
	BackfillSkipped = "backfill_skipped"
	// Deleted counts the old records a cohort cleanup deleted.
	Deleted = "deleted"
)

// String renders the counters in a stable order: the main five first,
// then the others by name.
func (c Counters) String() string {
	order := []string{Read, Rewritten, Written, DeadLettered, Retried}
	seen := map[string]bool{}
	var parts []string
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c[k]))
		seen[k] = true
	}
	var rest []string
	for k := range c {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c[k]))
	}
	return strings.Join(parts, " ")
}

// Run is the one migration sequence: it checks that the stores can be
// reached (Reach; not for a translate-only run), resolves cfg (Resolve), prepares
// the target (Job.Prepare: DDL, manifest), sets up a redrive if asked,
// says what it will do (o.Notes), and runs the job on r. The job is
// returned as soon as it is resolved, so a caller can report where dead
// letters went even when the run fails. cfg must be validated.
func Run(ctx context.Context, cfg *config.Config, o Options, r Runner) (*Job, *Result, error) {
	if !o.TranslateOnly {
		if err := Reach(ctx, cfg); err != nil {
			return nil, nil, err
		}
	}
	j, err := resolve(ctx, cfg, o.TranslateOnly)
	if err != nil {
		return nil, nil, err
	}
	if j.TargetUnread != nil {
		o.Notes.Say(TargetUnread{Err: j.TargetUnread})
	}
	if o.DryRun || o.TranslateOnly {
		j.DryRun = o.DryRun
		j.sayDDL(o, "target DDL a run with --create-target would execute")
	} else if err := j.Prepare(ctx, o); err != nil {
		return j, nil, err
	}
	j.Overwrite, j.TranslateOnly = o.Overwrite, o.TranslateOnly
	if o.RedriveFrom != "" {
		j.Redrive(o.RedriveFrom)
		o.Notes.Say(Redriving{From: o.RedriveFrom})
	}
	o.Notes.Say(Starting{What: j.Describe(), Runner: r.Name()})
	if !j.ReadTime.IsZero() && j.RedriveFrom == "" {
		o.Notes.Say(ReadingAt{At: j.ReadTime})
	}
	if j.DryRun {
		o.Notes.Say(DryRunning{DeadLetters: j.DeadLetterPath})
	}
	if d := r.Describe(j); d != "" {
		o.Notes.Say(WritePlan{Text: d})
	}
	res, err := r.Migrate(ctx, j)
	if err == nil && kindOf(j.Config.Target.Type).spannerDB() {
		err = j.CreateIndexesAfter(ctx, o)
	}
	return j, res, err
}
