package cutover

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rekeyio/rekey/cutover/phases"
)

// ErrStalePhases is the error of a call made while the library has not
// read the phases for longer than its cache TTL: it then refuses to act on
// them (see the package doc, "Phase cache").
var ErrStalePhases = errors.New("cohort phases are stale")

// phaseCache holds a migration's phase map, refreshed in the background
// every ttl/3; it serves a phase only while the map was read less than
// ttl ago.
type phaseCache struct {
	store     phases.Store
	migration string
	ttl       time.Duration
	now       func() time.Time
	onRefresh func(err error)

	mu      sync.RWMutex
	m       *Map
	readAt  time.Time // when the read of m started
	lastErr error

	stop chan struct{}
	done chan struct{}
}

// openReadTimeout bounds the first read of the phases, when the library
// opens: it may take longer than a refresh (ttl/3) may, since the
// connection to the store is new (the first RPC dials it) and the store
// may only just have started. Waiting longer for it is safe: the map's
// age counts from the read's start, so a map that took longer than the
// TTL to read serves nothing (ErrStalePhases); the open then reads again
// within the same bound. The caller's context may cut it shorter.
const openReadTimeout = 10 * time.Second

func newPhaseCache(ctx context.Context, st phases.Store, migration string, ttl time.Duration, onRefresh func(error)) (*phaseCache, error) {
	c := &phaseCache{store: st, migration: migration, ttl: ttl, now: time.Now, onRefresh: onRefresh, stop: make(chan struct{}), done: make(chan struct{})}
	// A first read that took longer than the TTL leaves a map too old to
	// serve: read again (within the open's time) so that the library
	// opens ready to route, if the store allows.
	deadline := c.now().Add(max(ttl/3, openReadTimeout))
	for {
		if err := c.read(ctx, max(ttl/3, deadline.Sub(c.now()))); err != nil {
			return nil, err
		}
		if _, _, err := c.span(0); err == nil || !c.now().Before(deadline) {
			break
		}
	}
	go c.run()
	return c, nil
}

// staleLoader is a phases.Store that can read the map at a bounded
// staleness without waiting on other transactions (phases.SpannerStore).
type staleLoader interface {
	LoadStale(ctx context.Context, migration string, maxStaleness time.Duration) (*Map, error)
}

// maxStaleness is how stale a snapshot the cache reads (where the store
// can): a tenth of the TTL, at most a second. The map's age counts from
// the snapshot, so staleness only shortens how long it serves.
func (c *phaseCache) maxStaleness() time.Duration {
	return min(c.ttl/10, time.Second)
}

// refresh reads the map once, within a third of the TTL (the refresh
// period), so that one slow read never delays the next.
func (c *phaseCache) refresh(ctx context.Context) error { return c.read(ctx, c.ttl/3) }

// read reads the map once, within timeout.
func (c *phaseCache) read(ctx context.Context, timeout time.Duration) error {
	started := c.now()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var m *Map
	var err error
	if sl, ok := c.store.(staleLoader); ok {
		m, err = sl.LoadStale(rctx, c.migration, c.maxStaleness())
	} else {
		m, err = c.store.Load(rctx, c.migration)
	}
	if err == nil && !m.ReadAt.IsZero() && m.ReadAt.Before(started) {
		started = m.ReadAt
	}
	c.mu.Lock()
	if err == nil {
		c.m, c.readAt, c.lastErr = m, started, nil
	} else {
		c.lastErr = err
	}
	c.mu.Unlock()
	if c.onRefresh != nil {
		c.onRefresh(err)
	}
	if err != nil {
		return fmt.Errorf("reading the phases of %s: %w", c.migration, err)
	}
	return nil
}

func (c *phaseCache) run() {
	defer close(c.done)
	t := time.NewTicker(c.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			_ = c.refresh(context.Background())
		}
	}
}

func (c *phaseCache) close() {
	close(c.stop)
	<-c.done
}

// span returns cohort k's span (for a cohort never moved: Old, Since
// zero) and the time until which the library may act on it (the map's
// read time plus the TTL), or ErrStalePhases.
func (c *phaseCache) span(k int) (sp Span, until time.Time, err error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	until = c.readAt.Add(c.ttl)
	if !c.now().Before(until) {
		return Span{}, until, fmt.Errorf("%w: %s's phases were last read %s ago, longer than the cache TTL %s (last error: %v)", ErrStalePhases, c.migration, c.now().Sub(c.readAt).Round(time.Millisecond), c.ttl, c.lastErr)
	}
	return c.m.SpanOf(k), until, nil
}

// snapshot returns the map held.
func (c *phaseCache) snapshot() *Map {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m
}
