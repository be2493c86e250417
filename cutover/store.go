package cutover

import "context"

// Store keeps migrations' phase maps and their audit, next to the target
// (SpannerStore, DatastoreStore). Every method is safe for concurrent use
// by many processes: a Move is one transaction, so of two racing moves of
// the same cohorts one wins and the other, run again on the winner's
// result, is judged against it (or fails with ErrConflict when it
// required the version it was decided on).
type Store interface {
	// Load reads a migration's phase map in one read (a migration no
	// move has touched: version 0, every cohort Old).
	Load(ctx context.Context, migration string) (*Map, error)
	// Move checks mv against the stored map (Check, at the store's time)
	// and, in the same transaction, writes the new map and the move's
	// audit record. A refused move writes nothing.
	Move(ctx context.Context, mv Move) (*Map, Audit, error)
	// Audits returns a migration's audit records, oldest first.
	Audits(ctx context.Context, migration string) ([]Audit, error)
}
