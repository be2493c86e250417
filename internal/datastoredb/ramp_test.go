package datastoredb_test

import (
	"testing"

	"github.com/rekeyio/rekey/internal/datastoredb"
	"github.com/rekeyio/rekey/internal/emulator"
	"github.com/rekeyio/rekey/internal/throttle/leasetest"
)

func TestRampLease(t *testing.T) {
	leasetest.Run(t, datastoredb.RampLease{Client: emulator.TestDatastore(t), Namespace: emulator.UniqueNamespace("ramp-lease")})
}
