package datastoredb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/internal/write/throttle"
)

// RampKind holds the ramp-ups' leases (throttle.Lease): per run an entity
// named by the run whose At is the run's start, and under it a
// RampProcessKind entity per process writing the run's data, At its last
// beat.
const (
	RampKind        = "RekeyRamp"
	RampProcessKind = "RekeyRampProcess"
)

type rampEntity struct {
	At time.Time `datastore:",noindex"`
}

// RampLease keeps ramp-up leases in a namespace of a database.
type RampLease struct {
	Client    *datastore.Client
	Namespace string
}

// Beat implements throttle.Lease: a strongly consistent ancestor query of
// the run's processes, a transaction only when the run has no start yet,
// and one write of the process's entity.
func (l RampLease) Beat(ctx context.Context, run, proc string, now time.Time, ttl time.Duration) (throttle.Beat, error) {
	var b throttle.Beat
	runKey := datastore.NameKey(RampKind, run, nil)
	runKey.Namespace = l.Namespace
	var start rampEntity
	switch err := l.Client.Get(ctx, runKey, &start); {
	case errors.Is(err, datastore.ErrNoSuchEntity):
		err := Transact(ctx, l.Client, func(tx *datastore.Transaction) error {
			var e rampEntity
			switch err := tx.Get(runKey, &e); {
			case errors.Is(err, datastore.ErrNoSuchEntity):
				b.Start, b.Started = now, true
				_, err := tx.Put(runKey, &rampEntity{At: now})
				return err
			case err != nil:
				return err
			}
			b.Start, b.Started = e.At, false
			return nil
		})
		if err != nil {
			return b, fmt.Errorf("starting run %s in %s: %w", run, RampKind, err)
		}
	case err != nil:
		return b, fmt.Errorf("reading %s %s: %w", RampKind, run, err)
	default:
		b.Start = start.At
	}
	var procs []rampEntity
	keys, err := l.Client.GetAll(ctx, datastore.NewQuery(RampProcessKind).Namespace(l.Namespace).Ancestor(runKey), &procs)
	if err != nil {
		return b, fmt.Errorf("reading the processes of %s %s: %w", RampKind, run, err)
	}
	for i, k := range keys {
		switch live := now.Sub(procs[i].At) < ttl; {
		case k.Name == proc:
			b.WasLive = live
		case live:
			b.Live++
		}
	}
	pk := datastore.NameKey(RampProcessKind, proc, runKey)
	pk.Namespace = l.Namespace
	if _, err := l.Client.Put(ctx, pk, &rampEntity{At: now}); err != nil {
		return b, fmt.Errorf("writing %s %s/%s: %w", RampProcessKind, run, proc, err)
	}
	b.Live++
	return b, nil
}

// Restart implements throttle.Lease: a transaction that moves the run's
// start when it is still from (times compared at the microsecond, which
// Datastore keeps).
func (l RampLease) Restart(ctx context.Context, run string, from, to time.Time) (time.Time, error) {
	runKey := datastore.NameKey(RampKind, run, nil)
	runKey.Namespace = l.Namespace
	var got time.Time
	err := Transact(ctx, l.Client, func(tx *datastore.Transaction) error {
		var e rampEntity
		if err := tx.Get(runKey, &e); err != nil {
			return err
		}
		got = e.At
		if !e.At.Equal(from.Truncate(time.Microsecond)) {
			return nil
		}
		got = to.Truncate(time.Microsecond)
		_, err := tx.Put(runKey, &rampEntity{At: got})
		return err
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("moving the start of run %s in %s: %w", run, RampKind, err)
	}
	return got, nil
}
