package datastoredb

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"cloud.google.com/go/datastore"
)

// contentionAttempts is how many times the client runs a transaction that
// lost to another before it returns datastore.ErrConcurrentTransaction
// (its default is 3).
const contentionAttempts = 10

// Contention bounds how long Transact keeps running a transaction that
// keeps losing to others.
const Contention = 30 * time.Second

// Transact runs f in a transaction on c, and again after a jittered wait
// (from 50 ms, doubling to 2 s) while it loses to concurrent ones, for up
// to Contention. The client's own attempts follow each other at once,
// and under load racing transactions can all lose their attempts
// together (the emulator locks pessimistically). A transaction that runs
// again reads its state again, so a compare-and-set in f still holds: a
// racer that lost re-reads what the winner wrote.
func Transact(ctx context.Context, c *datastore.Client, f func(tx *datastore.Transaction) error) error {
	deadline := time.Now().Add(Contention)
	wait := 50 * time.Millisecond
	for {
		_, err := c.RunInTransaction(ctx, f, datastore.MaxAttempts(contentionAttempts))
		if !errors.Is(err, datastore.ErrConcurrentTransaction) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait/2 + rand.N(wait/2+1)):
		}
		wait = min(2*wait, 2*time.Second)
	}
}
