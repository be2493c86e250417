// Package leasetest checks a throttle.Lease against its contract, for the
// stores' implementations to run against the emulators.
package leasetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rekeyio/rekey/internal/write/throttle"
)

// Run checks l: the run's first beat sets its start and every other beat
// reads it, also when two processes beat at once; Live counts the
// processes beaten within the TTL, the caller included; WasLive tells a
// process whether its own lease was still in force; Restart moves a
// start only from the one in force; runs are apart.
func Run(t *testing.T, l throttle.Lease) {
	ctx := context.Background()
	run := fmt.Sprintf("leasetest-%d", time.Now().UnixNano())
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	ttl := 15 * time.Second
	beat := func(run, proc string, at time.Duration) throttle.Beat {
		t.Helper()
		b, err := l.Beat(ctx, run, proc, t0.Add(at), ttl)
		if err != nil {
			t.Fatalf("Beat(%s, %s, +%s): %v", run, proc, at, err)
		}
		return b
	}
	b := beat(run, "a", 0)
	if !b.Started || !b.Start.Equal(t0) || b.WasLive || b.Live != 1 {
		t.Errorf("first beat of a run = %+v, want it started at %s, Live 1, not WasLive", b, t0)
	}
	b = beat(run, "b", 2*time.Second)
	if b.Started || !b.Start.Equal(t0) || b.WasLive || b.Live != 2 {
		t.Errorf("b joining = %+v, want start %s (not set by b), Live 2, not WasLive", b, t0)
	}
	b = beat(run, "a", 5*time.Second)
	if b.Started || !b.WasLive || b.Live != 2 {
		t.Errorf("a's second beat = %+v, want WasLive, Live 2", b)
	}
	// b stops beating; 15 s after its last beat it no longer counts.
	b = beat(run, "a", 17*time.Second+time.Millisecond)
	if b.Live != 1 || !b.WasLive {
		t.Errorf("a after b's lease lapsed = %+v, want Live 1, WasLive", b)
	}
	// a pauses longer than the TTL: its own lease has lapsed.
	b = beat(run, "a", 40*time.Second)
	if b.WasLive || b.Live != 1 || !b.Start.Equal(t0) {
		t.Errorf("a after a 23 s pause = %+v, want not WasLive, Live 1, the same start", b)
	}
	// Another run is apart.
	other := run + "-other"
	b = beat(other, "a", 41*time.Second)
	if !b.Started || b.Live != 1 || !b.Start.Equal(t0.Add(41*time.Second)) {
		t.Errorf("first beat of another run = %+v, want its own start", b)
	}
	// The first writer moves the start later; a move from a start no
	// longer in force changes nothing.
	moved := t0.Add(45 * time.Second)
	if got, err := l.Restart(ctx, other, t0.Add(41*time.Second), moved); err != nil || !got.Equal(moved) {
		t.Errorf("Restart(%s → %s) = %s, %v; want the start moved", t0.Add(41*time.Second), moved, got, err)
	}
	if b = beat(other, "b", 46*time.Second); !b.Start.Equal(moved) || b.Started {
		t.Errorf("a beat after the start moved = %+v, want start %s", b, moved)
	}
	if got, err := l.Restart(ctx, other, t0.Add(41*time.Second), t0.Add(50*time.Second)); err != nil || !got.Equal(moved) {
		t.Errorf("Restart from a start no longer in force = %s, %v; want %s unchanged", got, err, moved)
	}
	if b = beat(run, "a", 47*time.Second); !b.Start.Equal(t0) {
		t.Errorf("moving another run's start moved this one's: %+v", b)
	}
	// Two first beats at once: exactly one sets the start, both read it.
	race := run + "-race"
	var wg sync.WaitGroup
	got := make([]throttle.Beat, 2)
	errs := make([]error, 2)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = l.Beat(ctx, race, fmt.Sprintf("p%d", i), t0.Add(time.Duration(i)*time.Millisecond), ttl)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("concurrent first beats: %v", err)
		}
	}
	if got[0].Started == got[1].Started || !got[0].Start.Equal(got[1].Start) {
		t.Errorf("concurrent first beats = %+v and %+v, want one to set the start and both to read the same", got[0], got[1])
	}
}
