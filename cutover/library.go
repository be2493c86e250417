package cutover

import (
	"context"

	"github.com/rekeyio/rekey/record"
)

// Library is what every application library does, whatever its stores:
// the routed calls, the phases it acts on and its counters.
type Library interface {
	Write(ctx context.Context, rec record.Record) error
	WriteBatch(ctx context.Context, recs []record.Record) []error
	Delete(ctx context.Context, key record.Record) error
	Read(ctx context.Context, key record.Record) (rec record.Record, found bool, err error)
	Phases() *Map
	Stats() Stats
	Close()
}

var (
	_ Library = (*Spanner)(nil)
	_ Library = (*Datastore)(nil)
	_ Library = (*DatastoreSpanner)(nil)
)
