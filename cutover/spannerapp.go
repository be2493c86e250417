package cutover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
)

// Options configure the application library.
type Options struct {
	// Migration names the migration in the phase store (required).
	Migration string
	// NewSpannerClient, for a Spanner library whose new table is in
	// another database than the application's client's, is the client of
	// that database (nil: the library opens one from the environment and
	// Close closes it; a given client is the application's to close). It
	// must be a client of the migration's target database.
	NewSpannerClient *spanner.Client
	// NewDatastoreClient is the same for a Datastore library whose new
	// entities are in another database.
	NewDatastoreClient *datastore.Client
	// Buckets is the number of cohorts (0: the config's cohort.buckets).
	Buckets int
	// CacheTTL is the longest the library acts on phases it read (0: the
	// config's cohort.cache_ttl, or DefaultCacheTTL): it refreshes them
	// every CacheTTL/3 and refuses calls (ErrStalePhases) once they are
	// older. Skew (0: cohort.skew, or DefaultSkew) covers clocks and calls
	// in flight: a call's writes get a deadline of the phases' read time
	// plus CacheTTL plus Skew/2. The operator's phases.Rules.DualWriteHold
	// must be at least CacheTTL + Skew (phases.RulesFor gives it from the
	// config).
	CacheTTL, Skew time.Duration

	// user is the config's cohort.user.
	user cohort.User
}

func (o Options) ttl() time.Duration {
	if o.CacheTTL > 0 {
		return o.CacheTTL
	}
	return DefaultCacheTTL
}

func (o Options) skew() time.Duration {
	if o.Skew > 0 {
		return o.Skew
	}
	return DefaultSkew
}

func (o Options) buckets() int {
	if o.Buckets > 0 {
		return o.Buckets
	}
	return cohort.DefaultBuckets
}

// UnrepairedError is the error of a call whose authoritative write
// succeeded while its second write and the repair log's entry for it both
// failed: the stores differ on the record until verify finds it.
type UnrepairedError struct {
	Key                string
	Write, RepairError error
}

func (e *UnrepairedError) Error() string {
	return fmt.Sprintf("cutover: %s: the authoritative write succeeded; the second failed (%v) and so did its repair-log entry (%v)", e.Key, e.Write, e.RepairError)
}

// Spanner routes an application's reads and writes of one Spanner table
// (the migration's source, in old keys) to the old and the new table by
// the phase of each record's cohort. It is safe for concurrent use.
type Spanner struct {
	router
	oldC, newC *spanner.Client
	ownNew     bool
	same       bool                     // old and new in one database: dual writes are one transaction
	root       *spannerTable            // the main table
	tables     map[string]*spannerTable // every table, by its old name in lower case
	rk         *rekeyer.Rekeyer
	store      phases.SpannerStore
	// guards holds the guarded placeholders of calls built and not yet
	// committed (*spanner.Mutation → placeholderGuard).
	guards sync.Map
}

// OpenSpanner is NewSpanner on the migration config file at path (the
// one `rekey run` is given).
func OpenSpanner(ctx context.Context, client *spanner.Client, path string, o Options) (*Spanner, error) {
	return openFile(ctx, path, func(job *migration.Job) (*Spanner, error) { return NewSpanner(ctx, client, job, o) })
}

// OpenSpannerConfig is NewSpanner on a migration's config given as a Go
// value: its defaults are filled in and it is validated as a file's
// would be (cfg itself is not changed).
func OpenSpannerConfig(ctx context.Context, client *spanner.Client, cfg config.Config, o Options) (*Spanner, error) {
	return openValue(ctx, cfg, func(job *migration.Job) (*Spanner, error) { return NewSpanner(ctx, client, job, o) })
}

// NewSpanner returns the library for job (a Spanner → Spanner migration),
// reading and writing old through client (the application's client of
// the source database) and new through a client of the target database
// (client itself when the target is the same database; else
// Options.NewSpannerClient, or one it opens and Close closes). A record's
// user, whose cohort routes each call, is where the config's cohort.user
// says. The phase store, the repair log and the touched
// marks are in the target database (phases.CreateSpannerTables).
func NewSpanner(ctx context.Context, client *spanner.Client, job *migration.Job, o Options) (*Spanner, error) {
	cfg := job.Config
	if cfg.Source.Type != config.TypeSpanner || cfg.Target.Type != config.TypeSpanner {
		return nil, fmt.Errorf("cutover.NewSpanner: the migration goes from %s to %s; want spanner to spanner", cfg.Source.Type, cfg.Target.Type)
	}
	o, err := optionsFor(job, o)
	if err != nil {
		return nil, fmt.Errorf("cutover.NewSpanner: %w", err)
	}
	rk, err := job.Spec.Build()
	if err != nil {
		return nil, err
	}
	s := &Spanner{router: router{o: o, stats: newStats(o.Migration)}, oldC: client, rk: rk}
	target := spannerdb.DatabasePath(cfg.Target.Project, cfg.Target.Instance, cfg.Target.Database)
	if nc := o.NewSpannerClient; nc != nil && nc.DatabaseName() != target {
		return nil, fmt.Errorf("cutover.NewSpanner: Options.NewSpannerClient is a client of %s, not of the migration's target %s", nc.DatabaseName(), target)
	}
	if client.DatabaseName() == target {
		s.newC, s.same = client, true
	} else if o.NewSpannerClient != nil {
		s.newC = o.NewSpannerClient
	} else if s.newC, err = spanner.NewClient(ctx, target); err != nil {
		return nil, fmt.Errorf("cutover: client of %s: %w", target, err)
	} else {
		s.ownNew = true
	}
	if s.root, s.tables, err = spannerTables(ctx, s.oldC, s.newC, job, o.user); err != nil {
		s.Close()
		return nil, err
	}
	if s.same && strings.EqualFold(s.root.old.Name, s.root.new.Name) {
		s.Close()
		return nil, fmt.Errorf("cutover: old and new are the same table %s", s.root.old.Name)
	}
	s.store = phases.SpannerStore{Client: s.newC}
	if s.cache, err = newPhaseCache(ctx, s.store, o.Migration, o.ttl(), s.stats.refresh); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close stops the phase refresh and closes the clients the library
// opened (not the application's).
func (s *Spanner) Close() {
	if s.cache != nil {
		s.cache.close()
	}
	if s.ownNew && s.newC != nil {
		s.newC.Close()
	}
}

func (s *Spanner) route(ctx context.Context, rec *record.Record) (*call, error) {
	t, err := s.table(rec)
	if err != nil {
		return nil, err
	}
	key, err := spannerdb.KeyOf(rec, t.old)
	if err != nil {
		return nil, fmt.Errorf("cutover: %w", err)
	}
	return s.router.route(ctx, rec, t.keyText(key))
}

// newRecord is rec rewritten: its new key and the new table's row.
func (s *Spanner) newRecord(rec *record.Record) (*record.Record, error) {
	nr := *rec
	nr.Fields = append([]record.Field(nil), rec.Fields...)
	if err := s.rk.Rewrite(&nr); err != nil {
		return nil, fmt.Errorf("cutover: rewriting %s: %w", rec.Describe(), err)
	}
	return &nr, nil
}

// Write writes rec (a row of the old table, in old keys) where its
// cohort's phase says: old, new, or both, the authoritative first (see
// the package doc).
func (s *Spanner) Write(ctx context.Context, rec record.Record) error {
	c, err := s.route(ctx, &rec)
	if err != nil {
		return err
	}
	defer c.cancel()
	s.stats.call("write", c.phase)
	return s.apply(c, "write", c.route.writes, func(sd side) ([]*spanner.Mutation, error) { return s.writeMutations(c, sd, &rec) })
}

// WriteBatch writes recs as Write writes each, in as few commits as
// their cohorts' phases allow (applyBatch): one group of commits per
// order of sides their phases write. errs[i] is rec i's outcome, as
// Write's would be; a key's writes commit in their order.
func (s *Spanner) WriteBatch(ctx context.Context, recs []record.Record) []error {
	return writeBatch(ctx, &s.router, recs, s.route, func(c *call, rec *record.Record) store[*spanner.Mutation] {
		return s.sides(func(sd side) ([]*spanner.Mutation, error) { return s.writeMutations(c, sd, rec) })
	})
}

// writeMutations are the mutations writing rec on side sd.
func (s *Spanner) writeMutations(c *call, sd side, rec *record.Record) ([]*spanner.Mutation, error) {
	t, err := s.table(rec)
	if err != nil {
		return nil, err
	}
	if sd == oldSide {
		m, err := spannerdb.MutationFor(rec, t.old, storewrite.ModeUpsert)
		if err != nil {
			return nil, fmt.Errorf("cutover: %s: %w", c.key, err)
		}
		return []*spanner.Mutation{m}, nil
	}
	nr, err := s.newRecord(rec)
	if err != nil {
		return nil, err
	}
	var muts []*spanner.Mutation
	switch {
	case t.parent == nil:
	case c.route.writes[0] == oldSide:
		if muts, err = placeholders(t, nr); err != nil {
			return nil, fmt.Errorf("cutover: %s in %s: %w", c.key, t.new.Name, err)
		}
	case c.route.touch && !s.same:
		if muts, err = s.guardedPlaceholders(t, rec, nr); err != nil {
			return nil, fmt.Errorf("cutover: %s in %s: %w", c.key, t.new.Name, err)
		}
	}
	m, err := spannerdb.MutationFor(nr, t.new, storewrite.ModeUpsert)
	if err != nil {
		s.dropGuards(muts)
		return nil, fmt.Errorf("cutover: %s in %s: %w", c.key, t.new.Name, err)
	}
	muts = append(muts, m)
	if c.route.touch {
		tm, err := s.touch(c, t, nr, nil, false)
		if err != nil {
			s.dropGuards(muts)
			return nil, err
		}
		muts = append(muts, tm...)
	}
	return muts, nil
}

// placeholderGuard is what a guarded placeholder of an ancestor row in
// new needs to hold for the commit to write it: the row (table, key)
// missing from new, its touched mark (mark) saying new is behind, and
// the row (oldTable, oldKey) in old.
type placeholderGuard struct {
	table, keyCol, mark string
	key                 spanner.Key
	oldTable, oldKeyCol string
	oldKey              spanner.Key
}

// guardedPlaceholders are placeholders (see there) for a call that
// writes new first (read_new, old and new apart), each kept in s.guards
// with what the commit must find before it writes it (commitNew): the
// ancestor row missing from new and its touched mark saying Behind =
// "new", and old holding the row. That is the ancestor whose write new
// missed while old was authoritative (in the repair log, not yet
// repaired): old holds it, and reads of it go to old until the repair
// copies it, so a row of its key columns alone in new changes nothing a
// read returns and lets its children be written. An ancestor that is
// missing for another reason gets none, and the child's write fails as
// Spanner's own would: never written, or deleted, also when new missed
// the delete (Behind = "new" and old lacks the row: a placeholder there
// would let a child of a deleted row be acknowledged, and the repair's
// delete of the ancestor in new would then take the child with it).
func (s *Spanner) guardedPlaceholders(t *spannerTable, rec, nr *record.Record) ([]*spanner.Mutation, error) {
	muts, err := placeholders(t, nr)
	if err != nil {
		return nil, err
	}
	anc := t.ancestors()
	for i, m := range muts {
		a := anc[len(anc)-1-i] // placeholders are root first
		k, err := spannerdb.SpannerKey(nr, a.new)
		if err != nil {
			s.dropGuards(muts)
			return nil, err
		}
		tk, err := a.touchedKey(nr)
		if err != nil {
			s.dropGuards(muts)
			return nil, err
		}
		ok, err := spannerdb.SpannerKey(rec, a.old)
		if err != nil {
			s.dropGuards(muts)
			return nil, err
		}
		s.guards.Store(m, placeholderGuard{table: a.new.Name, keyCol: a.new.Key.Columns[0].Name, mark: tk, key: k,
			oldTable: a.old.Name, oldKeyCol: a.old.Key.Columns[0].Name, oldKey: ok})
	}
	return muts, nil
}

// dropGuards forgets the guards of muts (a call built and not committed).
func (s *Spanner) dropGuards(muts []*spanner.Mutation) {
	for _, m := range muts {
		s.guards.Delete(m)
	}
}

// commitNew commits ms in new's database. Guarded placeholders among
// them are left out of a first, blind commit; only if new refuses it for
// a missing parent row does a second go, in one read-write transaction
// that first reads, for each guarded placeholder, whether its guard
// holds (taking the locks of the row and the mark, so that a concurrent
// delete of the ancestor, which writes both, is ordered with it), and
// writes those whose guard does. The common case, every parent in new,
// costs what it did.
func (s *Spanner) commitNew(ctx context.Context, ms []*spanner.Mutation) error {
	gs := map[int]placeholderGuard{}
	rest := make([]*spanner.Mutation, 0, len(ms))
	for i, m := range ms {
		if g, ok := s.guards.LoadAndDelete(m); ok {
			gs[i] = g.(placeholderGuard)
			continue
		}
		rest = append(rest, m)
	}
	if len(gs) == 0 {
		return applyMutations(ctx, s.newC, ms)
	}
	if err := applyMutations(ctx, s.newC, rest); spanner.ErrCode(err) != codes.NotFound {
		return err
	}
	// Old's rows first, outside new's transaction (the emulator, one
	// process for both databases, holds a strong read of old while a
	// read-write transaction of new is open, and the two would wait for
	// each other).
	inOld := map[int]bool{}
	for i, g := range gs {
		switch _, err := s.oldC.Single().ReadRow(ctx, g.oldTable, g.oldKey, []string{g.oldKeyCol}); {
		case err == nil:
			inOld[i] = true
		case !errors.Is(err, spanner.ErrRowNotFound):
			return err
		}
	}
	_, err := spannerdb.Transact(ctx, s.newC, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		out := make([]*spanner.Mutation, 0, len(ms))
		for i, m := range ms {
			if g, ok := gs[i]; ok {
				need, err := g.holds(ctx, txn, s.o.Migration, inOld[i])
				if err != nil {
					return err
				}
				if !need {
					continue
				}
			}
			out = append(out, m)
		}
		return txn.BufferWrite(out)
	})
	return err
}

// holds reports whether g's ancestor row is missing from new and its
// touched mark of migration says new is behind, read in txn, and old
// holds the row (inOld, read strongly in old's database before txn
// began). That read need not be in txn: Behind = "new" is set only by a
// call that wrote old first, which no call does in read_new, and
// cleared by every call that writes new; so if txn finds it set, no call
// has changed the record since the cohort entered read_new, and old's
// row, read meanwhile, is its latest state.
func (g placeholderGuard) holds(ctx context.Context, txn *spanner.ReadWriteTransaction, migration string, inOld bool) (bool, error) {
	switch _, err := txn.ReadRow(ctx, g.table, g.key, []string{g.keyCol}); {
	case err == nil:
		return false, nil // there: the placeholder would change nothing
	case !errors.Is(err, spanner.ErrRowNotFound):
		return false, err
	}
	row, err := txn.ReadRow(ctx, phases.SpannerTouchedTable, spanner.Key{migration, g.mark}, []string{"Behind"})
	switch {
	case errors.Is(err, spanner.ErrRowNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	var behind spanner.NullString
	if err := row.Columns(&behind); err != nil {
		return false, err
	}
	// Not in old either: deleted there, and new missed the delete.
	return behind.Valid && behind.StringVal == newSide.String() && inOld, nil
}

// Delete deletes the record with key's key fields (old key columns)
// where its cohort's phase says; between dual_write and read_new the
// new side marks the key touched (deleted), so that a backfill that read
// the record before the delete does not bring it back.
func (s *Spanner) Delete(ctx context.Context, key record.Record) error {
	c, err := s.route(ctx, &key)
	if err != nil {
		return err
	}
	defer c.cancel()
	s.stats.call("delete", c.phase)
	return s.apply(c, "delete", c.route.deletes, func(sd side) ([]*spanner.Mutation, error) { return s.deleteMutations(c, sd, &key) })
}

// deleteMutations are the mutations deleting key's record on side sd.
func (s *Spanner) deleteMutations(c *call, sd side, key *record.Record) ([]*spanner.Mutation, error) {
	t, err := s.table(key)
	if err != nil {
		return nil, err
	}
	ok, err := spannerdb.SpannerKey(key, t.old)
	if err != nil {
		return nil, fmt.Errorf("cutover: %w", err)
	}
	if sd == oldSide {
		return append(subtreeDeletes(t, ok, false), spanner.Delete(t.old.Name, ok)), nil
	}
	nr, err := s.newRecord(key)
	if err != nil {
		return nil, err
	}
	nk, err := spannerdb.SpannerKey(nr, t.new)
	if err != nil {
		return nil, fmt.Errorf("cutover: %w", err)
	}
	muts := append(subtreeDeletes(t, nk, true), spanner.Delete(t.new.Name, nk))
	if c.route.touch {
		var under []string
		if len(t.children) > 0 {
			if under, err = s.subtreeMarks(c.ctx, t, ok, nk); err != nil {
				return nil, err
			}
		}
		tm, err := s.touch(c, t, nr, under, true)
		if err != nil {
			return nil, err
		}
		muts = append(muts, tm...)
	}
	return muts, nil
}

// touch marks nr's key (a row of t) touched by the application now (its
// commit time), and the keys under, the rows interleaved under it that a
// delete deletes with it. The call's marks are its keys, its own first.
func (s *Spanner) touch(c *call, t *spannerTable, nr *record.Record, under []string, deleted bool) ([]*spanner.Mutation, error) {
	tk, err := t.touchedKey(nr)
	if err != nil {
		return nil, err
	}
	keys := append([]string{tk}, under...)
	return spannerTouches(s.o.Migration, c, keys, deleted), nil
}

// spannerTouches are the touched marks of keys by the call c (c.mark
// becomes keys): written or deleted now (the commit's time), Behind
// cleared.
func spannerTouches(migration string, c *call, keys []string, deleted bool) []*spanner.Mutation {
	c.mark = keys
	muts := make([]*spanner.Mutation, len(keys))
	for i, k := range keys {
		muts[i] = spanner.InsertOrUpdate(phases.SpannerTouchedTable, spannerTouchColumns, []any{migration, k, int64(c.cohort), deleted, spanner.CommitTimestamp, c.op, spanner.NullString{}})
	}
	return muts
}

// spannerTouchColumns are the columns a touch writes: Behind is cleared,
// as the call's write reaches the authoritative store first.
var spannerTouchColumns = []string{"Migration", "NewKey", "Cohort", "Deleted", "TouchedAt", "Op", "Behind"}

func (s *Spanner) client(sd side) *spanner.Client {
	if sd == newSide {
		return s.newC
	}
	return s.oldC
}

// apply commits the call's mutations on sides (applyCall).
func (s *Spanner) apply(c *call, op string, sides []side, build func(side) ([]*spanner.Mutation, error)) error {
	return applyCall(&s.router, c, op, sides, s.sides(build))
}

// sides is applyCall's view of the two databases, with build.
func (s *Spanner) sides(build func(side) ([]*spanner.Mutation, error)) store[*spanner.Mutation] {
	st := store[*spanner.Mutation]{
		build: build,
		commit: func(ctx context.Context, sd side, ms []*spanner.Mutation) error {
			if sd == newSide {
				return s.commitNew(ctx, ms)
			}
			return applyMutations(ctx, s.client(sd), ms)
		},
		repair:    s.repairMutation,
		logRepair: s.logRepair,
	}
	if s.same {
		st.atomic = func(ctx context.Context, ms []*spanner.Mutation) error { return applyMutations(ctx, s.newC, ms) }
	}
	return st
}

// applyMutations commits ms in one read-write transaction (replay
// protected: a retried commit is not applied twice).
func applyMutations(ctx context.Context, c *spanner.Client, ms []*spanner.Mutation) error {
	_, err := spannerdb.Transact(ctx, c, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return txn.BufferWrite(ms)
	})
	return err
}

// repairMutation is the repair log's entry for op on the call's record,
// which did not reach side missed because of cause.
func (s *Spanner) repairMutation(c *call, op string, missed side, cause error) *spanner.Mutation {
	return spannerRepairEntry(s.o.Migration, c, op, missed, cause)
}

// spannerRepairEntry is the repair log's entry of migration for op on
// the call's record, which did not reach side missed because of cause.
func spannerRepairEntry(migration string, c *call, op string, missed side, cause error) *spanner.Mutation {
	return spanner.Insert(phases.SpannerRepairTable, []string{"Migration", "Cohort", "Id", "Op", "OldKey", "Missed", "Reason", "LoggedAt"},
		[]any{migration, int64(c.cohort), uuid.NewString(), op, c.key, missed.String(), cause.Error(), spanner.CommitTimestamp})
}

// logRepair implements store.logRepair.
func (s *Spanner) logRepair(c *call, op string, missed side, cause error, first bool) error {
	return spannerLogRepair(s.newC, s.o.Migration, c, op, missed, cause, first)
}

// spannerLogRepair is store.logRepair with the repair log and the
// touched marks of migration in newC's database: c.mark holds the keys
// of the call's marks.
func spannerLogRepair(newC *spanner.Client, migration string, c *call, op string, missed side, cause error, first bool) error {
	_, err := spannerdb.Transact(c.ctx, newC, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		var muts []*spanner.Mutation
		keys, _ := c.mark.([]string)
		if len(keys) == 0 && missed == oldSide && first {
			return nil
		}
		for i, tk := range keys {
			row, err := txn.ReadRow(ctx, phases.SpannerTouchedTable, spanner.Key{migration, tk}, []string{"Op"})
			exists := err == nil
			if err != nil && !errors.Is(err, spanner.ErrRowNotFound) {
				return err
			}
			var markOp spanner.NullString
			if exists {
				if err := row.Columns(&markOp); err != nil {
					return err
				}
			}
			ours := exists && markOp.Valid && markOp.StringVal == c.op
			switch {
			case missed == oldSide && !ours && first && i == 0:
				return nil // new did not take the call's write: nothing to repair
			case missed == oldSide && !ours:
				// A later write of new is the latest, and goes to old
				// after it: old is not behind for it.
			case missed == oldSide:
				muts = append(muts, spanner.Update(phases.SpannerTouchedTable, []string{"Migration", "NewKey", "Behind"}, []any{migration, tk, oldSide.String()}))
			case exists:
				// Touched now: a backfill or repair that read old
				// before old took the write must not write new (nor
				// clear Behind).
				muts = append(muts, spanner.Update(phases.SpannerTouchedTable, []string{"Migration", "NewKey", "Behind", "TouchedAt"}, []any{migration, tk, newSide.String(), spanner.CommitTimestamp}))
			default:
				muts = append(muts, spanner.Insert(phases.SpannerTouchedTable, spannerTouchColumns, []any{migration, tk, int64(c.cohort), false, spanner.CommitTimestamp, spanner.NullString{}, newSide.String()}))
			}
		}
		return txn.BufferWrite(append(muts, spannerRepairEntry(migration, c, op, missed, cause)))
	})
	return err
}

// markState is a key's touched mark as a read finds it.
type markState struct {
	exists, deleted bool
	behind          string // "old", "new" or ""
}

// readMark reads the touched mark of the call's new key (nk: the new
// record of key) through r, in one read with the marks of the rows it is
// interleaved under, which stand for it where its own says nothing (see
// the package doc, "Interleaved tables"): a delete of an ancestor that
// new or old missed, or that deleted it.
func (s *Spanner) readMark(ctx context.Context, r rowReader, c *call, key, nk *record.Record) (markState, error) {
	t, err := s.table(key)
	if err != nil {
		return markState{}, err
	}
	tk, err := t.touchedKey(nk)
	if err != nil {
		return markState{}, err
	}
	keys := []string{tk}
	for _, a := range t.ancestors() {
		ak, err := a.touchedKey(nk)
		if err != nil {
			return markState{}, err
		}
		keys = append(keys, ak)
	}
	got, err := readSpannerMarks(ctx, r, s.o.Migration, keys)
	if err != nil {
		return markState{}, fmt.Errorf("cutover: reading the touched mark of %s: %w", c.key, err)
	}
	m := got[tk]
	for _, k := range keys[1:] {
		a, ok := got[k]
		if !ok {
			continue
		}
		m.exists = true
		m.deleted = m.deleted || a.deleted
		if m.behind == "" {
			m.behind = a.behind
		}
	}
	return m, nil
}

// readSpannerMarks reads the touched marks of migration's keys through
// r, by key (a key without a mark is absent).
func readSpannerMarks(ctx context.Context, r rowReader, migration string, keys []string) (map[string]markState, error) {
	ks := make([]spanner.KeySet, len(keys))
	for i, k := range keys {
		ks[i] = spanner.Key{migration, k}
	}
	got := map[string]markState{}
	it := r.Read(ctx, phases.SpannerTouchedTable, spanner.KeySets(ks...), []string{"NewKey", "Deleted", "Behind"})
	err := it.Do(func(row *spanner.Row) error {
		var k string
		var behind spanner.NullString
		m := markState{exists: true}
		if err := row.Columns(&k, &m.deleted, &behind); err != nil {
			return err
		}
		m.behind = behind.StringVal
		got[k] = m
		return nil
	})
	return got, err
}

// Read reads the record with key's key fields (old key columns) where its
// cohort's phase says, and returns it as a row of the old table; found is
// false when the authoritative store has none.
func (s *Spanner) Read(ctx context.Context, key record.Record) (rec record.Record, found bool, err error) {
	c, err := s.route(ctx, &key)
	if err != nil {
		return record.Record{}, false, err
	}
	defer c.cancel()
	s.stats.call("read", c.phase)
	got, err := s.read(c, &key)
	if err != nil || got == nil {
		return record.Record{}, false, err
	}
	return *got, true, nil
}

// read is Read's routing (see the phases package doc, "Missed writes").
func (s *Spanner) read(c *call, key *record.Record) (*record.Record, error) {
	r := c.route
	switch {
	case r.shadow && s.same:
		s.stats.call("shadow_read", c.phase)
		var oldRec, newRec *record.Record
		err := spannerdb.ReadOnly(c.ctx, s.newC, func(ctx context.Context, txn *spanner.ReadOnlyTransaction) (err error) {
			if oldRec, err = s.readOld(ctx, txn, key); err != nil {
				return err
			}
			newRec, err = s.readNew(ctx, txn, key)
			return err
		})
		if err != nil {
			return nil, err
		}
		s.shadowCompare(c, oldRec, newRec, "", nil)
		return oldRec, nil
	case r.shadow:
		// The mark and new at the mark's snapshot, then old (the mark
		// first: see the package doc, "Missed writes").
		s.stats.call("shadow_read", c.phase)
		nk, err := s.newRecord(key)
		if err != nil {
			return nil, err
		}
		newRec, m, err := s.readNewMarked(c, key, nk)
		if err != nil {
			return nil, err
		}
		oldRec, err := s.readOld(c.ctx, s.oldC.Single(), key)
		if err != nil {
			return nil, err
		}
		s.shadowCompare(c, oldRec, newRec, m.behind, func() (*record.Record, *record.Record, string, error) {
			newRec, m, err := s.readNewMarked(c, key, nk)
			if err != nil {
				return nil, nil, "", err
			}
			oldRec, err := s.readOld(c.ctx, s.oldC.Single(), key)
			return oldRec, newRec, m.behind, err
		})
		if m.behind == oldSide.String() {
			s.stats.redirect()
			return newRec, nil
		}
		return oldRec, nil
	case r.read == newSide && !r.touch:
		// new_only and done: new is the only store; the touched marks
		// are no longer kept (and may be stale).
		return s.readNew(c.ctx, s.newC.Single(), key)
	case r.read == newSide && s.same:
		// One snapshot of the one database: old and new were written
		// in one transaction each time.
		var got *record.Record
		err := spannerdb.ReadOnly(c.ctx, s.newC, func(ctx context.Context, txn *spanner.ReadOnlyTransaction) (err error) {
			if got, err = s.readNew(ctx, txn, key); err != nil || got != nil || !r.fallback {
				return err
			}
			nk, err := s.newRecord(key)
			if err != nil {
				return err
			}
			m, err := s.readMark(ctx, txn, c, key, nk)
			if err != nil || m.exists && m.deleted {
				return err
			}
			s.stats.fallback()
			got, err = s.readOld(ctx, txn, key)
			return err
		})
		return got, err
	case r.read == newSide:
		nk, err := s.newRecord(key)
		if err != nil {
			return nil, err
		}
		// The mark, then new at the mark's timestamp: one snapshot of
		// new's database in two single-use reads.
		ro := s.newC.Single()
		m, err := s.readMark(c.ctx, ro, c, key, nk)
		if err != nil {
			return nil, err
		}
		if m.behind == newSide.String() && !r.oldStale {
			// A write old took and new missed while old was
			// authoritative: old holds it until a repair.
			s.stats.redirect()
			return s.readOld(c.ctx, s.oldC.Single(), key)
		}
		ts, err := ro.Timestamp()
		if err != nil {
			return nil, err
		}
		got, err := s.readNew(c.ctx, s.newC.Single().WithTimestampBound(spanner.ReadTimestamp(ts)), key)
		if err != nil || got != nil || !r.fallback || m.exists && (m.deleted || m.behind == oldSide.String()) {
			return got, err
		}
		s.stats.fallback()
		return s.readOld(c.ctx, s.oldC.Single(), key)
	case r.consult && !s.same:
		nk, err := s.newRecord(key)
		if err != nil {
			return nil, err
		}
		// The mark, then old unless the mark says old is behind (the
		// mark first: see the package doc, "Missed writes").
		ro := s.newC.Single()
		m, err := s.readMark(c.ctx, ro, c, key, nk)
		if err != nil {
			return nil, err
		}
		if m.behind != oldSide.String() {
			return s.readOld(c.ctx, s.oldC.Single(), key)
		}
		// A write new took and old missed while new was authoritative
		// (before a rollback): new holds it until a repair.
		s.stats.redirect()
		ts, err := ro.Timestamp()
		if err != nil {
			return nil, err
		}
		return s.readNew(c.ctx, s.newC.Single().WithTimestampBound(spanner.ReadTimestamp(ts)), key)
	}
	return s.readOld(c.ctx, s.oldC.Single(), key)
}

// readNewMarked reads the mark of key's new record nk, then the record at
// the mark's timestamp: one snapshot of new's database in two single-use
// reads.
func (s *Spanner) readNewMarked(c *call, key, nk *record.Record) (*record.Record, markState, error) {
	ro := s.newC.Single()
	m, err := s.readMark(c.ctx, ro, c, key, nk)
	if err != nil {
		return nil, markState{}, err
	}
	ts, err := ro.Timestamp()
	if err != nil {
		return nil, markState{}, err
	}
	got, err := s.readNew(c.ctx, s.newC.Single().WithTimestampBound(spanner.ReadTimestamp(ts)), key)
	return got, m, err
}

type rowReader interface {
	ReadRow(ctx context.Context, table string, key spanner.Key, columns []string) (*spanner.Row, error)
	Read(ctx context.Context, table string, keys spanner.KeySet, columns []string) *spanner.RowIterator
}

func (s *Spanner) readOld(ctx context.Context, r rowReader, key *record.Record) (*record.Record, error) {
	t, err := s.table(key)
	if err != nil {
		return nil, err
	}
	k, err := spannerdb.SpannerKey(key, t.old)
	if err != nil {
		return nil, fmt.Errorf("cutover: %w", err)
	}
	row, err := r.ReadRow(ctx, t.old.Name, k, t.oldCols)
	if errors.Is(err, spanner.ErrRowNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cutover: reading %s from %s: %w", k, t.old.Name, err)
	}
	rec, err := spannerdb.RowToRecord(row, t.old)
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// readNew reads the new record of key and returns it as a row of the old
// table: the old table's columns, the key as asked.
func (s *Spanner) readNew(ctx context.Context, r rowReader, key *record.Record) (*record.Record, error) {
	t, err := s.table(key)
	if err != nil {
		return nil, err
	}
	nk, err := s.newRecord(key)
	if err != nil {
		return nil, err
	}
	k, err := spannerdb.SpannerKey(nk, t.new)
	if err != nil {
		return nil, fmt.Errorf("cutover: %w", err)
	}
	row, err := r.ReadRow(ctx, t.new.Name, k, t.newCols)
	if errors.Is(err, spanner.ErrRowNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cutover: reading %s from %s: %w", k, t.new.Name, err)
	}
	nr, err := spannerdb.RowToRecord(row, t.new)
	if err != nil {
		return nil, err
	}
	out := record.Record{Table: t.old.Name}
	old, err := spannerdb.Normalize(key, t.old)
	if err != nil {
		return nil, err
	}
	for _, col := range t.oldCols {
		from := &nr
		if t.oldKeyCols[col] {
			from = &old
		}
		if v, ok := from.Get(col); ok {
			out.Fields = append(out.Fields, record.Field{Name: col, Value: v})
		}
	}
	return &out, nil
}

// BackfillRow is a backfill's write of rec (a row of the old table, as
// the backfill read it, after its cohort's dual_write hold): one
// transaction in the new database that writes rec's new record unless
// the application touched that key (wrote or deleted it) since the cohort
// entered dual_write. So a backfill never overwrites a value the
// application dual-wrote after the backfill read the old one, nor brings
// back a record the application deleted meanwhile, while it does replace
// what new holds from an earlier dual_write rolled back since (see
// package phases, "Why no acknowledged write is lost"). The cohort must
// be in dual_write. It reports whether it
// wrote.
func (s *Spanner) BackfillRow(ctx context.Context, rec record.Record) (bool, error) {
	c, err := s.route(ctx, &rec)
	if err != nil {
		return false, err
	}
	defer c.cancel()
	if err := s.backfillable(c); err != nil {
		return false, err
	}
	t, err := s.table(&rec)
	if err != nil {
		return false, err
	}
	nr, err := s.newRecord(&rec)
	if err != nil {
		return false, err
	}
	m, err := spannerdb.MutationFor(nr, t.new, storewrite.ModeUpsert)
	if err != nil {
		return false, fmt.Errorf("cutover: %s: %w", rec.Describe(), err)
	}
	tk, err := t.touchedKey(nr)
	if err != nil {
		return false, err
	}
	wrote, err := spannerBackfill(ctx, s.newC, s.o.Migration, tk, m, c.since)
	if err != nil {
		return false, fmt.Errorf("cutover: backfilling %s: %w", rec.Describe(), err)
	}
	return wrote, nil
}

// spannerBackfill applies m, a backfill's write, in one transaction of
// newC's database unless the touched mark tk of migration says the
// application wrote or deleted the row after since (its cohort entered
// dual_write); it reports whether it wrote.
func spannerBackfill(ctx context.Context, newC *spanner.Client, migration, tk string, m *spanner.Mutation, since time.Time) (bool, error) {
	var wrote bool
	_, err := spannerdb.Transact(ctx, newC, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		wrote = false
		row, err := txn.ReadRow(ctx, phases.SpannerTouchedTable, spanner.Key{migration, tk}, []string{"TouchedAt"})
		switch {
		case err == nil:
			var at time.Time
			if err := row.Columns(&at); err != nil {
				return err
			}
			if at.After(since) {
				return nil // the application's write or delete is newer
			}
		case !errors.Is(err, spanner.ErrRowNotFound):
			return err
		}
		wrote = true
		return txn.BufferWrite([]*spanner.Mutation{m})
	})
	return wrote, err
}

// BufferWrite adds rec's write, routed by its cohort's phase, to the
// application's own read-write transaction txn: old and new must share
// the transaction's database (for old and new apart there is no such
// transaction; use Write). The transaction should commit promptly: the
// phase it was routed by holds for the cache TTL from its read.
func (s *Spanner) BufferWrite(ctx context.Context, txn *spanner.ReadWriteTransaction, rec record.Record) error {
	c, err := s.route(ctx, &rec)
	if err != nil {
		return err
	}
	defer c.cancel()
	s.stats.call("write", c.phase)
	return s.buffer(c, txn, c.route.writes, func(sd side) ([]*spanner.Mutation, error) { return s.writeMutations(c, sd, &rec) })
}

// BufferDelete adds the delete of key's record to txn, as BufferWrite.
func (s *Spanner) BufferDelete(ctx context.Context, txn *spanner.ReadWriteTransaction, key record.Record) error {
	c, err := s.route(ctx, &key)
	if err != nil {
		return err
	}
	defer c.cancel()
	s.stats.call("delete", c.phase)
	return s.buffer(c, txn, c.route.deletes, func(sd side) ([]*spanner.Mutation, error) { return s.deleteMutations(c, sd, &key) })
}

func (s *Spanner) buffer(c *call, txn *spanner.ReadWriteTransaction, sides []side, build func(side) ([]*spanner.Mutation, error)) error {
	// Refused apart whatever the phase: txn is of old's database, where
	// new's mutations do not belong, and a call that worked in old would
	// break at dual_write.
	if !s.same {
		return fmt.Errorf("cutover: %s: old and new are in different databases, so no one transaction writes both; use Write", c.key)
	}
	var all []*spanner.Mutation
	for _, sd := range sides {
		ms, err := build(sd)
		if err != nil {
			return err
		}
		all = append(all, ms...)
	}
	return txn.BufferWrite(all)
}
