package datastoredb_test

import (
	"testing"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/write/throttle/leasetest"
)

func TestRampLease(t *testing.T) {
	leasetest.Run(t, datastoredb.RampLease{Client: emulator.TestDatastore(t), Namespace: emulator.UniqueNamespace("ramp-lease")})
}
