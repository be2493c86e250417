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
	// writes are the stores written (and deletes applied to), the
	// authoritative one first.
	writes []side
	// read is the store read (the authoritative one).
	read side
	// shadow reads the other store too and compares; fallback reads old
	// when new has no record.
	shadow, fallback bool
	// tombstones: deletes in new leave a tombstone (the backfill may still
	// copy the cohort's records).
	tombstones bool
}

// routeOf returns phase p's route.
func routeOf(p Phase) route {
	switch p {
	case DualWrite, Backfilled, Verified:
		return route{writes: []side{oldSide, newSide}, read: oldSide, tombstones: true}
	case Shadow:
		return route{writes: []side{oldSide, newSide}, read: oldSide, shadow: true, tombstones: true}
	case ReadNew:
		return route{writes: []side{newSide, oldSide}, read: newSide, fallback: true, tombstones: true}
	case NewOnly, Done:
		return route{writes: []side{newSide}, read: newSide}
	}
	return route{writes: []side{oldSide}, read: oldSide}
}
