package cutover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
)

// resolveValue fills in cfg's defaults, validates it and resolves it.
func resolveValue(ctx context.Context, cfg config.Config) (*migration.Job, error) {
	c := cfg
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return migration.Resolve(ctx, &c)
}

// resolveFile loads, validates and resolves the migration config at path.
func resolveFile(ctx context.Context, path string) (*migration.Job, error) {
	cfg, err := config.LoadFile(path)
	if err != nil {
		return nil, err
	}
	return migration.Resolve(ctx, cfg)
}

// openFile opens a library with newLib on the migration config file at
// path (the Open* functions).
func openFile[L any](ctx context.Context, path string, newLib func(*migration.Job) (L, error)) (L, error) {
	job, err := resolveFile(ctx, path)
	if err != nil {
		var none L
		return none, err
	}
	return newLib(job)
}

// openValue opens a library with newLib on the migration config cfg (the
// Open*Config functions).
func openValue[L any](ctx context.Context, cfg config.Config, newLib func(*migration.Job) (L, error)) (L, error) {
	job, err := resolveValue(ctx, cfg)
	if err != nil {
		var none L
		return none, err
	}
	return newLib(job)
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
	prev   Phase // the phase the cohort left for phase (Span.Prev)
	route  route
	ctx    context.Context
	cancel context.CancelFunc
	key    string // the old key, for messages and the repair log
	since  time.Time
	// op names the call in the touched mark its new-side write or delete
	// leaves (route.touch), so that a later look at the mark tells
	// whether that write is still new's latest.
	op string
	// mark is the key of the touched mark of the record's new key, once
	// the new side's mutations are built (a string for Spanner, a
	// *datastore.Key for Datastore).
	mark any
}

// route routes a call on rec, whose old key's text is key.
func (r *router) route(ctx context.Context, rec *record.Record, key string) (*call, error) {
	user, err := r.o.user.ID(rec)
	if err != nil {
		return nil, fmt.Errorf("cutover: the user id of %s: %w", key, err)
	}
	return r.routeCohort(ctx, cohort.Of(user, r.o.buckets()), key)
}

// routeEntity routes a call on entity rec, named by its key.
func (r *router) routeEntity(ctx context.Context, rec *record.Record) (*call, error) {
	if rec.Key == nil {
		return nil, errors.New("cutover: the record has no key")
	}
	return r.route(ctx, rec, rec.Key.String())
}

// routed routes entity rec's call op by its cohort's phase, counts it
// and runs do with it.
func (r *router) routed(ctx context.Context, rec *record.Record, op string, do func(*call) error) error {
	c, err := r.routeEntity(ctx, rec)
	if err != nil {
		return err
	}
	defer c.cancel()
	r.stats.call(op, c.phase)
	return do(c)
}

// routeCohort routes a call on the record of cohort k whose old key's
// text is key.
func (r *router) routeCohort(ctx context.Context, k int, key string) (*call, error) {
	c := &call{key: key, cohort: k}
	sp, until, err := r.cache.span(c.cohort)
	if err != nil {
		return nil, err
	}
	c.phase, c.since, c.prev = sp.Phase, sp.Since, sp.Prev
	ttl, skew := r.o.ttl(), r.o.skew()
	deadline := until.Add(skew / 2)
	act, actPrev := c.phase, c.prev
	warmEnd := c.since.Add(ttl + skew/2)
	switch now := time.Now(); {
	case phases.SwitchesAuthority(c.prev, c.phase):
		// The switch of authority (see package phases): act on the
		// phase left until every instance knows the move, with a
		// deadline at that moment (a call that would have less than
		// skew/2 for its work waits instead), then wait out the skew, so
		// that no call writing the old authority first overlaps one
		// writing the new authority first.
		switch switchAt := c.since.Add(ttl + skew); {
		case now.Before(warmEnd.Add(-skew / 2)):
			act, actPrev = c.prev, ""
			if warmEnd.Before(deadline) {
				deadline = warmEnd
			}
		case now.Before(switchAt):
			r.stats.switchWait()
			t := time.NewTimer(switchAt.Sub(now))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, fmt.Errorf("cutover: %s: waiting for cohort %d's switch to %s at %s: %w", c.key, c.cohort, c.phase, switchAt.Format(time.RFC3339Nano), ctx.Err())
			}
		}
	case c.phase == DualWrite && now.Before(warmEnd):
		// A dual_write cohort writes old only for its first TTL + skew/2
		// (by then every instance knows it is in dual_write), and those
		// calls end by TTL + skew after it entered dual_write, before the
		// backfill may read (phases.Rules.DualWriteHold ≥ TTL + skew):
		// see package phases, "Why no acknowledged write is lost".
		act, actPrev = Old, ""
		if warmEnd.Add(skew / 2).Before(deadline) {
			deadline = warmEnd.Add(skew / 2)
		}
	}
	c.route = routeOf(act, actPrev)
	if c.route.touch {
		c.op = uuid.NewString()
	}
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
	// build makes the mutations of the call on a side (building new's
	// sets the call's mark).
	build func(side) ([]M, error)
	// atomic, when old and new share a database, commits mutations of
	// both sides in one transaction (nil otherwise).
	atomic func(ctx context.Context, ms []M) error
	// commit commits one side's mutations.
	commit func(ctx context.Context, sd side, ms []M) error
	// repair is the repair log's entry as a mutation (for atomic).
	repair func(c *call, op string, missed side, cause error) M
	// logRepair records, in one transaction in new's database, that op
	// may not have reached side missed because of cause: the repair
	// log's entry, and the key's touched mark's Behind (see the package
	// doc, "Missed writes"). first says the call's first write is what
	// failed: if that was new's, it logs only if the mark shows new took
	// it.
	logRepair func(c *call, op string, missed side, cause error, first bool) error
}

// applyCall commits the call's mutations on sides: the authoritative
// side's first — if they cannot be built or committed the call fails and
// nothing else is written — then the other side's, whose failure (to
// build them, or to commit them) is logged for repair and does not fail
// the call. When old and new share a database both go in one transaction,
// or, if the second side's cannot be built, the first side's with the
// repair entry. Apart, a failed first commit may still have been applied
// (its response lost), so it is logged too, and the call fails.
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
	// Each write leaves part of the call's time to the repair log, which
	// must be written before the call's deadline (see package phases,
	// "The switch of authority").
	reserved := func() (context.Context, context.CancelFunc) {
		if dl, ok := c.ctx.Deadline(); ok {
			return context.WithDeadline(c.ctx, dl.Add(-r.o.skew()/4))
		}
		return context.WithCancel(c.ctx)
	}
	ctx, cancel := reserved()
	err = st.commit(ctx, sides[0], first)
	cancel()
	if err != nil {
		ferr := fail(sides[0], err)
		if notApplied(err) {
			return ferr
		}
		if lerr := st.logRepair(c, op, sides[1], err, true); lerr != nil {
			return fmt.Errorf("%w (and noting that %s may lack what %s took failed too: %v)", ferr, sides[1], sides[0], lerr)
		}
		return ferr
	}
	if berr == nil {
		ctx, cancel := reserved()
		berr = st.commit(ctx, sides[1], second)
		cancel()
	}
	if berr == nil {
		return nil
	}
	if lerr := st.logRepair(c, op, sides[1], berr, false); lerr != nil {
		r.stats.repair(false)
		return &UnrepairedError{Key: c.key, Write: berr, RepairError: lerr}
	}
	r.stats.repair(true)
	return nil
}

// notApplied reports errors of a commit that say it was not applied: it
// lost to a concurrent transaction (Aborted). Any other failure may come
// after the store applied the commit (a lost response; the emulator then
// refuses the client's retry of the commit as FailedPrecondition).
func notApplied(err error) bool {
	if errors.Is(err, datastore.ErrConcurrentTransaction) {
		return true
	}
	return status.Code(err) == codes.Aborted || spanner.ErrCode(err) == codes.Aborted
}

// shadowRecheckAfter is how long a shadow read that found old and new
// differ waits before it compares them again (see shadowCompare).
const shadowRecheckAfter = 100 * time.Millisecond

// shadowCompare counts a shadow read's mismatch between old's record
// and new's (each nil when absent). behind is the Behind of the key's
// touched mark as the read found it ("" with none, or in one database):
// when it names a store, a write that store missed is in the repair log,
// and a difference is counted as awaiting that repair, not as a mismatch.
//
// Apart, old and new are not read at one moment: a write of the key
// from another call can land between the two reads (old written, new a
// moment later), and they differ for as long as that write is in flight.
// So a difference with no Behind is looked at again, after
// shadowRecheckAfter, through again (the same reads, mark first; nil
// where one read-only transaction reads both stores, which no write
// straddles), and counted as a mismatch only if it is still there; if it
// is gone it is counted as settled. A call with too little time left for
// the second look counts the first.
func (r *router) shadowCompare(c *call, oldRec, newRec *record.Record, behind string, again func() (oldRec, newRec *record.Record, behind string, err error)) {
	d := shadowDiff(oldRec, newRec)
	if d != "" && behind == "" && again != nil && waitRecheck(c.ctx) {
		if o, n, b, err := again(); err == nil {
			if d, behind = shadowDiff(o, n), b; d == "" {
				r.stats.shadowSettled()
			}
		}
	}
	switch {
	case d == "":
	case behind != "":
		r.stats.shadowPending()
	default:
		r.stats.mismatch(c.key + ": " + d)
	}
}

// shadowDiff says how new's record differs from old's ("": they agree).
func shadowDiff(oldRec, newRec *record.Record) string {
	switch {
	case oldRec == nil && newRec != nil:
		return "only in new"
	case oldRec != nil && newRec == nil:
		return "only in old"
	case oldRec != nil:
		return record.Diff(newRec, oldRec)
	}
	return ""
}

// waitRecheck waits shadowRecheckAfter, and reports whether ctx leaves
// time for a second look after that.
func waitRecheck(ctx context.Context) bool {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 3*shadowRecheckAfter {
		return false
	}
	t := time.NewTimer(shadowRecheckAfter)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// writeBatch routes each of recs (route) and counts it as a write, then
// commits the routed ones with applyBatch, each call's mutations from st;
// errs[i] is rec i's outcome (a routing error, or its commit's).
func writeBatch[M any](ctx context.Context, r *router, recs []record.Record, route func(context.Context, *record.Record) (*call, error), st func(*call, *record.Record) store[M]) []error {
	calls, errs := make([]*call, 0, len(recs)), make([]error, len(recs))
	at := map[*call]int{}
	for i := range recs {
		c, err := route(ctx, &recs[i])
		if err != nil {
			errs[i] = err
			continue
		}
		defer c.cancel()
		r.stats.call("write", c.phase)
		calls, at[c] = append(calls, c), i
	}
	stores := func(c *call) store[M] { return st(c, &recs[at[c]]) }
	for j, err := range applyBatch(r, calls, "write", func(c *call) []side { return c.route.writes }, stores) {
		errs[at[calls[j]]] = err
	}
	return errs
}

// applyBatch is applyCall for many calls of one operation at once, in as
// few commits as their routes allow. Calls whose sides are the same (in
// the same order) form a group; a group's first side's mutations are one
// commit, then its second side's one more (old and new in one database:
// both sides of every call of the group in one transaction). What
// applyCall says of one call holds for each call of a group, since each
// call's mutations are in the group's commits and the commits come in
// the call's order: the authoritative side first, a touched mark in the
// transaction of the call's new-side write; a group's commits end by the
// earliest deadline of its calls. A call whose mutations cannot be built
// fails alone (its second side's: logged for repair); a failed commit
// fails, or logs for repair, every call of its group. errs[i] is call
// i's outcome. A key's second call goes in a later round of groups than
// its first (and so on), so that a commit holds one call per key (as a
// Datastore commit must) and a key's calls commit in their order.
func applyBatch[M any](r *router, calls []*call, op string, sidesOf func(*call) []side, st func(*call) store[M]) []error {
	errs := make([]error, len(calls))
	type group struct {
		round int
		idx   []int
	}
	groups := map[string]*group{}
	var order []*group
	seen := map[string]int{}
	for i, c := range calls {
		round := seen[c.key]
		seen[c.key]++
		g := fmt.Sprint(round, sidesOf(c))
		if groups[g] == nil {
			groups[g] = &group{round: round}
			order = append(order, groups[g])
		}
		groups[g].idx = append(groups[g].idx, i)
	}
	slices.SortStableFunc(order, func(a, b *group) int { return a.round - b.round })
	for _, g := range order {
		applyGroup(r, calls, g.idx, op, sidesOf(calls[g.idx[0]]), st, errs)
	}
	return errs
}

// applyGroup commits the calls idx of one group (applyBatch), setting
// their errs.
func applyGroup[M any](r *router, calls []*call, idx []int, op string, sides []side, st func(*call) store[M], errs []error) {
	fail := func(c *call, sd side, err error) error {
		return fmt.Errorf("cutover: %s %s to %s (%s, cohort %d): %w", op, c.key, sd, c.phase, c.cohort, err)
	}
	var first, second []M
	var live []int           // calls whose first side's mutations are built
	berrs := map[int]error{} // calls whose second side's could not be
	earliest := -1
	for _, i := range idx {
		c, s := calls[i], st(calls[i])
		ms, err := s.build(sides[0])
		if err != nil {
			errs[i] = err
			continue
		}
		first = append(first, ms...)
		live = append(live, i)
		if earliest < 0 || deadlineOf(c).Before(deadlineOf(calls[earliest])) {
			earliest = i
		}
		if len(sides) == 2 {
			ms, err := s.build(sides[1])
			if err != nil {
				berrs[i] = err
				continue
			}
			second = append(second, ms...)
		}
	}
	if len(live) == 0 {
		return
	}
	ec := calls[earliest]
	s0 := st(ec)
	if len(sides) == 1 {
		if err := s0.commit(ec.ctx, sides[0], first); err != nil {
			for _, i := range live {
				errs[i] = fail(calls[i], sides[0], err)
			}
		}
		return
	}
	if s0.atomic != nil {
		all := append(append([]M(nil), first...), second...)
		for _, i := range live {
			if berr, ok := berrs[i]; ok {
				all = append(all, st(calls[i]).repair(calls[i], op, sides[1], berr))
			}
		}
		if err := s0.atomic(ec.ctx, all); err != nil {
			for _, i := range live {
				errs[i] = fail(calls[i], sides[0], err)
			}
			return
		}
		for range berrs {
			r.stats.repair(true)
		}
		return
	}
	reserved := func() (context.Context, context.CancelFunc) {
		if dl, ok := ec.ctx.Deadline(); ok {
			return context.WithDeadline(ec.ctx, dl.Add(-r.o.skew()/4))
		}
		return context.WithCancel(ec.ctx)
	}
	ctx, cancel := reserved()
	err := s0.commit(ctx, sides[0], first)
	cancel()
	if err != nil {
		for _, i := range live {
			c := calls[i]
			errs[i] = fail(c, sides[0], err)
			if notApplied(err) {
				continue
			}
			if lerr := st(c).logRepair(c, op, sides[1], err, true); lerr != nil {
				errs[i] = fmt.Errorf("%w (and noting that %s may lack what %s took failed too: %v)", errs[i], sides[1], sides[0], lerr)
			}
		}
		return
	}
	if len(second) > 0 {
		ctx, cancel := reserved()
		err = s0.commit(ctx, sides[1], second)
		cancel()
	}
	for _, i := range live {
		berr, ok := berrs[i]
		if !ok {
			berr = err
		}
		if berr == nil {
			continue
		}
		c := calls[i]
		if lerr := st(c).logRepair(c, op, sides[1], berr, false); lerr != nil {
			r.stats.repair(false)
			errs[i] = &UnrepairedError{Key: c.key, Write: berr, RepairError: lerr}
			continue
		}
		r.stats.repair(true)
	}
}

// deadlineOf is c's deadline (far away when it has none).
func deadlineOf(c *call) time.Time {
	if dl, ok := c.ctx.Deadline(); ok {
		return dl
	}
	return time.Now().Add(365 * 24 * time.Hour)
}
