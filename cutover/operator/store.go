package operator

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cutover/phases"
)

// RepairsOf returns st's repair-log entries of migration (none for a
// store without a log).
func RepairsOf(ctx context.Context, st phases.Store, migration string) ([]phases.RepairEntry, error) {
	l, ok := st.(phases.RepairLog)
	if !ok {
		return nil, nil
	}
	return l.Repairs(ctx, migration)
}

// StoreTime returns the phase store's time, which moves are judged by
// (Spanner: the database's CURRENT_TIMESTAMP(); Datastore, which has no
// such clock: this machine's).
func StoreTime(ctx context.Context, st phases.Store) (time.Time, error) {
	s, ok := st.(phases.SpannerStore)
	if !ok {
		return time.Now(), nil
	}
	var now time.Time
	err := s.Client.Single().Query(ctx, spanner.Statement{SQL: "SELECT CURRENT_TIMESTAMP()"}).Do(func(r *spanner.Row) error { return r.Columns(&now) })
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the database's time: %w", err)
	}
	return now, nil
}
