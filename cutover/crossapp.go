package cutover

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
)

// DatastoreSpanner routes an application's reads, writes and deletes of
// one Datastore kind (old: the migration's source, in old keys) to that
// kind and to the Spanner table that replaces it (new), by the phase of
// each entity's cohort, as Datastore and Spanner do within one store (see
// the package doc, "From Datastore to Spanner"). The phase store, the
// touched marks and the repair log are in new's database. It is safe for
// concurrent use.
type DatastoreSpanner struct {
	router
	oldC   *datastore.Client
	newC   *spanner.Client
	ownNew bool
	table  *spannerdb.Table // new's
	cols   []string
	kind   string
	rk     *rekeyer.Rekeyer
	store  phases.SpannerStore
}

// OpenDatastoreSpanner is NewDatastoreSpanner on the migration config
// file at path.
func OpenDatastoreSpanner(ctx context.Context, client *datastore.Client, path string, o Options) (*DatastoreSpanner, error) {
	return openFile(ctx, path, func(job *migration.Job) (*DatastoreSpanner, error) { return NewDatastoreSpanner(ctx, client, job, o) })
}

// OpenDatastoreSpannerConfig is NewDatastoreSpanner on a migration's
// config given as a Go value (see OpenSpannerConfig).
func OpenDatastoreSpannerConfig(ctx context.Context, client *datastore.Client, cfg config.Config, o Options) (*DatastoreSpanner, error) {
	return openValue(ctx, cfg, func(job *migration.Job) (*DatastoreSpanner, error) { return NewDatastoreSpanner(ctx, client, job, o) })
}

// NewDatastoreSpanner returns the library for job (a Datastore → Spanner
// migration of one kind without descendants or references), reading and
// writing old entities through client (the application's client of the
// source database) and new rows through Options.NewSpannerClient, or a
// client of the target database it opens and Close closes.
func NewDatastoreSpanner(ctx context.Context, client *datastore.Client, job *migration.Job, o Options) (*DatastoreSpanner, error) {
	cfg := job.Config
	if cfg.Source.Type != config.TypeDatastore || cfg.Target.Type != config.TypeSpanner {
		return nil, fmt.Errorf("cutover.NewDatastoreSpanner: the migration goes from %s to %s; want datastore to spanner", cfg.Source.Type, cfg.Target.Type)
	}
	sp := job.Spec
	switch {
	case len(sp.DescendantKinds) > 0:
		return nil, errors.New("cutover.NewDatastoreSpanner: descendant kinds into Spanner are not routed by the library yet")
	case len(sp.References) > 0 || len(sp.ReferencesTo) > 0:
		return nil, errors.New("cutover.NewDatastoreSpanner: references into Spanner are not routed by the library yet")
	case sp.KeepOriginalKey != "":
		return nil, errors.New("cutover.NewDatastoreSpanner: keep_original_key into Spanner is not routed by the library yet")
	}
	o, err := optionsFor(job, o)
	if err != nil {
		return nil, fmt.Errorf("cutover.NewDatastoreSpanner: %w", err)
	}
	sp.StrictColumns = true // new rows are read back as entities
	rk, err := sp.Build()
	if err != nil {
		return nil, err
	}
	x := &DatastoreSpanner{router: router{o: o, stats: newStats(o.Migration)}, oldC: client, rk: rk, kind: cfg.Source.Kind}
	target := spannerdb.DatabasePath(cfg.Target.Project, cfg.Target.Instance, cfg.Target.Database)
	switch nc := o.NewSpannerClient; {
	case nc != nil && nc.DatabaseName() != target:
		return nil, fmt.Errorf("cutover.NewDatastoreSpanner: Options.NewSpannerClient is a client of %s, not of the migration's target %s", nc.DatabaseName(), target)
	case nc != nil:
		x.newC = nc
	default:
		if x.newC, err = spanner.NewClient(ctx, target); err != nil {
			return nil, fmt.Errorf("cutover: client of %s: %w", target, err)
		}
		x.ownNew = true
	}
	if x.table, err = spannerdb.ReadTable(ctx, x.newC, cfg.Target.Table); err != nil {
		x.Close()
		return nil, fmt.Errorf("cutover: the new table: %w", err)
	}
	if x.table.Parent != "" {
		x.Close()
		return nil, fmt.Errorf("cutover.NewDatastoreSpanner: the new table %s is interleaved in %s; into an interleaved table is not routed yet", x.table.Name, x.table.Parent)
	}
	x.cols = x.table.ColumnNames()
	x.store = phases.SpannerStore{Client: x.newC}
	if x.cache, err = newPhaseCache(ctx, x.store, o.Migration, o.ttl(), x.stats.refresh); err != nil {
		x.Close()
		return nil, err
	}
	return x, nil
}

// Close stops the phase refresh and closes the client the library opened.
func (x *DatastoreSpanner) Close() {
	if x.cache != nil {
		x.cache.close()
	}
	if x.ownNew && x.newC != nil {
		x.newC.Close()
	}
}

// newRow is rec (an entity, or a key alone) rewritten into new's row. A
// property the row could only keep as text (a key, an embedded entity, a
// geo point) is refused (rekeyer.Options.StrictColumns): a read of new
// could not give it back.
func (x *DatastoreSpanner) newRow(rec *record.Record) (*record.Record, error) {
	nr := *rec
	k := rec.Key.Clone()
	nr.Key = &k
	nr.Fields = append([]record.Field(nil), rec.Fields...)
	if err := x.rk.Rewrite(&nr); err != nil {
		return nil, fmt.Errorf("cutover: rewriting %s: %w", rec.Key, err)
	}
	return &nr, nil
}

// markKey is the touched mark's key of new row nr.
func (x *DatastoreSpanner) markKey(nr *record.Record) (string, error) {
	k, err := spannerdb.KeyOf(nr, x.table)
	if err != nil {
		return "", fmt.Errorf("cutover: %w", err)
	}
	return phases.SpannerKeyText(x.table.Name, false, k), nil
}

// xMut is one mutation of either store: a Datastore mutation of old, a
// Spanner mutation of new.
type xMut struct {
	ds dsMut
	sp *spanner.Mutation
}

// Write writes rec (an entity of the old kind, in old keys) where its
// cohort's phase says: old, new, or both, the authoritative first (see
// the package doc).
func (x *DatastoreSpanner) Write(ctx context.Context, rec record.Record) error {
	return x.routed(ctx, &rec, "write", func(c *call) error {
		return applyCall(&x.router, c, "write", c.route.writes, x.sides(x.writeMuts(c, &rec)))
	})
}

// WriteBatch writes recs as Write writes each, in as few commits as
// their cohorts' phases allow (see Spanner.WriteBatch), at most
// DatastoreBatch records a commit.
func (x *DatastoreSpanner) WriteBatch(ctx context.Context, recs []record.Record) []error {
	return inBatches(recs, DatastoreBatch, func(recs []record.Record) []error {
		return writeBatch(ctx, &x.router, recs, x.routeEntity, func(c *call, rec *record.Record) store[xMut] {
			return x.sides(x.writeMuts(c, rec))
		})
	})
}

// Delete deletes the entity with key's key where its cohort's phase says
// (marking the new row's key touched while a backfill may copy the
// cohort).
func (x *DatastoreSpanner) Delete(ctx context.Context, key record.Record) error {
	return x.routed(ctx, &key, "delete", func(c *call) error {
		return applyCall(&x.router, c, "delete", c.route.deletes, x.sides(x.deleteMuts(c, &key)))
	})
}

// writeMuts builds the mutations writing rec on a side: old's entity, or
// new's row with its touched mark.
func (x *DatastoreSpanner) writeMuts(c *call, rec *record.Record) func(side) ([]xMut, error) {
	return func(sd side) ([]xMut, error) {
		if sd == oldSide {
			k, props, err := datastoredb.ToEntity(rec)
			if err != nil {
				return nil, fmt.Errorf("cutover: %s on old: %w", c.key, err)
			}
			pl := props
			return []xMut{{ds: dsMut{key: k, put: &pl}}}, nil
		}
		nr, err := x.newRow(rec)
		if err != nil {
			return nil, err
		}
		m, err := spannerdb.MutationFor(nr, x.table, storewrite.ModeUpsert)
		if err != nil {
			return nil, fmt.Errorf("cutover: %s in %s: %w", c.key, x.table.Name, err)
		}
		return x.withMark(c, nr, m, false)
	}
}

// deleteMuts builds the mutations deleting key's record on a side.
func (x *DatastoreSpanner) deleteMuts(c *call, key *record.Record) func(side) ([]xMut, error) {
	return func(sd side) ([]xMut, error) {
		if sd == oldSide {
			return []xMut{{ds: dsMut{key: datastoredb.KeyToDatastore(*key.Key), delete: true}}}, nil
		}
		nr, err := x.newRow(&record.Record{Key: key.Key})
		if err != nil {
			return nil, err
		}
		nk, err := spannerdb.SpannerKey(nr, x.table)
		if err != nil {
			return nil, fmt.Errorf("cutover: %w", err)
		}
		return x.withMark(c, nr, spanner.Delete(x.table.Name, nk), true)
	}
}

// withMark is new's mutation m of row nr, and its touched mark when the
// call's route touches.
func (x *DatastoreSpanner) withMark(c *call, nr *record.Record, m *spanner.Mutation, deleted bool) ([]xMut, error) {
	out := []xMut{{sp: m}}
	if !c.route.touch {
		return out, nil
	}
	tk, err := x.markKey(nr)
	if err != nil {
		return nil, err
	}
	for _, tm := range spannerTouches(x.o.Migration, c, []string{tk}, deleted) {
		out = append(out, xMut{sp: tm})
	}
	return out, nil
}

// sides is applyCall's view of the two stores, with build: never one
// transaction (two stores), the repair log in new's database.
func (x *DatastoreSpanner) sides(build func(side) ([]xMut, error)) store[xMut] {
	return store[xMut]{
		build: build,
		commit: func(ctx context.Context, sd side, ms []xMut) error {
			if sd == oldSide {
				ds := make([]dsMut, len(ms))
				for i, m := range ms {
					ds[i] = m.ds
				}
				return commitDS(ctx, x.oldC, ds)
			}
			sp := make([]*spanner.Mutation, len(ms))
			for i, m := range ms {
				sp[i] = m.sp
			}
			return applyMutations(ctx, x.newC, sp)
		},
		repair: func(c *call, op string, missed side, cause error) xMut {
			return xMut{sp: spannerRepairEntry(x.o.Migration, c, op, missed, cause)}
		},
		logRepair: func(c *call, op string, missed side, cause error, first bool) error {
			return spannerLogRepair(x.newC, x.o.Migration, c, op, missed, cause, first)
		},
	}
}

// Read reads the entity with key's key where its cohort's phase says, and
// returns it as an entity of the old kind, in old keys (from new: the
// row's columns other than its key's, NULL ones left out, as
// properties); found is false when the authoritative store has none.
func (x *DatastoreSpanner) Read(ctx context.Context, key record.Record) (record.Record, bool, error) {
	c, err := x.routeEntity(ctx, &key)
	if err != nil {
		return record.Record{}, false, err
	}
	defer c.cancel()
	x.stats.call("read", c.phase)
	got, err := x.read(c, &key)
	if err != nil || got == nil {
		return record.Record{}, false, err
	}
	return *got, true, nil
}

// read is Read's routing, Spanner's for old and new apart (see the
// phases package doc, "Missed writes").
func (x *DatastoreSpanner) read(c *call, key *record.Record) (*record.Record, error) {
	r := c.route
	readOld := func() (*record.Record, error) { return getEntity(c.ctx, x.oldC, *key.Key) }
	switch {
	case r.read == newSide && !r.touch:
		nr, err := x.newRow(&record.Record{Key: key.Key})
		if err != nil {
			return nil, err
		}
		return x.readNew(c.ctx, x.newC.Single(), key, nr)
	case r.read == newSide:
		got, m, err := x.readNewMarked(c, key)
		if err != nil {
			return nil, err
		}
		if m.behind == newSide.String() && !r.oldStale {
			// A write old took and new missed while old was
			// authoritative: old holds it until a repair.
			x.stats.redirect()
			return readOld()
		}
		if got != nil || !r.fallback || m.exists && (m.deleted || m.behind == oldSide.String()) {
			return got, nil
		}
		x.stats.fallback()
		return readOld()
	case r.consult:
		// New with its mark, then old (the mark first: see the package
		// doc, "Missed writes"); not old when the mark says it is
		// behind, unless a shadow read compares the two.
		if r.shadow {
			x.stats.call("shadow_read", c.phase)
		}
		newRec, m, err := x.readNewMarked(c, key)
		if err != nil {
			return nil, err
		}
		behind := m.behind == oldSide.String()
		var oldRec *record.Record
		var oerr error
		if r.shadow || !behind {
			oldRec, oerr = readOld()
		}
		if r.shadow && oerr == nil {
			x.shadowCompare(c, oldRec, newRec, m.behind, func() (*record.Record, *record.Record, string, error) {
				newRec, m, err := x.readNewMarked(c, key)
				if err != nil {
					return nil, nil, "", err
				}
				oldRec, err := readOld()
				return oldRec, newRec, m.behind, err
			})
		}
		if behind {
			// A write new took and old missed while new was
			// authoritative (before a rollback): new holds it until a
			// repair.
			x.stats.redirect()
			return newRec, nil
		}
		return oldRec, oerr
	}
	return readOld()
}

// readNewMarked reads the touched mark of key's new row, then the row at
// the mark's timestamp: one snapshot of new's database in two single-use
// reads.
func (x *DatastoreSpanner) readNewMarked(c *call, key *record.Record) (*record.Record, markState, error) {
	nr, err := x.newRow(&record.Record{Key: key.Key})
	if err != nil {
		return nil, markState{}, err
	}
	tk, err := x.markKey(nr)
	if err != nil {
		return nil, markState{}, err
	}
	ro := x.newC.Single()
	marks, err := readSpannerMarks(c.ctx, ro, x.o.Migration, []string{tk})
	if err != nil {
		return nil, markState{}, fmt.Errorf("cutover: reading the touched mark of %s: %w", c.key, err)
	}
	ts, err := ro.Timestamp()
	if err != nil {
		return nil, markState{}, err
	}
	got, err := x.readNew(c.ctx, x.newC.Single().WithTimestampBound(spanner.ReadTimestamp(ts)), key, nr)
	return got, marks[tk], err
}

// readNew reads key's new row (nr, key rewritten by newRow) through r
// and returns it as the entity the application wrote: under the old key,
// the columns other than the key's as properties, NULL ones left out.
func (x *DatastoreSpanner) readNew(ctx context.Context, r rowReader, key, nr *record.Record) (*record.Record, error) {
	k, err := spannerdb.SpannerKey(nr, x.table)
	if err != nil {
		return nil, fmt.Errorf("cutover: %w", err)
	}
	row, err := r.ReadRow(ctx, x.table.Name, k, x.cols)
	if errors.Is(err, spanner.ErrRowNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cutover: reading %s from %s: %w", k, x.table.Name, err)
	}
	got, err := spannerdb.RowToRecord(row, x.table)
	if err != nil {
		return nil, err
	}
	ok := key.Key.Clone()
	out := record.Record{Key: &ok, Table: x.kind}
	for _, f := range got.Fields {
		if f.Value.Kind == record.KindNull || x.isKeyColumn(f.Name) {
			continue
		}
		out.Fields = append(out.Fields, f)
	}
	return &out, nil
}

func (x *DatastoreSpanner) isKeyColumn(name string) bool {
	return x.table.Key.Index(name) >= 0
}

// BackfillRow is a backfill's write of rec (an old entity as the backfill
// read it), as Spanner.BackfillRow: one transaction in new's database
// that writes rec's new row unless the application touched that key
// since the cohort entered dual_write. It reports whether it wrote.
func (x *DatastoreSpanner) BackfillRow(ctx context.Context, rec record.Record) (bool, error) {
	c, err := x.routeEntity(ctx, &rec)
	if err != nil {
		return false, err
	}
	defer c.cancel()
	if err := x.backfillable(c); err != nil {
		return false, err
	}
	nr, err := x.newRow(&rec)
	if err != nil {
		return false, err
	}
	m, err := spannerdb.MutationFor(nr, x.table, storewrite.ModeUpsert)
	if err != nil {
		return false, fmt.Errorf("cutover: %s: %w", c.key, err)
	}
	tk, err := x.markKey(nr)
	if err != nil {
		return false, err
	}
	wrote, err := spannerBackfill(ctx, x.newC, x.o.Migration, tk, m, c.since)
	if err != nil {
		return false, fmt.Errorf("cutover: backfilling %s: %w", c.key, err)
	}
	return wrote, nil
}
