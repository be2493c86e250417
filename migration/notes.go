package migration

import (
	"time"
)

// A Note is one thing a run has to tell the person running it, given as
// facts: the library packages (migration, pipeline) hand their notes to
// a Notes function and never write a line themselves; the command
// (cmd/rekey) words each note and decides where it goes, so that it owns
// every line a person reads and its machine-readable outputs stay clean.
type Note interface{ isNote() }

// Notes receives a run's notes in the order they happen (nil: none are
// wanted). It is called from the goroutine that runs the job.
type Notes func(Note)

// Say hands n to ns, if there is one.
func (ns Notes) Say(n Note) {
	if ns != nil {
		ns(n)
	}
}

// TargetUnread: the target database could not be read, so its tables
// are taken to be missing.
type TargetUnread struct{ Err error }

// TargetDDL: the DDL a run with --create-target would execute (a dry or
// translate-only run), as Job.DDLText gives it.
type TargetDDL struct{ Text string }

// Redriving: the run re-submits this dead-letter file.
type Redriving struct{ From string }

// Starting: the run is about to start; What is Job.Describe.
type Starting struct{ What, Runner string }

// ReadingAt: the source is read as it was at this time.
type ReadingAt struct{ At time.Time }

// DryRunning: a dry run, which writes nothing but its dead letters.
type DryRunning struct {
	DeadLetters string
	// Deletes is set for a cleanup, which plans deletes, not writes.
	Deletes bool
}

// WritePlan says in one line how the job's writes are planned.
type WritePlan struct{ Text string }

// CreatingIndexes: the indexes left for after the load are being made.
type CreatingIndexes struct{ N int }

// IndexesCreated: they were made, in Took.
type IndexesCreated struct{ Took time.Duration }

// NoLiveProgress: the runner gives no counters until the job ends.
type NoLiveProgress struct{ Runner string }

// CohortJob: a cohort job (backfill, cleanup, reverse backfill) is
// starting on its cohorts.
type CohortJob struct {
	// Kind is "backfill", "cleanup" or "reverse".
	Kind      string
	Migration string
	// Cohorts are the cohorts, as cohort.Format writes them; N of Buckets.
	Cohorts    string
	N, Buckets int
	// Version is the phase map's version the job planned from (0 for a
	// reverse backfill, which says none).
	Version int64
	// Phases says which phases the cohorts are in (a cleanup).
	Phases string
	// Source names what a cleanup deletes from: its type and name, and
	// the runner.
	SourceType, SourceName, Runner string
}

// ReadTimeIgnored: source.read_time is not used by a cohort backfill,
// which reads the source live.
type ReadTimeIgnored struct{ ReadTime string }

// Moved: cohorts moved from one phase to another.
type Moved struct {
	Cohorts, From, To string
	Version           int64
}

// CleanupRecorded: a cleanup was recorded in the audit.
type CleanupRecorded struct {
	Cohorts, From string
	Version       int64
}

// WaitingForOld: a reverse backfill waits Wait so that every instance
// writes old too (the cohorts hold read_new for Hold first).
type WaitingForOld struct{ Wait, Hold time.Duration }

func (TargetUnread) isNote()    {}
func (TargetDDL) isNote()       {}
func (Redriving) isNote()       {}
func (Starting) isNote()        {}
func (ReadingAt) isNote()       {}
func (DryRunning) isNote()      {}
func (WritePlan) isNote()       {}
func (CreatingIndexes) isNote() {}
func (IndexesCreated) isNote()  {}
func (NoLiveProgress) isNote()  {}
func (CohortJob) isNote()       {}
func (ReadTimeIgnored) isNote() {}
func (Moved) isNote()           {}
func (CleanupRecorded) isNote() {}
func (WaitingForOld) isNote()   {}
