package spannerdb_test

import (
	"errors"
	"fmt"
	"testing"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/write/throttle/leasetest"
)

func TestRampLease(t *testing.T) {
	leasetest.Run(t, spannerdb.RampLease{Client: emulator.TestDB(t, spannerdb.RampDDL)})
}

// TestEmulatorAborted: the emulator's refusals of a concurrent transaction
// are recognised, also wrapped by a caller, and only against the emulator.
func TestEmulatorAborted(t *testing.T) {
	t.Setenv("SPANNER_EMULATOR_HOST", "localhost:1")
	refused := spanner.ToSpannerError(status.Error(codes.FailedPrecondition, "Invalid transaction ID. Transaction ID must be >= 10"))
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{refused, true},
		{fmt.Errorf("reading the repair log: %w", refused), true},
		{spanner.ToSpannerError(status.Error(codes.NotFound, "Transaction not found")), true},
		{spanner.ToSpannerError(status.Error(codes.FailedPrecondition, "column C is NOT NULL")), false},
		{errors.New("transaction"), false},
		{nil, false},
	} {
		if got := spannerdb.EmulatorAborted(tc.err); got != tc.want {
			t.Errorf("EmulatorAborted(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	t.Setenv("SPANNER_EMULATOR_HOST", "")
	if spannerdb.EmulatorAborted(refused) {
		t.Error("EmulatorAborted is true without the emulator")
	}
}
