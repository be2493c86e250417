package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
)

// reverseRekeyer builds r's rekeyer.
func reverseRekeyer(r phases.Reverse) (*rekeyer.Rekeyer, error) {
	rk, err := r.Spec.Build()
	if err != nil {
		return nil, fmt.Errorf("reverse backfill: %w", err)
	}
	return rk, nil
}

// newTable reads the schema of new's table name through c.
func newTable(ctx context.Context, c *spanner.Client, name string) (*spannerdb.Table, error) {
	if name == "" {
		return nil, errors.New("reverse backfill: no new table")
	}
	t, err := spannerdb.ReadTable(ctx, c, name)
	if err != nil {
		return nil, fmt.Errorf("reverse backfill: new's table: %w", err)
	}
	return t, nil
}

// SpannerReverse returns the conditional commit (spannerdb.Writer's
// Conditional) of a reverse backfill into old table t of oldC's
// database, reading new through newC (see package phases' argument);
// it returns how many records it deleted from old because new holds
// none. It reads the schema of t's new table (r.NewTable, or for an
// interleaved table the new child of the same name) from newC.
func SpannerReverse(ctx context.Context, oldC, newC *spanner.Client, t *spannerdb.Table, r phases.Reverse) (func(ctx context.Context, rows []spannerdb.Row) (int, error), error) {
	rk, err := reverseRekeyer(r)
	if err != nil {
		return nil, err
	}
	name := r.NewTable
	if t.Parent != "" { // an interleaved table: new's of the same name
		name = ""
		for _, c := range r.NewChildren {
			if strings.EqualFold(c, t.Name) {
				name = c
			}
		}
		if name == "" {
			return nil, fmt.Errorf("reverse backfill: no new table for interleaved table %s", t.Name)
		}
	}
	newT, err := newTable(ctx, newC, name)
	if err != nil {
		return nil, err
	}
	newCols := newT.ColumnNames()
	ancestors, err := reverseAncestors(ctx, oldC, newC, t, newT)
	if err != nil {
		return nil, err
	}
	return func(outer context.Context, all []spannerdb.Row) (int, error) {
		ctx := outer
		// One mutation a key: a record read from both stores comes twice,
		// and of two, the one the map below does not point at would be
		// deleted before the other is written, which, for a row with rows
		// interleaved under it, deletes those in old (ON DELETE CASCADE;
		// the interleaved soak, seed 6203, lost a write so).
		rows := make([]spannerdb.Row, 0, len(all))
		var oldKeys, newKeys []spanner.KeySet
		seen := make(map[string]bool, len(all))
		oldKeyOf := map[string]int{} // new key text → row
		for _, row := range all {
			ok, err := spannerdb.SpannerKey(row.Record, t)
			if err != nil {
				return 0, status.Errorf(codes.InvalidArgument, "reverse backfill: %s: %v", row.Record.Describe(), err)
			}
			if seen[ok.String()] {
				continue
			}
			seen[ok.String()] = true
			i := len(rows)
			rows = append(rows, row)
			nr := *row.Record
			nr.Fields = append([]record.Field(nil), row.Record.Fields...)
			if err := rk.Rewrite(&nr); err != nil {
				return 0, status.Errorf(codes.InvalidArgument, "reverse backfill: %s: %v", row.Record.Describe(), err)
			}
			nk, err := spannerdb.SpannerKey(&nr, newT)
			if err != nil {
				return 0, status.Errorf(codes.InvalidArgument, "reverse backfill: %s: %v", row.Record.Describe(), err)
			}
			oldKeys, newKeys = append(oldKeys, ok), append(newKeys, nk)
			oldKeyOf[nk.String()] = i
		}
		deleted := 0
		_, err := spannerdb.Transact(ctx, oldC, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			// Lock the old rows first.
			if err := txn.Read(ctx, t.Name, spanner.KeySets(oldKeys...), []string{t.Key.Columns[0].Name}).Do(func(*spanner.Row) error { return nil }); err != nil {
				return err
			}
			// Then read new, now (across databases with a context of its
			// own: the client refuses a read inside another transaction's).
			read, rctx := txn.Read, ctx
			if newC != oldC {
				read = func(ctx context.Context, table string, keys spanner.KeySet, cols []string) *spanner.RowIterator {
					return newC.Single().Read(ctx, table, keys, cols) // a single-use transaction a read
				}
				rctx = outer
			}
			found := make([]*record.Record, len(rows))
			err := read(rctx, newT.Name, spanner.KeySets(newKeys...), newCols).Do(func(row *spanner.Row) error {
				nr, err := spannerdb.RowToRecord(row, newT)
				if err != nil {
					return err
				}
				nk, err := spannerdb.SpannerKey(&nr, newT)
				if err != nil {
					return err
				}
				if i, ok := oldKeyOf[nk.String()]; ok {
					found[i] = &nr
				}
				return nil
			})
			if err != nil {
				return err
			}
			deleted = 0
			var muts []*spanner.Mutation
			for i := range rows {
				if found[i] == nil {
					deleted++
					muts = append(muts, spanner.Delete(t.Name, oldKeys[i]))
					continue
				}
				old := *found[i]
				if err := rk.Invert(&old); err != nil {
					return status.Errorf(codes.InvalidArgument, "reverse backfill: %s: %v", found[i].Describe(), err)
				}
				m, err := spannerdb.MutationFor(&old, t, "upsert")
				if err != nil {
					return status.Errorf(codes.InvalidArgument, "reverse backfill: %s: %v", old.Describe(), err)
				}
				muts = append(muts, m)
			}
			parents, err := missingAncestors(ctx, txn, rctx, read, ancestors, rk, oldKeys, newKeys, found)
			if err != nil {
				return err
			}
			return txn.BufferWrite(append(parents, muts...))
		})
		return deleted, err
	}, nil
}

// reverseAncestor is one level of tables above an interleaved table in
// old and in new.
type reverseAncestor struct{ old, new *spannerdb.Table }

// reverseAncestors are the tables above old table t and new table newT,
// the root first (none for a table interleaved in none).
func reverseAncestors(ctx context.Context, oldC, newC *spanner.Client, t, newT *spannerdb.Table) ([]reverseAncestor, error) {
	var out []reverseAncestor
	for ot, nt := t, newT; ot.Parent != "" && nt.Parent != ""; {
		op, err := spannerdb.ReadTable(ctx, oldC, ot.Parent)
		if err != nil {
			return nil, fmt.Errorf("reverse backfill: old's table %s: %w", ot.Parent, err)
		}
		np, err := newTable(ctx, newC, nt.Parent)
		if err != nil {
			return nil, err
		}
		out = append([]reverseAncestor{{op, np}}, out...)
		ot, nt = op, np
	}
	return out, nil
}

// missingAncestors returns the writes of the ancestor rows, root first,
// that old lacks for the child rows new holds (found[i], old key
// oldKeys[i], new key newKeys[i]), each as new holds it now. A parent's
// level of the reverse backfill is copied before its children's, but an
// application's write of a parent in old can fail after that level read
// new (it is logged, for a repair); its children, written in new since,
// would then fail in old for want of it. Old's ancestor rows are read in
// txn first (taking their locks), then new's, strongly, through read at
// rctx, as the child rows are (package phases' argument holds for them
// alike); one that new no longer holds is left out, and its child's
// write fails as before.
func missingAncestors(ctx context.Context, txn *spanner.ReadWriteTransaction, rctx context.Context,
	read func(context.Context, string, spanner.KeySet, []string) *spanner.RowIterator,
	ancestors []reverseAncestor, rk *rekeyer.Rekeyer, oldKeys, newKeys []spanner.KeySet, found []*record.Record) ([]*spanner.Mutation, error) {
	var out []*spanner.Mutation
	for _, a := range ancestors {
		no, nn := len(a.old.Key.Columns), len(a.new.Key.Columns)
		olds, news := map[string]spanner.Key{}, map[string]spanner.Key{} // old key text → keys
		for i, f := range found {
			ok, okOld := oldKeys[i].(spanner.Key)
			nk, okNew := newKeys[i].(spanner.Key)
			if f == nil || !okOld || !okNew || len(ok) < no || len(nk) < nn {
				continue
			}
			pk := ok[:no:no]
			olds[pk.String()], news[pk.String()] = pk, nk[:nn:nn]
		}
		if len(olds) == 0 {
			return out, nil
		}
		var oldSet []spanner.KeySet
		for _, k := range olds {
			oldSet = append(oldSet, k)
		}
		err := txn.Read(ctx, a.old.Name, spanner.KeySets(oldSet...), a.old.ColumnNames()).Do(func(row *spanner.Row) error {
			rec, err := spannerdb.RowToRecord(row, a.old)
			if err != nil {
				return err
			}
			k, err := spannerdb.SpannerKey(&rec, a.old)
			if err != nil {
				return err
			}
			delete(news, k.String())
			return nil
		})
		if err != nil || len(news) == 0 {
			return out, err
		}
		var newSet []spanner.KeySet
		for _, k := range news {
			newSet = append(newSet, k)
		}
		err = read(rctx, a.new.Name, spanner.KeySets(newSet...), a.new.ColumnNames()).Do(func(row *spanner.Row) error {
			rec, err := spannerdb.RowToRecord(row, a.new)
			if err != nil {
				return err
			}
			if err := rk.Invert(&rec); err != nil {
				return status.Errorf(codes.InvalidArgument, "reverse backfill: %s: %v", rec.Describe(), err)
			}
			m, err := spannerdb.MutationFor(&rec, a.old, "upsert")
			if err != nil {
				return status.Errorf(codes.InvalidArgument, "reverse backfill: %s: %v", rec.Describe(), err)
			}
			out = append(out, m)
			return nil
		})
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// DatastoreReverse returns the conditional commit (datastoredb.Writer's
// Conditional) of a reverse backfill into oldC's database, reading new
// through newC (see package phases' argument); it returns how many entities it
// deleted from old because new holds none.
func DatastoreReverse(oldC, newC *datastore.Client, r phases.Reverse) (func(ctx context.Context, ents []datastore.Entity) (int, error), error) {
	rk, err := reverseRekeyer(r)
	if err != nil {
		return nil, err
	}
	return datastoreReverse(oldC, r, func(ctx context.Context, tx *datastore.Transaction, recs []*record.Record) ([]*record.Record, error) {
		newKeys := make([]*datastore.Key, len(recs))
		for i, rec := range recs {
			if err := rk.Rewrite(rec); err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "reverse backfill: %v: %v", rec.Key, err)
			}
			newKeys[i] = datastoredb.KeyToDatastore(*rec.Key)
		}
		news := make([]datastore.PropertyList, len(recs))
		var gerr error
		if newC == oldC {
			gerr = tx.GetMulti(newKeys, news)
		} else {
			gerr = newC.GetMulti(ctx, newKeys, news)
		}
		missing, err := missingOf(gerr, len(recs))
		if err != nil {
			return nil, err
		}
		out := make([]*record.Record, len(recs))
		for i := range recs {
			if missing[i] {
				continue
			}
			rec, err := datastoredb.FromEntity(newKeys[i], news[i])
			if err != nil {
				return nil, err
			}
			if err := rk.Invert(&rec); err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "reverse backfill: %v: %v", newKeys[i], err)
			}
			out[i] = &rec
		}
		return out, nil
	}), nil
}

// DatastoreFromSpannerReverse is DatastoreReverse for a Datastore →
// Spanner migration: new's rows are read through newS, in r.NewTable,
// and turned back into entities (Rekeyer.Invert).
func DatastoreFromSpannerReverse(ctx context.Context, oldC *datastore.Client, newS *spanner.Client, r phases.Reverse) (func(ctx context.Context, ents []datastore.Entity) (int, error), error) {
	rk, err := reverseRekeyer(r)
	if err != nil {
		return nil, err
	}
	newT, err := newTable(ctx, newS, r.NewTable)
	if err != nil {
		return nil, err
	}
	cols := newT.ColumnNames()
	return datastoreReverse(oldC, r, func(ctx context.Context, _ *datastore.Transaction, recs []*record.Record) ([]*record.Record, error) {
		keys := make([]spanner.KeySet, len(recs))
		at := map[string]int{} // new key text → record
		for i, rec := range recs {
			if err := rk.Rewrite(rec); err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "reverse backfill: %s: %v", rec.Describe(), err)
			}
			k, err := spannerdb.SpannerKey(rec, newT)
			if err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "reverse backfill: %s: %v", rec.Describe(), err)
			}
			keys[i], at[k.String()] = k, i
		}
		out := make([]*record.Record, len(recs))
		// Strongly, now: after old's entities were read (and locked).
		err := newS.Single().Read(ctx, newT.Name, spanner.KeySets(keys...), cols).Do(func(row *spanner.Row) error {
			rec, err := spannerdb.RowToRecord(row, newT)
			if err != nil {
				return err
			}
			k, err := spannerdb.SpannerKey(&rec, newT)
			if err != nil {
				return err
			}
			i, ok := at[k.String()]
			if !ok {
				return nil
			}
			if err := rk.Invert(&rec); err != nil {
				return status.Errorf(codes.InvalidArgument, "reverse backfill: %s: %v", k, err)
			}
			out[i] = &rec
			return nil
		})
		return out, err
	}), nil
}

// datastoreReverse is the conditional commit of a reverse backfill into
// oldC's database of entities ents: in one transaction of old it reads
// ents' old entities (taking their locks), then new's records of them
// (readNew, given the old records, to rewrite: the old record of each
// new one, nil where new holds none), and writes old as new holds it, a
// delete where new holds none.
func datastoreReverse(oldC *datastore.Client, r phases.Reverse, readNew func(ctx context.Context, tx *datastore.Transaction, recs []*record.Record) ([]*record.Record, error)) func(ctx context.Context, ents []datastore.Entity) (int, error) {
	return func(ctx context.Context, ents []datastore.Entity) (int, error) {
		ents = distinctKeys(ents) // a record read from both stores: one mutation a key
		oldKeys := make([]*datastore.Key, len(ents))
		for i, e := range ents {
			oldKeys[i] = e.Key
		}
		deleted := 0
		_, err := oldC.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
			olds := make([]datastore.PropertyList, len(ents))
			if err := ignoreMissing(tx.GetMulti(oldKeys, olds)); err != nil {
				return err
			}
			recs := make([]*record.Record, len(ents))
			for i, e := range ents {
				rec, err := datastoredb.FromEntity(e.Key, e.Properties)
				if err != nil {
					return status.Errorf(codes.InvalidArgument, "reverse backfill: %v: %v", e.Key, err)
				}
				recs[i] = &rec
			}
			news, err := readNew(ctx, tx, recs)
			if err != nil {
				return err
			}
			deleted = 0
			var muts []*datastore.Mutation
			for i, rec := range news {
				if rec == nil {
					deleted++
					muts = append(muts, datastore.NewDelete(oldKeys[i]))
					continue
				}
				rec.Key.Namespace = r.OldNamespace
				k, props, err := datastoredb.ToEntity(rec)
				if err != nil {
					return status.Errorf(codes.InvalidArgument, "reverse backfill: %v: %v", oldKeys[i], err)
				}
				pl := props
				muts = append(muts, datastore.NewUpsert(k, &pl))
			}
			_, err = tx.Mutate(muts...)
			return err
		})
		if errors.Is(err, datastore.ErrConcurrentTransaction) {
			err = status.Error(codes.Aborted, err.Error())
		}
		return deleted, err
	}
}

// distinctKeys is ents without the later ones of a key already seen.
func distinctKeys(ents []datastore.Entity) []datastore.Entity {
	seen := make(map[string]bool, len(ents))
	out := ents[:0:0]
	for _, e := range ents {
		if k := e.Key.String(); !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	return out
}

// ignoreMissing is err without the "no such entity" parts of a GetMulti.
func ignoreMissing(err error) error {
	_, err = missingOf(err, 0)
	return err
}

// missingOf reads a GetMulti's error of n keys: which are missing, or
// another error.
func missingOf(err error, n int) ([]bool, error) {
	missing := make([]bool, n)
	var me datastore.MultiError
	switch {
	case err == nil:
		return missing, nil
	case errors.As(err, &me):
		if n == 0 {
			missing = make([]bool, len(me))
		}
		for i, e := range me {
			switch {
			case e == nil:
			case errors.Is(e, datastore.ErrNoSuchEntity):
				missing[i] = true
			default:
				return nil, e
			}
		}
		return missing, nil
	}
	return nil, err
}
