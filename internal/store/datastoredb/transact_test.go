package datastoredb

import (
	"errors"
	"fmt"
	"testing"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A transaction that lost to another, at its commit or at a read inside
// it (the emulator's "Transaction lock timeout", wrapped by the caller's
// message), or was closed meanwhile (the emulator's "Transaction is
// invalid or closed"), runs again; other failures do not.
func TestLostRace(t *testing.T) {
	lockTimeout := status.Error(codes.Aborted, "Transaction lock timeout.")
	for _, c := range []struct {
		err  error
		want bool
	}{
		{datastore.ErrConcurrentTransaction, true},
		{fmt.Errorf("moving cohorts: %w", datastore.ErrConcurrentTransaction), true},
		{lockTimeout, true},
		{fmt.Errorf("reading the RekeyCohortPhase of m: %w", lockTimeout), true},
		{status.Error(codes.InvalidArgument, "Transaction is invalid or closed."), true},
		{fmt.Errorf("repairing in old: %w", status.Error(codes.InvalidArgument, "Transaction is invalid or closed.")), true},
		{status.Error(codes.InvalidArgument, "The value of property \"Page\" is longer than 1500 bytes."), false},
		{status.Error(codes.DeadlineExceeded, "deadline"), false},
		{errors.New("refused"), false},
		{nil, false},
	} {
		if got := LostRace(c.err); got != c.want {
			t.Errorf("LostRace(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
