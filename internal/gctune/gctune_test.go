package gctune

import (
	"math"
	"os"
	"runtime/debug"
	"testing"
)

// TestTuneGC: without GOGC and GOMEMLIMIT in the environment, rekey runs
// with GOGC 200 and a soft memory limit below the machine's memory; each
// setting in the environment is left as it is.
func TestTuneGC(t *testing.T) {
	gc, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1)
	debug.SetGCPercent(gc)
	t.Cleanup(func() { debug.SetGCPercent(gc); debug.SetMemoryLimit(limit) })

	for _, env := range []string{"GOGC", "GOMEMLIMIT", "AUTOMEMLIMIT"} {
		t.Setenv(env, "") // restored after the test
		os.Unsetenv(env)
	}
	debug.SetGCPercent(100)
	debug.SetMemoryLimit(math.MaxInt64)
	Tune()
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GOGC unset: the collector's target is %d, want %d", got, gcPercent)
	}
	if got := debug.SetMemoryLimit(-1); got <= 0 || got == math.MaxInt64 {
		t.Errorf("GOMEMLIMIT unset: the memory limit is %d, want one below the machine's memory", got)
	}

	t.Setenv("GOGC", "150")
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetGCPercent(150)
	debug.SetMemoryLimit(1 << 30)
	Tune()
	if got := debug.SetGCPercent(150); got != 150 {
		t.Errorf("GOGC=150: the collector's target is %d, want it left at 150", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("GOMEMLIMIT=1GiB: the memory limit is %d, want it left at %d", got, 1<<30)
	}
}
