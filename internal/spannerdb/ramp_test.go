package spannerdb_test

import (
	"testing"

	"github.com/rekeyio/rekey/internal/emulator"
	"github.com/rekeyio/rekey/internal/spannerdb"
	"github.com/rekeyio/rekey/internal/throttle/leasetest"
)

func TestRampLease(t *testing.T) {
	leasetest.Run(t, spannerdb.RampLease{Client: emulator.TestDB(t, spannerdb.RampDDL)})
}
