package cutover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/google/uuid"

	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
	"github.com/rekeyio/rekey/rewrite"
)

// Datastore routes an application's reads, writes and deletes of one kind
// (the migration's source, in old keys) to the old and the new entities by
// the phase of each entity's cohort, as Spanner does for rows. Times are
// the instance's clock (the Datastore client returns no commit times):
// the touched marks' and the repair log's; Skew covers the clocks of the
// machines involved. It is safe for concurrent use.
type Datastore struct {
	router
	oldC, newC *datastore.Client
	ownNew     bool
	same       bool // one database: dual writes are one transaction
	namespace  string
	kept       string // keep_original_key: the new entities' property holding the old key
	rk         *rekeyer.Rekeyer
	store      phases.DatastoreStore
}

// OpenDatastore is NewDatastore on the migration config file at path.
func OpenDatastore(ctx context.Context, client *datastore.Client, path string, o Options) (*Datastore, error) {
	return openFile(ctx, path, func(job *migration.Job) (*Datastore, error) { return NewDatastore(ctx, client, job, o) })
}

// OpenDatastoreConfig is NewDatastore on a migration's config given as a
// Go value (see OpenSpannerConfig).
func OpenDatastoreConfig(ctx context.Context, client *datastore.Client, cfg config.Config, o Options) (*Datastore, error) {
	return openValue(ctx, cfg, func(job *migration.Job) (*Datastore, error) { return NewDatastore(ctx, client, job, o) })
}

// NewDatastore returns the library for job (a Datastore → Datastore
// migration), reading and writing old entities through client (the
// application's client of the source database) and new ones through a
// client of the target database (client itself when it is the same; else
// Options.NewDatastoreClient, or one it opens and Close closes). The
// phase store, the repair log and the touched marks are in the target
// namespace.
func NewDatastore(ctx context.Context, client *datastore.Client, job *migration.Job, o Options) (*Datastore, error) {
	cfg := job.Config
	if cfg.Source.Type != config.TypeDatastore || cfg.Target.Type != config.TypeDatastore {
		return nil, fmt.Errorf("cutover.NewDatastore: the migration goes from %s to %s; want datastore to datastore", cfg.Source.Type, cfg.Target.Type)
	}
	if props := job.Spec.UninvertibleReferencesTo(); len(props) > 0 {
		return nil, fmt.Errorf("cutover.NewDatastore: references_to %s: a read of new gives them back in old keys, which needs a strategy with an inverse", strings.Join(props, ", "))
	}
	if st, err := rewrite.New(job.Spec.Strategy); err == nil && len(job.Spec.References) > 0 && !st.Info().Invertible {
		return nil, fmt.Errorf("cutover.NewDatastore: references need a strategy with an inverse (a read of new gives them back in old keys); %s has none", st.Info().Name)
	}
	o, err := optionsFor(job, o)
	if err != nil {
		return nil, fmt.Errorf("cutover.NewDatastore: %w", err)
	}
	rk, err := job.Spec.Build()
	if err != nil {
		return nil, err
	}
	d := &Datastore{router: router{o: o, stats: newStats(o.Migration)}, oldC: client, rk: rk, namespace: cfg.Target.Namespace, kept: job.Spec.KeepOriginalKey}
	if cfg.Target.Project == cfg.Source.Project && cfg.Target.Database == cfg.Source.Database {
		d.newC, d.same = client, true
	} else if o.NewDatastoreClient != nil {
		d.newC = o.NewDatastoreClient
	} else if d.newC, err = datastoredb.Client(ctx, cfg.Target.Project, cfg.Target.Database); err != nil {
		return nil, err
	} else {
		d.ownNew = true
	}
	d.store = phases.DatastoreStore{Client: d.newC, Namespace: d.namespace}
	if d.cache, err = newPhaseCache(ctx, d.store, o.Migration, o.ttl(), d.stats.refresh); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// optionsFor checks o and fills its defaults from job's config.
func optionsFor(job *migration.Job, o Options) (Options, error) {
	if o.Migration == "" {
		return o, errors.New("Options.Migration is required")
	}
	st, err := rewrite.New(job.Spec.Strategy)
	if err != nil {
		return o, err
	}
	if !st.Info().Deterministic {
		return o, fmt.Errorf("strategy %s does not give the same new key for the same old key, so the application's calls cannot find the new record", st.Info().Name)
	}
	u, ok, err := job.Config.Cohort.UserSpec()
	switch {
	case err != nil:
		return o, fmt.Errorf("cohort.user: %w", err)
	case !ok:
		return o, errors.New("no user id: set cohort.user in the migration's config (the backfill and the library must find a record's user in the same place)")
	}
	o.user = u
	if o.Buckets == 0 {
		o.Buckets = job.Config.Cohort.Buckets
	}
	if o.CacheTTL == 0 {
		o.CacheTTL = job.Config.Cohort.CacheTTL
	}
	if o.Skew == 0 {
		o.Skew = job.Config.Cohort.Skew
	}
	return o, nil
}

// Close stops the phase refresh and closes the client the library opened.
func (d *Datastore) Close() {
	if d.cache != nil {
		d.cache.close()
	}
	if d.ownNew && d.newC != nil {
		d.newC.Close()
	}
}

// newRecord is rec rewritten: its new key and properties.
func (d *Datastore) newRecord(rec *record.Record) (*record.Record, error) {
	nr := *rec
	k := rec.Key.Clone()
	nr.Key = &k
	nr.Fields = append([]record.Field(nil), rec.Fields...)
	if err := d.rk.Rewrite(&nr); err != nil {
		return nil, fmt.Errorf("cutover: rewriting %s: %w", rec.Key, err)
	}
	return &nr, nil
}

// dsMut is one Datastore mutation with its key, for a transaction or a
// batch.
type dsMut struct {
	key    *datastore.Key
	put    any // nil: delete
	delete bool
}

func (d *Datastore) client(sd side) *datastore.Client {
	if sd == newSide {
		return d.newC
	}
	return d.oldC
}

func toMutations(ms []dsMut) []*datastore.Mutation {
	out := make([]*datastore.Mutation, len(ms))
	for i, m := range ms {
		if m.delete {
			out[i] = datastore.NewDelete(m.key)
		} else {
			out[i] = datastore.NewUpsert(m.key, m.put)
		}
	}
	return out
}

func commitDS(ctx context.Context, c *datastore.Client, ms []dsMut) error {
	_, err := c.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
		_, err := tx.Mutate(toMutations(ms)...)
		return err
	})
	return err
}

func (d *Datastore) touchedKey(nr *record.Record) *datastore.Key {
	return phases.DatastoreMarkKey(d.o.Migration, d.namespace, *nr.Key)
}

// touch marks nr's key touched by the call now (Behind cleared: the
// call writes the authoritative store first).
func (d *Datastore) touch(c *call, nr *record.Record, deleted bool) dsMut {
	k := d.touchedKey(nr)
	c.mark = k
	return dsMut{key: k, put: &phases.DatastoreMark{Migration: d.o.Migration, Cohort: int64(c.cohort), Deleted: deleted, TouchedAt: time.Now().UTC(), Op: c.op}}
}

// Write writes rec (an entity of the old kind, in old keys) where its
// cohort's phase says (see the package doc).
func (d *Datastore) Write(ctx context.Context, rec record.Record) error {
	return d.routed(ctx, &rec, "write", func(c *call) error {
		return d.apply(c, "write", c.route.writes, d.writeMuts(c, &rec))
	})
}

// WriteBatch writes recs as Write writes each, in as few commits as
// their cohorts' phases allow (see Spanner.WriteBatch), at most
// DatastoreBatch records a commit (Datastore takes 500 mutations in one:
// a record needs up to three).
func (d *Datastore) WriteBatch(ctx context.Context, recs []record.Record) []error {
	return inBatches(recs, DatastoreBatch, func(recs []record.Record) []error {
		return writeBatch(ctx, &d.router, recs, d.routeEntity, func(c *call, rec *record.Record) store[dsMut] {
			return d.sides(d.writeMuts(c, rec))
		})
	})
}

// DatastoreBatch is the most records a commit of WriteBatch holds.
const DatastoreBatch = 160

// inBatches runs f on recs n at a time and returns its errors in order.
func inBatches(recs []record.Record, n int, f func([]record.Record) []error) []error {
	if len(recs) <= n {
		return f(recs)
	}
	var errs []error
	for i := 0; i < len(recs); i += n {
		errs = append(errs, f(recs[i:min(i+n, len(recs))])...)
	}
	return errs
}

// writeMuts builds the mutations writing rec on a side.
func (d *Datastore) writeMuts(c *call, rec *record.Record) func(side) ([]dsMut, error) {
	return func(sd side) ([]dsMut, error) {
		r := rec
		if sd == newSide {
			var err error
			if r, err = d.newRecord(rec); err != nil {
				return nil, err
			}
		}
		k, props, err := datastoredb.ToEntity(r)
		if err != nil {
			return nil, fmt.Errorf("cutover: %s on %s: %w", c.key, sd, err)
		}
		pl := props
		ms := []dsMut{{key: k, put: &pl}}
		if sd == newSide && c.route.touch {
			ms = append(ms, d.touch(c, r, false))
		}
		return ms, nil
	}
}

// Delete deletes the entity with key's key where its cohort's phase says
// (marking the new key touched while a backfill may copy the cohort).
func (d *Datastore) Delete(ctx context.Context, key record.Record) error {
	return d.routed(ctx, &key, "delete", func(c *call) error {
		return d.apply(c, "delete", c.route.deletes, d.deleteMuts(c, &key))
	})
}

// deleteMuts builds the mutations deleting key's entity on a side.
func (d *Datastore) deleteMuts(c *call, key *record.Record) func(side) ([]dsMut, error) {
	return func(sd side) ([]dsMut, error) {
		r := key
		if sd == newSide {
			var err error
			if r, err = d.newRecord(key); err != nil {
				return nil, err
			}
		}
		ms := []dsMut{{key: datastoredb.KeyToDatastore(*r.Key), delete: true}}
		if sd == newSide && c.route.touch {
			ms = append(ms, d.touch(c, r, true))
		}
		return ms, nil
	}
}

// WriteInTransaction adds rec's write, routed by its cohort's phase, to
// the application's own transaction tx (in place of the application's
// own Put of rec: a transaction takes one mutation per key). Old and new
// must share tx's database (for old and new apart no one transaction
// writes both; use Write). The transaction should commit promptly: the
// phase it was routed by holds for the cache TTL from its read.
func (d *Datastore) WriteInTransaction(ctx context.Context, tx *datastore.Transaction, rec record.Record) error {
	return d.routed(ctx, &rec, "write", func(c *call) error {
		return d.inTransaction(c, tx, c.route.writes, d.writeMuts(c, &rec))
	})
}

// DeleteInTransaction adds the delete of key's entity to tx, as
// WriteInTransaction.
func (d *Datastore) DeleteInTransaction(ctx context.Context, tx *datastore.Transaction, key record.Record) error {
	return d.routed(ctx, &key, "delete", func(c *call) error {
		return d.inTransaction(c, tx, c.route.deletes, d.deleteMuts(c, &key))
	})
}

func (d *Datastore) inTransaction(c *call, tx *datastore.Transaction, sides []side, build func(side) ([]dsMut, error)) error {
	if !d.same {
		return fmt.Errorf("cutover: %s: old and new are in different databases, so no one transaction writes both; use Write", c.key)
	}
	var all []dsMut
	for _, sd := range sides {
		ms, err := build(sd)
		if err != nil {
			return err
		}
		all = append(all, ms...)
	}
	if _, err := tx.Mutate(toMutations(all)...); err != nil {
		return fmt.Errorf("cutover: %s: %w", c.key, err)
	}
	return nil
}

func (d *Datastore) apply(c *call, op string, sides []side, build func(side) ([]dsMut, error)) error {
	return applyCall(&d.router, c, op, sides, d.sides(build))
}

// sides is applyCall's view of the two databases, with build.
func (d *Datastore) sides(build func(side) ([]dsMut, error)) store[dsMut] {
	st := store[dsMut]{
		build:     build,
		commit:    func(ctx context.Context, sd side, ms []dsMut) error { return commitDS(ctx, d.client(sd), ms) },
		repair:    d.repairMutation,
		logRepair: d.logRepair,
	}
	if d.same {
		st.atomic = func(ctx context.Context, ms []dsMut) error { return commitDS(ctx, d.newC, ms) }
	}
	return st
}

func (d *Datastore) repairMutation(c *call, op string, missed side, cause error) dsMut {
	k := datastore.NameKey(phases.DatastoreRepairKind, d.o.Migration+"|"+uuid.NewString(), nil)
	k.Namespace = d.namespace
	return dsMut{key: k, put: &phases.DatastoreRepair{Migration: d.o.Migration, Cohort: int64(c.cohort), Op: op, OldKey: c.key, Missed: missed.String(), Reason: cause.Error(), LoggedAt: time.Now().UTC()}}
}

// logRepair implements store.logRepair, as Spanner.logRepair.
func (d *Datastore) logRepair(c *call, op string, missed side, cause error, first bool) error {
	mk, _ := c.mark.(*datastore.Key)
	if mk == nil && missed == oldSide && first {
		return nil
	}
	entry := d.repairMutation(c, op, missed, cause)
	_, err := d.newC.RunInTransaction(c.ctx, func(tx *datastore.Transaction) error {
		if mk != nil {
			var t phases.DatastoreMark
			err := tx.Get(mk, &t)
			exists := err == nil
			if err != nil && !errors.Is(err, datastore.ErrNoSuchEntity) {
				return err
			}
			ours := exists && t.Op == c.op
			switch {
			case missed == oldSide && !ours && first:
				return errNothingToLog
			case missed == oldSide && !ours:
				// A later write of new is the latest, and goes to old
				// after it: old is not behind for it.
			case missed == oldSide:
				t.Behind = oldSide.String()
				if _, err := tx.Put(mk, &t); err != nil {
					return err
				}
			default:
				if !exists {
					t = phases.DatastoreMark{Migration: d.o.Migration, Cohort: int64(c.cohort)}
				}
				// Touched now: a backfill or repair that read old
				// before old took the write must not write new (nor
				// clear Behind).
				t.Behind, t.TouchedAt = newSide.String(), time.Now().UTC()
				if _, err := tx.Put(mk, &t); err != nil {
					return err
				}
			}
		}
		_, err := tx.Mutate(toMutations([]dsMut{entry})...)
		return err
	})
	if errors.Is(err, errNothingToLog) {
		return nil
	}
	return err
}

// errNothingToLog ends logRepair's transaction without writing: new did
// not take the call's failed first write.
var errNothingToLog = errors.New("nothing to log")

// Read reads the entity with key's key where its cohort's phase says, and
// returns it as an entity of the old kind, in old keys; found is false
// when the authoritative store has none.
func (d *Datastore) Read(ctx context.Context, key record.Record) (record.Record, bool, error) {
	c, err := d.routeEntity(ctx, &key)
	if err != nil {
		return record.Record{}, false, err
	}
	defer c.cancel()
	d.stats.call("read", c.phase)
	got, err := d.read(c, &key)
	if err != nil || got == nil {
		return record.Record{}, false, err
	}
	return *got, true, nil
}

// read is Read's routing (see the phases package doc, "Missed writes").
func (d *Datastore) read(c *call, key *record.Record) (*record.Record, error) {
	r := c.route
	switch {
	case r.shadow:
		d.stats.call("shadow_read", c.phase)
		// New with its mark, then old (the mark first: see the package
		// doc, "Missed writes").
		newRec, m, err := d.readNewMarked(c, key)
		if err != nil {
			return nil, err
		}
		oldRec, err := d.readOld(c.ctx, key)
		if err != nil {
			return nil, err
		}
		d.shadowCompare(c, oldRec, newRec, m.behind, func() (*record.Record, *record.Record, string, error) {
			newRec, m, err := d.readNewMarked(c, key)
			if err != nil {
				return nil, nil, "", err
			}
			oldRec, err := d.readOld(c.ctx, key)
			return oldRec, newRec, m.behind, err
		})
		if r.consult && !d.same && m.behind == oldSide.String() {
			d.stats.redirect()
			return newRec, nil
		}
		return oldRec, nil
	case r.read == newSide && !r.touch:
		// new_only and done: new is the only store; the touched marks
		// are no longer kept (and may be stale).
		return d.readNew(c.ctx, key)
	case r.read == newSide:
		// New's entity and its mark in one lookup.
		got, m, err := d.readNewMarked(c, key)
		if err != nil {
			return nil, err
		}
		if m.behind == newSide.String() && !r.oldStale && !d.same {
			// A write old took and new missed while old was
			// authoritative: old holds it until a repair.
			d.stats.redirect()
			return d.readOld(c.ctx, key)
		}
		if got != nil || !r.fallback || m.exists && (m.deleted || m.behind == oldSide.String()) {
			return got, nil
		}
		d.stats.fallback()
		return d.readOld(c.ctx, key)
	case r.consult && !d.same:
		// New with its mark, then old unless the mark says old is
		// behind (the mark first: see the package doc, "Missed writes").
		newRec, m, err := d.readNewMarked(c, key)
		if err != nil {
			return nil, err
		}
		if m.behind == oldSide.String() {
			// A write new took and old missed while new was
			// authoritative (before a rollback): new holds it until a
			// repair.
			d.stats.redirect()
			return newRec, nil
		}
		return d.readOld(c.ctx, key)
	}
	return d.readOld(c.ctx, key)
}

// readNewMarked reads key's new entity, under the old key, and the touched
// mark of its key, in one lookup.
func (d *Datastore) readNewMarked(c *call, key *record.Record) (*record.Record, markState, error) {
	nr, err := d.newRecord(key)
	if err != nil {
		return nil, markState{}, err
	}
	var props datastore.PropertyList
	var t phases.DatastoreMark
	nk := datastoredb.KeyToDatastore(*nr.Key)
	err = d.newC.GetMulti(c.ctx, []*datastore.Key{nk, d.touchedKey(nr)}, []any{&props, &t})
	var me datastore.MultiError
	found := [2]bool{true, true}
	switch {
	case err == nil:
	case errors.As(err, &me):
		for i, e := range me {
			if errors.Is(e, datastore.ErrNoSuchEntity) {
				found[i] = false
			} else if e != nil {
				return nil, markState{}, fmt.Errorf("cutover: reading %s in new: %w", c.key, e)
			}
		}
	default:
		return nil, markState{}, fmt.Errorf("cutover: reading %s in new: %w", c.key, err)
	}
	var m markState
	if found[1] {
		m = markState{exists: true, deleted: t.Deleted, behind: t.Behind}
	}
	if !found[0] {
		return nil, m, nil
	}
	rec, err := datastoredb.FromEntity(nk, props)
	if err != nil {
		return nil, markState{}, err
	}
	if err := d.asOld(&rec, key); err != nil {
		return nil, markState{}, err
	}
	return &rec, m, nil
}

func getEntity(ctx context.Context, c *datastore.Client, k rewrite.DatastoreKey) (*record.Record, error) {
	var props datastore.PropertyList
	err := c.Get(ctx, datastoredb.KeyToDatastore(k), &props)
	if errors.Is(err, datastore.ErrNoSuchEntity) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cutover: reading %s: %w", k, err)
	}
	rec, err := datastoredb.FromEntity(datastoredb.KeyToDatastore(k), props)
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

func (d *Datastore) readOld(ctx context.Context, key *record.Record) (*record.Record, error) {
	return getEntity(ctx, d.oldC, *key.Key)
}

// readNew reads key's new entity and returns it as the application wrote
// it (asOld).
func (d *Datastore) readNew(ctx context.Context, key *record.Record) (*record.Record, error) {
	nr, err := d.newRecord(key)
	if err != nil {
		return nil, err
	}
	got, err := getEntity(ctx, d.newC, *nr.Key)
	if got == nil || err != nil {
		return nil, err
	}
	if err := d.asOld(got, key); err != nil {
		return nil, err
	}
	return got, nil
}

// asOld turns rec, key's new entity as read, into what the application
// wrote: under the old key, without the property keep_original_key
// added, its references in old keys (Rekeyer.InvertReferences).
func (d *Datastore) asOld(rec, key *record.Record) error {
	k := key.Key.Clone()
	rec.Key, rec.Table = &k, key.Key.Path[len(key.Key.Path)-1].Kind
	if d.kept != "" {
		if i := rec.Index(d.kept); i >= 0 {
			rec.Fields = append(rec.Fields[:i:i], rec.Fields[i+1:]...)
		}
	}
	if err := d.rk.InvertReferences(rec); err != nil {
		return fmt.Errorf("cutover: reading %s: %w", key.Key, err)
	}
	return nil
}

// BackfillRow is a backfill's write of rec (an old entity as the backfill
// read it), as Spanner.BackfillRow: one transaction that writes rec's new
// entity unless the application touched that key since the cohort entered
// dual_write. It reports whether it wrote.
func (d *Datastore) BackfillRow(ctx context.Context, rec record.Record) (bool, error) {
	c, err := d.routeEntity(ctx, &rec)
	if err != nil {
		return false, err
	}
	defer c.cancel()
	if err := d.backfillable(c); err != nil {
		return false, err
	}
	nr, err := d.newRecord(&rec)
	if err != nil {
		return false, err
	}
	k, props, err := datastoredb.ToEntity(nr)
	if err != nil {
		return false, fmt.Errorf("cutover: %s: %w", c.key, err)
	}
	tk := d.touchedKey(nr)
	var wrote bool
	_, err = d.newC.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
		wrote = false
		var t phases.DatastoreMark
		switch err := tx.Get(tk, &t); {
		case err == nil:
			if t.TouchedAt.After(c.since) {
				return nil // the application's write or delete is newer
			}
		case !errors.Is(err, datastore.ErrNoSuchEntity):
			return err
		}
		wrote = true
		pl := props
		_, err := tx.Put(k, &pl)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("cutover: backfilling %s: %w", c.key, err)
	}
	return wrote, nil
}
