package cutover

import (
	"fmt"
	"testing"

	"github.com/rekeyio/rekey/cutover/phases"
)

// TestRouteOf is the package doc's table, phase by phase.
func TestRouteOf(t *testing.T) {
	for _, tc := range []struct {
		p, prev                 Phase
		writes, deletes, read   string
		shadow, fallback, touch bool
	}{
		{Old, "", "[old]", "[old]", "old", false, false, false},
		{DualWrite, Old, "[old new]", "[old new]", "old", false, false, true},
		{Backfilled, DualWrite, "[old new]", "[old new]", "old", false, false, true},
		{Verified, Backfilled, "[old new]", "[old new]", "old", false, false, true},
		{Shadow, Verified, "[old new]", "[old new]", "old", true, false, true},
		{ReadNew, Shadow, "[new old]", "[new old]", "new", false, true, true},
		{NewOnly, ReadNew, "[new]", "[new old]", "new", false, false, false},
		{Done, NewOnly, "[new]", "[new]", "new", false, false, false},
	} {
		r := routeOf(tc.p, tc.prev)
		got := fmt.Sprintf("%v %v %v %v %v %v", r.writes, r.deletes, r.read, r.shadow, r.fallback, r.touch)
		want := fmt.Sprintf("%s %s %s %v %v %v", tc.writes, tc.deletes, tc.read, tc.shadow, tc.fallback, tc.touch)
		if got != want {
			t.Errorf("%s (from %s): %s, want %s", tc.p, tc.prev, got, want)
		}
	}
	// Where a cohort came from changes one route: a read_new cohort
	// brought back from new_only never reads old (it misses new_only's
	// writes). Every phase that reads old while both are written looks
	// at the touched mark too.
	for _, p := range phases.Phases {
		for _, prev := range phases.Phases {
			r, base := routeOf(p, prev), routeOf(p, "")
			if r.consult != (r.read == oldSide && r.touch) {
				t.Errorf("%s from %s: consult %v", p, prev, r.consult)
			}
			if r.oldStale != (p == ReadNew && prev == NewOnly) || r.oldStale && r.fallback {
				t.Errorf("%s from %s: oldStale %v, fallback %v", p, prev, r.oldStale, r.fallback)
			}
			r.oldStale, r.fallback = false, base.fallback
			if fmt.Sprint(r) != fmt.Sprint(base) {
				t.Errorf("%s from %s routes otherwise: %+v, want %+v", p, prev, r, base)
			}
		}
	}
}
