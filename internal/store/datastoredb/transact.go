package datastoredb

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"cloud.google.com/go/datastore"
)

// Contention bounds how long Transact keeps running a transaction that
// keeps losing to others.
const Contention = 30 * time.Second

// Transact runs f in a transaction on c, and again after a random wait
// while it loses to concurrent ones, for up to Contention. Each attempt is
// one try of the client (MaxAttempts 1): the client's own attempts follow
// each other at once, and racing transactions that all retry at once can
// keep aborting one another (the emulator locks pessimistically: seen in
// CI, 4 racers losing every attempt for 30 s with 10 immediate tries
// each). A wait drawn from all of [0, w), w doubling from 20 ms to 1 s,
// spreads the racers apart so that one runs alone. A transaction that
// runs again reads its state again, so a compare-and-set in f still
// holds: a racer that lost re-reads what the winner wrote.
func Transact(ctx context.Context, c *datastore.Client, f func(tx *datastore.Transaction) error) error {
	deadline := time.Now().Add(Contention)
	wait := 20 * time.Millisecond
	for {
		_, err := c.RunInTransaction(ctx, f, datastore.MaxAttempts(1))
		if !errors.Is(err, datastore.ErrConcurrentTransaction) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(rand.N(wait) + time.Millisecond):
		}
		wait = min(2*wait, time.Second)
	}
}
