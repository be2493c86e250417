package cutover

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/phases"
)

// flakyStore serves a map until down is set, then fails every Load.
type flakyStore struct {
	phases.Store
	m     *Map
	down  atomic.Bool
	loads atomic.Int64
}

func (f *flakyStore) Load(context.Context, string) (*Map, error) {
	f.loads.Add(1)
	if f.down.Load() {
		return nil, errors.New("store unreachable")
	}
	return f.m, nil
}

// TestPhaseCacheFailsSafe: the cache refreshes every TTL/3; when the
// store cannot be read it serves the last phases until they are TTL old,
// then refuses (ErrStalePhases), in every phase; it serves again once a
// refresh succeeds. A call's deadline is the phases' read time plus TTL.
func TestPhaseCacheFailsSafe(t *testing.T) {
	m := &Map{Migration: "m", Buckets: 100}
	for i, p := range phases.Phases {
		m.Spans = append(m.Spans, Span{Range: cohort.Range{First: i, Last: i}, Phase: p, Prev: Old, By: "t"})
	}
	st := &flakyStore{m: m}
	var refreshErrs atomic.Int64
	const ttl = 300 * time.Millisecond
	c, err := newPhaseCache(context.Background(), st, "m", ttl, func(err error) {
		if err != nil {
			refreshErrs.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	time.Sleep(250 * time.Millisecond)
	if n := st.loads.Load(); n < 2 {
		t.Errorf("%d loads in 250 ms with a TTL of 300 ms, want a refresh every 100 ms", n)
	}
	st.down.Store(true)
	downAt := time.Now()
	for i, p := range phases.Phases {
		sp, until, err := c.span(i)
		got := sp.Phase
		if err != nil || got != p {
			t.Errorf("cohort %d just after the store went down: %s, %v; want %s", i, got, err, p)
		}
		if d := time.Until(until); d <= 0 || d > ttl {
			t.Errorf("act-until %s from now, want within the TTL", d)
		}
	}
	time.Sleep(ttl + 50*time.Millisecond)
	for i := range phases.Phases {
		if _, _, err := c.span(i); !errors.Is(err, ErrStalePhases) || !strings.Contains(err.Error(), "store unreachable") {
			t.Errorf("cohort %d %s after the store went down: %v, want ErrStalePhases with the last error", i, time.Since(downAt).Round(time.Millisecond), err)
		}
	}
	if refreshErrs.Load() == 0 {
		t.Error("no failed refresh reported")
	}
	st.down.Store(false)
	time.Sleep(ttl / 2)
	if sp, _, err := c.span(1); err != nil || sp.Phase != DualWrite {
		t.Errorf("after the store came back: %s, %v", sp.Phase, err)
	}
}

// slowFirstStore takes first to answer its first Load (a new connection,
// a store that has only just started), then answers at once.
type slowFirstStore struct {
	phases.Store
	m     *Map
	first time.Duration
	loads atomic.Int64
}

func (s *slowFirstStore) Load(ctx context.Context, _ string) (*Map, error) {
	if s.loads.Add(1) == 1 {
		select {
		case <-time.After(s.first):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.m, nil
}

// TestPhaseCacheOpensOnASlowFirstRead: the library's first read of the
// phases may take longer than a refresh may (TTL/3): with a TTL of 300 ms
// a first read of 400 ms opens the cache (it failed with "context
// deadline exceeded", so an application could not start against a store
// slow to answer its first RPC), and reads again since that map is older
// than the TTL; a caller's context still cuts it short.
func TestPhaseCacheOpensOnASlowFirstRead(t *testing.T) {
	m := &Map{Migration: "m", Buckets: 100}
	const ttl = 300 * time.Millisecond
	st := &slowFirstStore{m: m, first: 400 * time.Millisecond}
	c, err := newPhaseCache(context.Background(), st, "m", ttl, nil)
	if err != nil {
		t.Fatalf("open with a first read of 400 ms and a TTL of 300 ms: %v", err)
	}
	// That read is older than the TTL: the open read again, so the
	// library serves at once.
	if _, _, err := c.span(0); err != nil || st.loads.Load() < 2 {
		t.Errorf("just after the open (%d reads): %v, want the phases served", st.loads.Load(), err)
	}
	c.close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := newPhaseCache(ctx, &slowFirstStore{m: m, first: time.Second}, "m", ttl, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("open under a 50 ms context with a first read of 1 s: %v, want the deadline exceeded", err)
	}
}
