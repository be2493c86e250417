package datastoredb

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
//
// A transaction loses (LostRace) at its commit, or at one of f's reads:
// the emulator aborts a read that waited too long for another
// transaction's lock ("Transaction lock timeout", seen in CI with four
// racing phase moves).
func Transact(ctx context.Context, c *datastore.Client, f func(tx *datastore.Transaction) error) error {
	deadline := time.Now().Add(Contention)
	wait := 20 * time.Millisecond
	for {
		_, err := c.RunInTransaction(ctx, f, datastore.MaxAttempts(1))
		if !LostRace(err) || time.Now().After(deadline) {
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

// LostRace reports whether err says a transaction lost to a concurrent
// one, at its commit (datastore.ErrConcurrentTransaction) or at a read in
// it (gRPC Aborted, wrapped or not), or found at its commit that it had
// been closed meanwhile (the Firestore emulator's InvalidArgument
// "Transaction is invalid or closed", seen in the cutover soak when a
// repair's transaction raced the application's): running it again may
// succeed. Nothing of a closed transaction was committed.
func LostRace(err error) bool {
	if errors.Is(err, datastore.ErrConcurrentTransaction) || status.Code(err) == codes.Aborted {
		return true
	}
	return status.Code(err) == codes.InvalidArgument && strings.Contains(err.Error(), "Transaction is invalid or closed")
}
