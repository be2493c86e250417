// Package throttle shapes write traffic: a ramp-up schedule (start a new
// key range slowly, then grow), a token-bucket pacer that spends one
// job's budget across every process writing it, and the adaptive
// client-side throttle from Google's SRE book. It is pure (no Beam, no
// clients): the store side of the ramp-up is a Lease, which spannerdb and
// datastoredb implement next to the target.
//
// # One ramp for the whole job
//
// A ramp-up protects key ranges that have not been written yet, so its
// clock must start with the first data write, not when the pipeline is
// built: a read phase longer than one interval would otherwise skip the
// ramp (its first commits would go out at a later step's rate). And its
// budget is the job's, not a worker's: autoscaling changes the number of
// workers, and a budget per worker grows with it (Beam Java's Datastore
// connector divides by a fixed worker hint instead, which fights
// autoscaling).
//
// So a run (Ramp.Run, drawn when the pipeline is built) keeps its state in
// the target's store, in a lease table or kind: its start, and one row per
// process that writes its data with the time of the process's last beat.
// Each process paces all its commits with one Pacer (SharedPacer), which
// beats every BeatPeriod (5 s) while it writes and spends Rate(t)/Live,
// Live being the processes beaten within LeaseTTL (15 s). The run's first
// beat sets the start (atomically, so one process sets it and any other
// reads it); that process's first commit goes at once, so the schedule's
// clock and the first data commit coincide. The beat itself takes round
// trips (seconds on a loaded store), so when it took longer than
// AnchorLag its process moves the start (Lease.Restart) to just after
// the beat returned, before any other process can spend at it (Pacer.anchor).
//
// Why the sum over processes stays within the budget. Let the processes
// writing at t be W(t); each spends at most Rate(t)/Live_p, where Live_p
// is its count at its last beat, at most BeatPeriod old (a pacer wakes to
// beat before it spends; it never spends on an older count).
//   - A process joining (its first beat, or one after its lease lapsed)
//     spends nothing for JoinHold = 2 × BeatPeriod: by then every process
//     that was writing has beaten at least once after the joiner's row
//     was written, so each counts it; from then on every Live_p ≥ |W(t)|
//     and the shares sum to at most Rate(t).
//   - A process that stops writing stops beating; the others count it
//     until its lease lapses (LeaseTTL), so for up to 15 s the budget is
//     under-used, never over-spent.
//   - A process paused longer than LeaseTTL (a long GC, a stalled VM)
//     finds its lease lapsed at its next beat and joins again, hold
//     included.
//   - Within a process, the bucket saves at most Slice (1/8) of a second
//     of budget while nobody waits, and a commit carries at most that much
//     (Size), sized when it is sent, not when it was planned: over any
//     second, the process sends at most (1 + Slice) × that second's share.
//
// The times in lease rows are the writers' clocks: a skew between workers
// (NTP keeps Dataflow's VMs within milliseconds) shifts when a lease
// lapses by as much, which the 15 s TTL absorbs. The cost: one strong
// read of the run's rows and one single-row write per process every 5 s
// (a transaction only for the run's first beat), a JoinHold of idle time
// for each process that joins a writing run, and leases that outlive the
// run as a few rows (they are not read again: every run has its own).
package throttle

import (
	"fmt"
	"math"
	"time"
)

// Profile names.
const (
	ProfileNone      = "none"
	ProfileDatastore = "datastore" // 500 ops/s, +50% every 5 minutes ("500/50/5")
	ProfileGCS       = "gcs"       // a start rate, doubled every 20 minutes
	ProfileCustom    = "custom"
)

// ProfileDefaults are a named profile's parameters (ok false for none,
// custom and unknown names, which have none): the one place they are
// written down; config fills a ramp's unset parameters from here.
func ProfileDefaults(profile string) (base, growth float64, interval time.Duration, ok bool) {
	switch profile {
	case ProfileDatastore:
		return 500, 1.5, 5 * time.Minute, true
	case ProfileGCS:
		return 1000, 2, 20 * time.Minute, true
	}
	return 0, 0, 0, false
}

// Schedule is a ramp: Base ops/s at Start, multiplied by Growth every
// Interval. A zero Schedule (Base 0) means no limit.
type Schedule struct {
	Base     float64
	Growth   float64
	Interval time.Duration
	Start    time.Time
	// Max caps the rate (0: no cap).
	Max float64
}

// NewSchedule returns the schedule of a profile. base, growth and interval
// override the profile's values where non-zero; timeScale divides the
// interval (tests run a 5-minute step in seconds).
func NewSchedule(profile string, base, growth float64, interval time.Duration, start time.Time) (Schedule, error) {
	s := Schedule{Start: start}
	switch profile {
	case "", ProfileNone:
		return Schedule{}, nil
	case ProfileDatastore, ProfileGCS:
		s.Base, s.Growth, s.Interval, _ = ProfileDefaults(profile)
	case ProfileCustom:
	default:
		return s, fmt.Errorf("unknown ramp profile %q (want none, datastore, gcs or custom)", profile)
	}
	if base > 0 {
		s.Base = base
	}
	if growth > 0 {
		s.Growth = growth
	}
	if interval > 0 {
		s.Interval = interval
	}
	if s.Base <= 0 || s.Growth < 1 || s.Interval <= 0 {
		return s, fmt.Errorf("ramp %s needs base > 0, growth >= 1 and interval > 0 (got %g, %g, %s)", profile, s.Base, s.Growth, s.Interval)
	}
	return s, nil
}

// Unlimited reports whether the schedule sets no limit.
func (s Schedule) Unlimited() bool { return s.Base <= 0 }

// Rate returns the budget in ops/s at t: Base × Growth^floor((t-Start)/Interval).
func (s Schedule) Rate(t time.Time) float64 {
	if s.Unlimited() {
		return math.Inf(1)
	}
	steps := math.Floor(float64(t.Sub(s.Start)) / float64(s.Interval))
	if steps < 0 {
		steps = 0
	}
	r := s.Base * math.Pow(s.Growth, steps)
	if s.Max > 0 && r > s.Max {
		r = s.Max
	}
	return r
}

// Budget returns the operations the schedule allows from from to to: the
// integral of Rate, its steps included (0 when to is not after from;
// +Inf when unlimited).
func (s Schedule) Budget(from, to time.Time) float64 {
	if !to.After(from) {
		return 0
	}
	if s.Unlimited() {
		return math.Inf(1)
	}
	total := 0.0
	for t := from; t.Before(to); {
		// The end of t's step (steps before Start count as the first).
		k := math.Floor(float64(t.Sub(s.Start)) / float64(s.Interval))
		if k < 0 {
			k = 0
		}
		end := s.Start.Add(time.Duration((k + 1) * float64(s.Interval)))
		if !end.After(t) { // rounding at a step's edge
			end = t.Add(time.Nanosecond)
		}
		if end.After(to) {
			end = to
		}
		total += s.Rate(t) * end.Sub(t).Seconds()
		t = end
	}
	return total
}
