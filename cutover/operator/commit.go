package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/record"
)

// SpannerBackfill returns the conditional commit (spannerdb.Writer's
// Conditional) of b into table t of client's database: one read-write
// transaction that reads the touched marks of the rows' keys and upserts
// the rows whose marks do not stop it (phases.Backfill.Stops), returning how
// many it skipped.
//
// Rows of an interleaved table whose parent new lacks are skipped too
// while old is authoritative (no cohort of b in read_new), counted with
// the rows the marks stop: a first commit goes blind, and only if new
// refuses it for a missing parent does a second read the parents in its
// transaction. Why that loses nothing: package cutover's doc,
// "Interleaved tables".
func SpannerBackfill(client *spanner.Client, t *spannerdb.Table, b phases.Backfill) func(ctx context.Context, rows []spannerdb.Row) (int, error) {
	return func(ctx context.Context, rows []spannerdb.Row) (int, error) {
		muts := make([]*spanner.Mutation, len(rows))
		for i, r := range rows {
			var err error
			if muts[i], err = spannerdb.MutationFor(r.Record, t, "upsert"); err != nil {
				return 0, status.Errorf(codes.InvalidArgument, "backfill: %s: %v", r.Record.Describe(), err)
			}
		}
		rec := func(i int) *record.Record { return rows[i].Record }
		skipped, err := spannerUnlessTouched(ctx, client, t, b, rec, muts, nil)
		if t.Parent == "" || spanner.ErrCode(err) != codes.NotFound || readsNew(b) {
			return skipped, err
		}
		parent, perr := spannerdb.ReadTable(ctx, client, t.Parent)
		if perr != nil {
			return skipped, fmt.Errorf("%w (and reading the schema of its parent table %s: %v)", err, t.Parent, perr)
		}
		return spannerUnlessTouched(ctx, client, t, b, rec, muts, parent)
	}
}

// readsNew reports whether b copies a cohort in read_new (a repair of
// the log's entries), where new is authoritative.
func readsNew(b phases.Backfill) bool {
	for _, s := range b.Spans {
		if s.Phase == phases.ReadNew {
			return true
		}
	}
	return false
}

// SpannerRepairDeletes returns the conditional delete of a repair: one
// read-write transaction that deletes the rows of recs' keys from table t
// where their touched marks do not stop it (the application wrote the
// record since the repair began), returning how many it skipped.
func SpannerRepairDeletes(client *spanner.Client, t *spannerdb.Table, b phases.Backfill) func(ctx context.Context, recs []record.Record) (int, error) {
	return func(ctx context.Context, recs []record.Record) (int, error) {
		muts := make([]*spanner.Mutation, len(recs))
		for i := range recs {
			k, err := spannerdb.SpannerKey(&recs[i], t)
			if err != nil {
				return 0, fmt.Errorf("repair: %s: %w", recs[i].Describe(), err)
			}
			muts[i] = spanner.Delete(t.Name, k)
		}
		return spannerUnlessTouched(ctx, client, t, b, func(i int) *record.Record { return &recs[i] }, muts, nil)
	}
}

// spannerUnlessTouched applies, in one transaction, the mutations of the
// records whose touched marks do not stop b (muts[i] is rec(i)'s) and,
// if parent (t's parent table) is set, whose parent row the transaction
// finds in new.
func spannerUnlessTouched(ctx context.Context, client *spanner.Client, t *spannerdb.Table, b phases.Backfill, rec func(int) *record.Record, muts []*spanner.Mutation, parent *spannerdb.Table) (int, error) {
	keys := make([]string, len(muts))
	set := make([]spanner.KeySet, len(muts))
	var parentKeys []spanner.Key
	for i := range muts {
		k, err := spannerdb.KeyOf(rec(i), t)
		if err != nil {
			return 0, status.Errorf(codes.InvalidArgument, "backfill: %s: %v", rec(i).Describe(), err)
		}
		keys[i] = phases.SpannerKeyText(t.Name, t.Parent != "", k)
		set[i] = spanner.Key{b.Migration, keys[i]}
		if parent != nil {
			sk, err := spannerdb.SpannerKey(rec(i), t)
			if err != nil || len(sk) < len(parent.Key.Columns) {
				return 0, status.Errorf(codes.InvalidArgument, "backfill: %s: no key of a row of %s under %s (%v)", rec(i).Describe(), t.Name, parent.Name, err)
			}
			parentKeys = append(parentKeys, sk[:len(parent.Key.Columns)])
		}
	}
	skipped := 0
	_, err := spannerdb.Transact(ctx, client, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		stop, behindNew := map[string]bool{}, map[string]bool{}
		err := txn.Read(ctx, phases.SpannerTouchedTable, spanner.KeySets(set...), []string{"NewKey", "Cohort", "TouchedAt", "Behind"}).Do(func(row *spanner.Row) error {
			var key string
			var c int64
			var at time.Time
			var behind spanner.NullString
			if err := row.Columns(&key, &c, &at, &behind); err != nil {
				return err
			}
			stop[key] = b.Stops(int(c), at, behind.StringVal)
			behindNew[key] = behind.StringVal == phases.BehindNew
			return nil
		})
		if err != nil {
			return err
		}
		if parent != nil {
			if err := stopOrphans(ctx, txn, parent, parentKeys, keys, stop); err != nil {
				return err
			}
		}
		var apply []*spanner.Mutation
		for i := range muts {
			if !stop[keys[i]] {
				apply = append(apply, muts[i])
				if behindNew[keys[i]] {
					// What new missed was in old before this was read.
					apply = append(apply, spanner.Update(phases.SpannerTouchedTable, []string{"Migration", "NewKey", "Behind"}, []any{b.Migration, keys[i], spanner.NullString{}}))
				}
			}
		}
		skipped = 0
		for i := range muts {
			if stop[keys[i]] {
				skipped++
			}
		}
		if len(apply) == 0 {
			return nil
		}
		return txn.BufferWrite(apply)
	})
	return skipped, err
}

// stopOrphans sets stop for the rows (keys[i], under parentKeys[i]) whose
// parent row txn does not find in table parent.
func stopOrphans(ctx context.Context, txn *spanner.ReadWriteTransaction, parent *spannerdb.Table, parentKeys []spanner.Key, keys []string, stop map[string]bool) error {
	set := make([]spanner.KeySet, len(parentKeys))
	for i, k := range parentKeys {
		set[i] = k
	}
	found := map[string]bool{}
	cols := make([]string, len(parent.Key.Columns))
	for i, c := range parent.Key.Columns {
		cols[i] = c.Name
	}
	err := txn.Read(ctx, parent.Name, spanner.KeySets(set...), cols).Do(func(row *spanner.Row) error {
		rec, err := spannerdb.RowToRecord(row, parent)
		if err != nil {
			return err
		}
		k, err := spannerdb.SpannerKey(&rec, parent)
		if err != nil {
			return err
		}
		found[k.String()] = true
		return nil
	})
	if err != nil {
		return err
	}
	for i, k := range parentKeys {
		if !found[k.String()] {
			stop[keys[i]] = true
		}
	}
	return nil
}

// DatastoreBackfill returns the conditional commit (datastoredb.Writer's
// Conditional) of b into client's database, the touched marks being in
// b.Namespace: one transaction that reads the marks of the entities' keys
// and upserts the entities whose marks do not stop it (phases.Backfill.Stops),
// returning how many it skipped. A transaction that lost to a concurrent
// one fails as Aborted, which the writer retries.
func DatastoreBackfill(client *datastore.Client, b phases.Backfill) func(ctx context.Context, ents []datastore.Entity) (int, error) {
	return func(ctx context.Context, ents []datastore.Entity) (int, error) {
		keys := make([]*datastore.Key, len(ents))
		for i := range ents {
			keys[i] = ents[i].Key
		}
		return datastoreUnlessTouched(ctx, client, b, keys, func(tx *datastore.Transaction, keep []int) error {
			var ks []*datastore.Key
			var props []any
			for _, i := range keep {
				pl := datastore.PropertyList(ents[i].Properties)
				ks = append(ks, ents[i].Key)
				props = append(props, &pl)
			}
			_, err := tx.PutMulti(ks, props)
			return err
		})
	}
}

// DatastoreRepairDeletes returns the conditional delete of a repair: one
// transaction that deletes the entities of keys whose touched marks do
// not stop it, returning how many it skipped.
func DatastoreRepairDeletes(client *datastore.Client, b phases.Backfill) func(ctx context.Context, keys []*datastore.Key) (int, error) {
	return func(ctx context.Context, keys []*datastore.Key) (int, error) {
		return datastoreUnlessTouched(ctx, client, b, keys, func(tx *datastore.Transaction, keep []int) error {
			ks := make([]*datastore.Key, len(keep))
			for j, i := range keep {
				ks[j] = keys[i]
			}
			return tx.DeleteMulti(ks)
		})
	}
}

// datastoreUnlessTouched runs, in one transaction, apply with the
// indexes of the keys whose touched marks do not stop b.
func datastoreUnlessTouched(ctx context.Context, client *datastore.Client, b phases.Backfill, keys []*datastore.Key, apply func(tx *datastore.Transaction, keep []int) error) (int, error) {
	marks := make([]*datastore.Key, len(keys))
	for i, k := range keys {
		marks[i] = phases.DatastoreMarkKey(b.Migration, b.Namespace, datastoredb.KeyFromDatastore(k))
	}
	skipped := 0
	_, err := client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
		got := make([]phases.DatastoreMark, len(marks))
		err := tx.GetMulti(marks, got)
		var me datastore.MultiError
		switch {
		case err == nil:
		case errors.As(err, &me):
			for i, e := range me {
				if e != nil && !errors.Is(e, datastore.ErrNoSuchEntity) {
					return e
				}
				if e != nil {
					got[i] = phases.DatastoreMark{}
				}
			}
		default:
			return err
		}
		var keep []int
		var cleared []*datastore.Key
		var clearedMarks []any
		for i := range keys {
			mark := got[i]
			if mark.Migration != "" && b.Stops(int(mark.Cohort), mark.TouchedAt, mark.Behind) {
				continue
			}
			keep = append(keep, i)
			if mark.Behind == phases.BehindNew {
				// What new missed was in old before this was read.
				mark.Behind = ""
				cleared, clearedMarks = append(cleared, marks[i]), append(clearedMarks, &mark)
			}
		}
		skipped = len(keys) - len(keep)
		if len(keep) == 0 {
			return nil
		}
		if len(cleared) > 0 {
			if _, err := tx.PutMulti(cleared, clearedMarks); err != nil {
				return err
			}
		}
		return apply(tx, keep)
	})
	if errors.Is(err, datastore.ErrConcurrentTransaction) {
		err = status.Error(codes.Aborted, err.Error())
	}
	return skipped, err
}
