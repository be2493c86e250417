package cutover

import "github.com/rekeyio/rekey/cutover/phases"

// side is one of the two stores of a migration.
type side int

const (
	oldSide side = iota
	newSide
)

func (s side) String() string {
	if s == newSide {
		return phases.BehindNew
	}
	return phases.BehindOld
}

// route is what a phase does with an application's calls (the package
// doc's table).
type route struct {
	// writes are the stores written, deletes those deleted from, the
	// authoritative one first.
	writes, deletes []side
	// read is the store read (the authoritative one).
	read side
	// shadow reads the other store too and compares; fallback reads old
	// when new has no record.
	shadow, fallback bool
	// touch: writes and deletes in new mark the key touched (the backfill
	// may still copy the cohort's records, or old may be read again).
	touch bool
	// consult: old and new apart, a read of old reads the key's touched
	// mark too, and returns new's record if the mark says old is behind
	// (it missed a write new took while new was authoritative, before a
	// rollback; see package phases, "Missed writes").
	consult bool
	// oldStale: old is missing the writes of a new_only span (a read_new
	// cohort brought back from new_only by a reverse backfill): reads
	// never go to old.
	oldStale bool
}

// routeOf returns the route of phase p entered from prev (empty when
// unknown).
func routeOf(p, prev Phase) route {
	both, old, newOld, new := []side{oldSide, newSide}, []side{oldSide}, []side{newSide, oldSide}, []side{newSide}
	switch p {
	case DualWrite, Backfilled, Verified:
		return route{writes: both, deletes: both, read: oldSide, touch: true, consult: true}
	case Shadow:
		return route{writes: both, deletes: both, read: oldSide, shadow: true, touch: true, consult: true}
	case ReadNew:
		if prev == NewOnly {
			return route{writes: newOld, deletes: newOld, read: newSide, touch: true, oldStale: true}
		}
		return route{writes: newOld, deletes: newOld, read: newSide, fallback: true, touch: true}
	case NewOnly:
		// Deletes still reach old: an instance still in read_new (for
		// up to the cache TTL) falls back to old for a record new lacks,
		// and would find the deleted one there.
		return route{writes: new, deletes: newOld, read: newSide}
	case Done:
		return route{writes: new, deletes: new, read: newSide}
	}
	return route{writes: old, deletes: old, read: oldSide}
}
