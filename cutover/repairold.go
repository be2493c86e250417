package cutover

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cutover/internal/reversecopy"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// RepairOld puts right, for the repair log's entries of writes and
// deletes old missed (Missed "old"), old's record as new holds it, and
// clears the key's mark's Behind where no call wrote new meanwhile (see
// package phases, "Missed writes"). The entries' cohorts must be in
// read_new, where every call writes new first: one transaction in old's
// database reads the old record, taking its lock, then new's record,
// strongly, and writes old as new holds it (a delete where new has none),
// as a reverse backfill does. Entries of other kinds are left alone. It
// returns the entries it put right; the caller clears them from the log.
// With old and new in one database no such entry arises, and it does
// nothing.
func (s *Spanner) RepairOld(ctx context.Context, entries []phases.RepairEntry) ([]phases.RepairEntry, error) {
	if s.same {
		return nil, nil
	}
	return eachMissedOld(ctx, entries, s.repairOld)
}

// eachMissedOld runs repair on the entries of writes old missed, in
// order, until one fails, and returns those it put right.
func eachMissedOld(ctx context.Context, entries []phases.RepairEntry, repair func(context.Context, phases.RepairEntry) error) ([]phases.RepairEntry, error) {
	var done []phases.RepairEntry
	for _, e := range entries {
		if e.Missed != oldSide.String() {
			continue
		}
		if err := repair(ctx, e); err != nil {
			return done, err
		}
		done = append(done, e)
	}
	return done, nil
}

func (s *Spanner) repairOld(ctx context.Context, e phases.RepairEntry) error {
	t, key, err := s.parseOldKey(e.OldKey)
	if err != nil {
		return fmt.Errorf("cutover: repair-log entry %s: %w", e, err)
	}
	c, err := s.routeCohort(ctx, e.Cohort, e.OldKey)
	if err != nil {
		return err
	}
	defer c.cancel()
	if err := repairsOld(ctx, c); err != nil {
		return err
	}
	nk, err := s.newRecord(&key)
	if err != nil {
		return err
	}
	tk, err := t.touchedKey(nk)
	if err != nil {
		return err
	}
	op, err := spannerMarkOp(ctx, s.newC.Single(), s.o.Migration, tk)
	if err != nil {
		return err
	}
	oldKey, err := spannerdb.SpannerKey(&key, t.old)
	if err != nil {
		return err
	}
	outer := ctx
	_, err = spannerdb.Transact(ctx, s.oldC, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		if _, err := txn.ReadRow(ctx, t.old.Name, oldKey, t.oldCols[:1]); err != nil && !errors.Is(err, spanner.ErrRowNotFound) {
			return err
		}
		// New strongly, outside the transaction (another database).
		got, err := s.readNew(outer, s.newC.Single(), &key)
		if err != nil {
			return err
		}
		if got == nil {
			return txn.BufferWrite(append(subtreeDeletes(t, oldKey, false), spanner.Delete(t.old.Name, oldKey)))
		}
		m, err := spannerdb.MutationFor(got, t.old, storewrite.ModeUpsert)
		if err != nil {
			return err
		}
		if len(t.children) > 0 {
			// Not deleted first, which would delete the rows
			// interleaved under it: the columns new holds as NULL are
			// set NULL after the write.
			return txn.BufferWrite(append([]*spanner.Mutation{m}, nullColumns(got, t.old, oldKey)...))
		}
		// Deleted first: the columns new holds as NULL are left out of
		// the write.
		return txn.BufferWrite([]*spanner.Mutation{spanner.Delete(t.old.Name, oldKey), m})
	})
	if err != nil {
		return fmt.Errorf("cutover: repairing %s in old: %w", e.OldKey, err)
	}
	return spannerClearBehind(ctx, s.newC, s.o.Migration, tk, op, e)
}

// spannerClearBehind clears Behind = "old" in the touched mark tk of
// migration in newC's database, after entry e was put right in old,
// unless a call wrote new since the mark read op before the repair.
func spannerClearBehind(ctx context.Context, newC *spanner.Client, migration, tk string, op markID, e phases.RepairEntry) error {
	_, err := spannerdb.Transact(ctx, newC, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		now, err := spannerMarkOp(ctx, txn, migration, tk)
		if err != nil || now != op || op.behind != oldSide.String() {
			return err
		}
		return txn.BufferWrite([]*spanner.Mutation{spanner.Update(phases.SpannerTouchedTable, []string{"Migration", "NewKey", "Behind"}, []any{migration, tk, spanner.NullString{}})})
	})
	if err != nil {
		return fmt.Errorf("cutover: clearing the mark of %s: %w", e.OldKey, err)
	}
	return nil
}

// nullColumns is the update that sets NULL the columns of t that rec (a
// row of t, key k) does not hold; none when it holds them all.
func nullColumns(rec *record.Record, t *spannerdb.Table, k spanner.Key) []*spanner.Mutation {
	var cols []string
	var vals []any
	for _, kc := range t.Key.Columns {
		cols = append(cols, kc.Name)
	}
	vals = append(vals, []any(k)...)
	n := len(cols)
	for _, c := range t.Columns {
		if c.Generated || t.Key.Index(c.Name) >= 0 {
			continue
		}
		if v, ok := rec.Get(c.Name); !ok || v.Kind == record.KindNull {
			cols, vals = append(cols, c.Name), append(vals, nil)
		}
	}
	if len(cols) == n {
		return nil
	}
	return []*spanner.Mutation{spanner.Update(t.Name, cols, vals)}
}

// markID is what RepairOld compares of a mark before and after: the id of
// the call that last wrote new, and Behind.
type markID struct{ op, behind string }

// spannerMarkOp reads markID of migration's touched mark tk through r.
func spannerMarkOp(ctx context.Context, r rowReader, migration, tk string) (markID, error) {
	row, err := r.ReadRow(ctx, phases.SpannerTouchedTable, spanner.Key{migration, tk}, []string{"Op", "Behind"})
	if errors.Is(err, spanner.ErrRowNotFound) {
		return markID{}, nil
	}
	if err != nil {
		return markID{}, err
	}
	var op, behind spanner.NullString
	if err := row.Columns(&op, &behind); err != nil {
		return markID{}, err
	}
	return markID{op.StringVal, behind.StringVal}, nil
}

// repairsOld refuses to repair old for a call not routed as read_new
// (new written first, old not stale unless ctx says the reverse
// backfill's copy is done).
func repairsOld(ctx context.Context, c *call) error {
	if c.route.oldStale && !reversecopy.IsDone(ctx) {
		return fmt.Errorf("cutover: %s: cohort %d is %s, back from new_only: old lacks the writes made in new_only until the reverse backfill copies them, so there is nothing to repair in old yet; run the reverse backfill again (rekey run --reverse --cohorts %d), which then moves the cohort to dual_write", c.key, c.cohort, c.phase, c.cohort)
	}
	if c.route.read != newSide || len(c.route.writes) != 2 || c.route.writes[0] != newSide {
		return fmt.Errorf("cutover: %s: cohort %d is %s: writes old missed are repaired while the cohort is in read_new (new written first); move it there and repair again", c.key, c.cohort, c.phase)
	}
	return nil
}

// RepairOld is Spanner.RepairOld for entities.
func (d *Datastore) RepairOld(ctx context.Context, entries []phases.RepairEntry) ([]phases.RepairEntry, error) {
	if d.same {
		return nil, nil
	}
	return eachMissedOld(ctx, entries, d.repairOld)
}

func (d *Datastore) repairOld(ctx context.Context, e phases.RepairEntry) error {
	k, err := rewrite.ParseDatastoreKeyText(e.OldKey)
	if err != nil {
		return fmt.Errorf("cutover: repair-log entry %s: %w", e, err)
	}
	key := record.Record{Key: &k, Table: k.Leaf().Kind}
	c, err := d.routeCohort(ctx, e.Cohort, e.OldKey)
	if err != nil {
		return err
	}
	defer c.cancel()
	if err := repairsOld(ctx, c); err != nil {
		return err
	}
	nr, err := d.newRecord(&key)
	if err != nil {
		return err
	}
	mk := d.touchedKey(nr)
	var before phases.DatastoreMark
	if err := d.newC.Get(ctx, mk, &before); err != nil && !errors.Is(err, datastore.ErrNoSuchEntity) {
		return err
	}
	if err := putOldEntity(ctx, d.oldC, k, func() (*record.Record, error) { return d.readNew(ctx, &key) }); err != nil {
		return fmt.Errorf("cutover: repairing %s in old: %w", e.OldKey, err)
	}
	if before.Behind != oldSide.String() {
		return nil
	}
	err = datastoredb.Transact(ctx, d.newC, func(tx *datastore.Transaction) error {
		var now phases.DatastoreMark
		if err := tx.Get(mk, &now); err != nil {
			return ignoreNoSuchEntity(err)
		}
		if now.Op != before.Op || now.Behind != oldSide.String() {
			return nil
		}
		now.Behind = ""
		_, err := tx.Put(mk, &now)
		return err
	})
	if err != nil {
		return fmt.Errorf("cutover: clearing the mark of %s: %w", e.OldKey, err)
	}
	return nil
}

// putOldEntity writes old entity k as new holds it (readNew; a delete
// where new has none) in one transaction of oldC that reads k first,
// taking its lock, as a reverse backfill does.
func putOldEntity(ctx context.Context, oldC *datastore.Client, k rewrite.DatastoreKey, readNew func() (*record.Record, error)) error {
	oldKey := datastoredb.KeyToDatastore(k)
	return datastoredb.Transact(ctx, oldC, func(tx *datastore.Transaction) error {
		var props datastore.PropertyList
		if err := tx.Get(oldKey, &props); err != nil && !errors.Is(err, datastore.ErrNoSuchEntity) {
			return err
		}
		got, err := readNew()
		if err != nil {
			return err
		}
		if got == nil {
			return tx.Delete(oldKey)
		}
		_, pl, err := datastoredb.ToEntity(got)
		if err != nil {
			return err
		}
		_, err = tx.Put(oldKey, &pl)
		return err
	})
}

func ignoreNoSuchEntity(err error) error {
	if errors.Is(err, datastore.ErrNoSuchEntity) {
		return nil
	}
	return err
}

// RepairOld is Spanner.RepairOld for a Datastore kind moving into a
// Spanner table (old and new always apart).
func (x *DatastoreSpanner) RepairOld(ctx context.Context, entries []phases.RepairEntry) ([]phases.RepairEntry, error) {
	return eachMissedOld(ctx, entries, x.repairOld)
}

func (x *DatastoreSpanner) repairOld(ctx context.Context, e phases.RepairEntry) error {
	k, err := rewrite.ParseDatastoreKeyText(e.OldKey)
	if err != nil {
		return fmt.Errorf("cutover: repair-log entry %s: %w", e, err)
	}
	key := record.Record{Key: &k, Table: k.Leaf().Kind}
	c, err := x.routeCohort(ctx, e.Cohort, e.OldKey)
	if err != nil {
		return err
	}
	defer c.cancel()
	if err := repairsOld(ctx, c); err != nil {
		return err
	}
	nr, err := x.newRow(&key)
	if err != nil {
		return err
	}
	tk, err := x.markKey(nr)
	if err != nil {
		return err
	}
	op, err := spannerMarkOp(ctx, x.newC.Single(), x.o.Migration, tk)
	if err != nil {
		return err
	}
	// New strongly, inside old's transaction (another store).
	if err := putOldEntity(ctx, x.oldC, k, func() (*record.Record, error) { return x.readNew(ctx, x.newC.Single(), &key, nr) }); err != nil {
		return fmt.Errorf("cutover: repairing %s in old: %w", e.OldKey, err)
	}
	return spannerClearBehind(ctx, x.newC, x.o.Migration, tk, op, e)
}
