package cutover

import (
	"fmt"
	"testing"
)

// TestRouteOf is the package doc's table, phase by phase.
func TestRouteOf(t *testing.T) {
	for _, tc := range []struct {
		p                       Phase
		warming                 bool
		writes, deletes, read   string
		shadow, fallback, touch bool
	}{
		{Old, false, "[old]", "[old]", "old", false, false, false},
		{DualWrite, true, "[old]", "[old]", "old", false, false, false},
		{DualWrite, false, "[old new]", "[old new]", "old", false, false, true},
		{Backfilled, false, "[old new]", "[old new]", "old", false, false, true},
		{Verified, false, "[old new]", "[old new]", "old", false, false, true},
		{Shadow, false, "[old new]", "[old new]", "old", true, false, true},
		{ReadNew, false, "[new old]", "[new old]", "new", false, true, true},
		{NewOnly, false, "[new]", "[new old]", "new", false, false, false},
		{Done, false, "[new]", "[new]", "new", false, false, false},
	} {
		r := routeOf(tc.p, tc.warming)
		got := fmt.Sprintf("%v %v %v %v %v %v", r.writes, r.deletes, r.read, r.shadow, r.fallback, r.touch)
		want := fmt.Sprintf("%s %s %s %v %v %v", tc.writes, tc.deletes, tc.read, tc.shadow, tc.fallback, tc.touch)
		if got != want {
			t.Errorf("%s (warming %v): %s, want %s", tc.p, tc.warming, got, want)
		}
	}
	// Warming only changes dual_write.
	for _, p := range Phases {
		if p != DualWrite && fmt.Sprint(routeOf(p, true)) != fmt.Sprint(routeOf(p, false)) {
			t.Errorf("%s routes otherwise while warming", p)
		}
	}
}
