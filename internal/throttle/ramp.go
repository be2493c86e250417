// Package throttle shapes write traffic: a ramp-up schedule (start a new
// key range slowly, then grow), a token-bucket pacer that shares one global
// budget across a fixed set of keys, and the adaptive client-side throttle
// from Google's SRE book. It is pure (no Beam, no clients).
//
// Global budget. Autoscaling changes the number of workers, so a budget
// per worker would grow with it (the Beam Java Datastore connector divides
// by a fixed worker hint instead, which fights autoscaling). rekey divides
// the budget over a fixed number of throttle keys: the write planner groups
// records by a shard key, each key's records are written by one worker at
// a time, and each key may spend Rate(t)/Keys. The sum over keys is the
// budget whatever the number of workers.
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
