package operator

import "testing"

// TestVerifyMarkable: --mark accepts a cohort whose only differences are
// records routed around and whose repair-log entries are all theirs.
func TestVerifyMarkable(t *testing.T) {
	for _, c := range []struct {
		v               VerifyCohort
		clean, markable bool
	}{
		{VerifyCohort{Matching: 3}, true, true},
		{VerifyCohort{Routed: 1, RepairLog: 1, RepairLogRouted: 1}, false, true},
		{VerifyCohort{RepairLog: 2, RepairLogRouted: 1}, false, false},
		{VerifyCohort{Routed: 1, Missing: 1, RepairLog: 1, RepairLogRouted: 1}, false, false},
		{VerifyCohort{Mismatched: 1}, false, false},
	} {
		if c.v.Clean() != c.clean || c.v.Markable() != c.markable {
			t.Errorf("%+v: clean %v markable %v, want %v %v", c.v, c.v.Clean(), c.v.Markable(), c.clean, c.markable)
		}
	}
}
