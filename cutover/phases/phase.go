package phases

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rekeyio/rekey/cohort"
)

// Phase is where a cohort stands in a staged cutover.
type Phase string

// The phases, in order. A cohort no transition has touched is Old.
const (
	Old       Phase = "old"        // old keys only
	DualWrite Phase = "dual_write" // writes go to old, then new; reads old
	// Backfilled: the backfill copied the cohort's records (while dual
	// writes went on); writes and reads as in DualWrite.
	Backfilled Phase = "backfilled"
	Verified   Phase = "verified" // verify found old and new equal
	Shadow     Phase = "shadow"   // reads both, return old, compare
	ReadNew    Phase = "read_new" // new authoritative: writes new then old, reads new (falling back to old)
	NewOnly    Phase = "new_only" // new keys only
	Done       Phase = "done"     // the cohort's old records may go
)

// Phases lists every phase in order.
var Phases = []Phase{Old, DualWrite, Backfilled, Verified, Shadow, ReadNew, NewOnly, Done}

// ParsePhase reads a phase's name.
func ParsePhase(s string) (Phase, error) {
	p := Phase(strings.ToLower(strings.TrimSpace(s)))
	for _, q := range Phases {
		if p == q {
			return p, nil
		}
	}
	names := make([]string, len(Phases))
	for i, q := range Phases {
		names[i] = string(q)
	}
	return "", fmt.Errorf("unknown phase %q (want one of %s)", s, strings.Join(names, ", "))
}

// rank is the phase's place in Phases.
func (p Phase) rank() int {
	for i, q := range Phases {
		if p == q {
			return i
		}
	}
	return -1
}

// newAuthoritative reports whether new is the store phase p reads and
// writes first (read_new on); old is before.
func newAuthoritative(p Phase) bool {
	switch p {
	case ReadNew, NewOnly, Done:
		return true
	}
	return false
}

// SwitchesAuthority reports whether a cohort that entered phase p from
// prev changed its authoritative store, the one calls read and write
// first (old before read_new, new from read_new on): the library then
// acts on prev until every instance knows the move (see the package doc,
// "The switch of authority"). An unknown prev (empty) switches nothing.
func SwitchesAuthority(prev, p Phase) bool {
	return prev != "" && newAuthoritative(prev) != newAuthoritative(p)
}

// ErrIllegal is the error of a move the rules refuse (see Check).
var ErrIllegal = errors.New("illegal phase change")

// ErrConflict is the error of a Move whose expected version is not the
// stored one: another move came first.
var ErrConflict = errors.New("phase map changed meanwhile")

// Rules is what Check needs to judge a move besides the phases.
type Rules struct {
	// DualWriteHold is how long a cohort must have been in dual_write
	// before it may be marked backfilled, and in read_new before
	// new_only: every application instance's phase cache must have seen
	// the phase (its TTL) — or an instance still writing old only could
	// write a value the backfill never copies, or one still reading old
	// could miss a new-only write. Default: DefaultCacheTTL + DefaultSkew.
	DualWriteHold time.Duration
}

// Default cache timing: the application library refreshes phases every
// DefaultCacheTTL; DefaultSkew covers clocks and a refresh in flight.
const (
	DefaultCacheTTL = 30 * time.Second
	DefaultSkew     = 10 * time.Second
)

// Hold is how long cohorts stay in dual_write before a backfill:
// DualWriteHold, or the default cache TTL plus skew.
func (r Rules) Hold() time.Duration {
	if r.DualWriteHold > 0 {
		return r.DualWriteHold
	}
	return DefaultCacheTTL + DefaultSkew
}

// Check judges moving cohorts rg from phase from, where they have been
// since since, to phase to at now (the store's time). Forward, a cohort
// moves one phase at a time, except that read_new may follow verified
// directly (shadow is optional); backfilled needs dual_write, and
// new_only read_new, held for rules' DualWriteHold (the phase-cache TTL
// plus a skew margin: every instance acts on the earlier phase by then).
// Back, any phase before new_only may go to dual_write or old, except
// read_new, which goes to dual_write first; from new_only on, only a
// reverse backfill goes back (not a phase move); read_new goes back only
// once held (instances act on the phase before it until the hold: the
// switch of authority, see the package doc).
func Check(rg cohort.Range, from, to Phase, since, now time.Time, rules Rules) error {
	if from.rank() < 0 || to.rank() < 0 {
		return fmt.Errorf("%w: unknown phase (%q to %q)", ErrIllegal, from, to)
	}
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: cohorts %s: %s to %s: %s", ErrIllegal, rg, from, to, fmt.Sprintf(format, args...))
	}
	// hold refuses a move out of from before it has been held for the
	// rules' hold (why: what every instance must be doing by then).
	hold := func(why string) error {
		if held := now.Sub(since); held < rules.Hold() {
			return refuse("%s held %s of the %s needed (the application's phase-cache TTL plus a skew margin: %s); retry after %s",
				from, held.Round(time.Second), rules.Hold(), why, since.Add(rules.Hold()).UTC().Format(time.RFC3339))
		}
		return nil
	}
	switch {
	case from == to:
		return refuse("already %s", to)
	case to == DualWrite || to == Old:
		// Forward from old, or a rollback.
		if from.rank() >= NewOnly.rank() {
			return refuse("%s cohorts go back only through a reverse backfill (rekey run --reverse)", from)
		}
		if from == ReadNew && to == Old {
			return refuse("roll back to dual_write first: instances still in read_new (for up to the phase-cache TTL) read new, which old-only writes no longer reach")
		}
		if from == ReadNew {
			return hold("every instance must have switched to new first before the authority switches back")
		}
		return nil
	case to == Backfilled:
		if from != DualWrite {
			return refuse("backfilled needs dual_write")
		}
		return hold("every instance must dual-write before the backfill reads")
	case to == Verified:
		if from != Backfilled {
			return refuse("verified needs backfilled")
		}
	case to == Shadow:
		if from != Verified {
			return refuse("shadow needs verified")
		}
	case to == ReadNew:
		if from != Verified && from != Shadow {
			return refuse("read_new needs verified or shadow")
		}
	case to == NewOnly:
		if from != ReadNew {
			return refuse("new_only needs read_new")
		}
		return hold("every instance must read new before old stops receiving writes")
	case to == Done:
		if from != NewOnly {
			return refuse("done needs new_only")
		}
		return hold("no instance may still be in read_new, which falls back to old")
	}
	return nil
}
