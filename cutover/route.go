package cutover

// side is one of the two stores of a migration.
type side int

const (
	oldSide side = iota
	newSide
)

func (s side) String() string {
	if s == newSide {
		return "new"
	}
	return "old"
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
	// may still copy the cohort's records).
	touch bool
}

// routeOf returns phase p's route; warming is a dual_write cohort within
// its hold (Since + TTL + skew), which writes old only, as in old.
func routeOf(p Phase, warming bool) route {
	if p == DualWrite && warming {
		p = Old
	}
	both, old, newOld, new := []side{oldSide, newSide}, []side{oldSide}, []side{newSide, oldSide}, []side{newSide}
	switch p {
	case DualWrite, Backfilled, Verified:
		return route{writes: both, deletes: both, read: oldSide, touch: true}
	case Shadow:
		return route{writes: both, deletes: both, read: oldSide, shadow: true, touch: true}
	case ReadNew:
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
