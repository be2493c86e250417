package phases

import (
	"context"
	"errors"
	"time"

	"github.com/rekeyio/rekey/migration/config"
)

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
	// Note records an operation on cohorts that moves none of them (a
	// cleanup of their old records): in one transaction it reads the map
	// and writes an audit record whose From are the cohorts' phases then
	// and whose Version is the map's next. The phases stay as they are,
	// but the version counts the note, so a move decided before it fails
	// its compare-and-set (ErrConflict) and is judged again. A refused
	// note (cohorts outside the map, a bad action) writes nothing.
	Note(ctx context.Context, n Note) (Audit, error)
	// Audits returns a migration's audit records, oldest first.
	Audits(ctx context.Context, migration string) ([]Audit, error)
}

// ErrNoPhaseStore is the error of a read of a Spanner database that has
// no phase store yet: no move was ever made there (operator.OpenStore
// with create makes its tables). A migration in it has every cohort Old.
var ErrNoPhaseStore = errors.New("no phase store")

// RulesFor returns the move rules of a migration's config: dual_write and
// read_new held for cohort.cache_ttl + cohort.skew (DefaultCacheTTL and
// DefaultSkew where unset), what every application instance uses (the
// library's Options).
func RulesFor(cfg *config.Config) Rules {
	return Rules{DualWriteHold: orDefault(cfg.Cohort.CacheTTL, DefaultCacheTTL) + orDefault(cfg.Cohort.Skew, DefaultSkew)}
}

// orDefault is d, or def where d is not set (0 or less).
func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
