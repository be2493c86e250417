package cutover

import (
	"context"
	"fmt"
	"time"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/internal/config"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
)

// resolveFile loads, validates and resolves the migration config at path.
func resolveFile(ctx context.Context, path string) (*migration.Job, error) {
	cfg, err := config.LoadFile(path)
	if err != nil {
		return nil, err
	}
	return migration.Resolve(ctx, cfg)
}

// router is what the Spanner and the Datastore libraries share: the
// options, the phase cache and the counters, and how a call is routed.
type router struct {
	o     Options
	cache *phaseCache
	stats *stats
}

// Stats returns a snapshot of the library's counters.
func (r *router) Stats() Stats { return r.stats.snapshot() }

// Phases returns the phase map the library acts on (its last read).
func (r *router) Phases() *Map { return r.cache.snapshot() }

// call is one routed call: the record's cohort, phase and route, and the
// context bounded by the phases' validity.
type call struct {
	cohort int
	phase  Phase
	route  route
	ctx    context.Context
	cancel context.CancelFunc
	key    string // the old key, for messages and the repair log
	since  time.Time
}

// route routes a call on rec, whose old key's text is key.
func (r *router) route(ctx context.Context, rec *record.Record, key string) (*call, error) {
	c := &call{key: key}
	user, err := r.o.UserID(rec)
	if err != nil {
		return nil, fmt.Errorf("cutover: the user id of %s: %w", c.key, err)
	}
	c.cohort = cohort.Of(user, r.o.buckets())
	var until time.Time
	if c.phase, c.since, until, err = r.cache.phase(c.cohort); err != nil {
		return nil, err
	}
	// A dual_write cohort writes old only for its first TTL + skew/2 (by
	// then every instance knows it is in dual_write), and those calls end
	// by TTL + skew after it entered dual_write, before the backfill may
	// read (Rules.DualWriteHold ≥ TTL + skew): see the package doc.
	deadline := until.Add(r.o.skew() / 2)
	warmEnd := c.since.Add(r.o.ttl() + r.o.skew()/2)
	warming := c.phase == DualWrite && time.Now().Before(warmEnd)
	if warming && warmEnd.Add(r.o.skew()/2).Before(deadline) {
		deadline = warmEnd.Add(r.o.skew() / 2)
	}
	c.route = routeOf(c.phase, warming)
	c.ctx, c.cancel = context.WithDeadline(ctx, deadline)
	return c, nil
}

// backfillable refuses a backfill write of the call's record unless its
// cohort is in dual_write and has been for the hold.
func (r *router) backfillable(c *call) error {
	if c.phase != DualWrite {
		return fmt.Errorf("cutover: backfilling %s: cohort %d is %s, not dual_write", c.key, c.cohort, c.phase)
	}
	if hold := r.o.ttl() + r.o.skew(); time.Now().Before(c.since.Add(hold)) {
		return fmt.Errorf("cutover: backfilling %s: cohort %d entered dual_write at %s, less than the cache TTL plus skew (%s) ago: instances may still write old only", c.key, c.cohort, c.since.Format(time.RFC3339Nano), hold)
	}
	return nil
}

// store is what applyCall needs of a library's stores, over its mutation
// type M.
type store[M any] struct {
	// build makes the mutations of the call on a side.
	build func(side) ([]M, error)
	// atomic, when old and new share a database, commits mutations of
	// both sides in one transaction (nil otherwise).
	atomic func(ctx context.Context, ms []M) error
	// commit commits one side's mutations.
	commit func(ctx context.Context, sd side, ms []M) error
	// repair is the repair log's entry as a mutation (for atomic), and
	// logRepair writes it on its own.
	repair    func(c *call, op string, missed side, cause error) M
	logRepair func(c *call, op string, missed side, cause error) error
}

// applyCall commits the call's mutations on sides: the authoritative
// side's first — if they cannot be built or committed the call fails and
// nothing else is written — then the other side's, whose failure (to
// build them, or to commit them) is logged for repair and does not fail
// the call. When old and new share a database both go in one transaction,
// or, if the second side's cannot be built, the first side's with the
// repair entry.
func applyCall[M any](r *router, c *call, op string, sides []side, st store[M]) error {
	first, err := st.build(sides[0])
	if err != nil {
		return err
	}
	fail := func(sd side, err error) error {
		return fmt.Errorf("cutover: %s %s to %s (%s, cohort %d): %w", op, c.key, sd, c.phase, c.cohort, err)
	}
	if len(sides) == 1 {
		if err := st.commit(c.ctx, sides[0], first); err != nil {
			return fail(sides[0], err)
		}
		return nil
	}
	second, berr := st.build(sides[1])
	if st.atomic != nil {
		all := append(append([]M(nil), first...), second...)
		if berr != nil {
			all = append(append([]M(nil), first...), st.repair(c, op, sides[1], berr))
		}
		if err := st.atomic(c.ctx, all); err != nil {
			return fail(sides[0], err)
		}
		if berr != nil {
			r.stats.repair(true)
		}
		return nil
	}
	if err := st.commit(c.ctx, sides[0], first); err != nil {
		return fail(sides[0], err)
	}
	if berr == nil {
		berr = st.commit(c.ctx, sides[1], second)
	}
	if berr == nil {
		return nil
	}
	if lerr := st.logRepair(c, op, sides[1], berr); lerr != nil {
		r.stats.repair(false)
		return &UnrepairedError{Key: c.key, Write: berr, RepairError: lerr}
	}
	r.stats.repair(true)
	return nil
}

// shadowCompare counts a shadow read's mismatch between old's record
// and new's (each nil when absent).
func (r *router) shadowCompare(c *call, oldRec, newRec *record.Record) {
	switch {
	case oldRec == nil && newRec != nil:
		r.stats.mismatch(c.key + ": only in new")
	case oldRec != nil && newRec == nil:
		r.stats.mismatch(c.key + ": only in old")
	case oldRec != nil:
		if d := record.Diff(newRec, oldRec); d != "" {
			r.stats.mismatch(c.key + ": " + d)
		}
	}
}
