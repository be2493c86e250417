package cutover

import "github.com/rekeyio/rekey/cutover/phases"

// Phase is where a cohort stands in a staged cutover (package phases
// keeps them, with the rules of their moves).
type Phase = phases.Phase

// The phases, in order (see package phases). A cohort no move has
// touched is Old.
const (
	Old        = phases.Old
	DualWrite  = phases.DualWrite
	Backfilled = phases.Backfilled
	Verified   = phases.Verified
	Shadow     = phases.Shadow
	ReadNew    = phases.ReadNew
	NewOnly    = phases.NewOnly
	Done       = phases.Done
)

// Map is a migration's phase map, as the library acts on it
// (Library.Phases); Span is a run of its cohorts in one phase.
type (
	Map  = phases.Map
	Span = phases.Span
)

// Default cache timing (Options): the library refreshes phases every
// DefaultCacheTTL; DefaultSkew covers clocks and a refresh in flight.
const (
	DefaultCacheTTL = phases.DefaultCacheTTL
	DefaultSkew     = phases.DefaultSkew
)

// ErrNoPhaseStore is the error of opening a library on a Spanner database
// that has no phase store yet: no move was ever made there.
var ErrNoPhaseStore = phases.ErrNoPhaseStore
