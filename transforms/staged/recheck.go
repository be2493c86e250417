package staged

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
)

// A verify runs while the application writes: it reads old and new at
// different times, so a record written between the two reads looks
// different, missing or extra when it is not. Every finding is therefore
// read again, up to recheckAttempts times a little apart, old and new AT
// ONE MOMENT each time; a finding that old and new agree on at one of
// these moments is counted as settled (a write in flight), not as a
// finding. A real difference persists at every moment.
//
// One moment: on Spanner, a strong read-only transaction reads the new
// rows and the old rows are read at that transaction's timestamp
// (spanner.ReadTimestamp), so both sides are as they were at one instant
// of the instance's clock whether they share a database or not; a key the
// application writes several times a second differs at such an instant
// only while one of its dual writes is between its two commits. On
// Datastore, both sides are looked up in read-only transactions at one
// read time (datastore.WithReadTime), a little in the past (the server
// refuses a read time in its future) and after the job's own reads. From
// Datastore to Spanner, old is looked up at such a read time and new read
// at the same instant of Spanner's clock (spanner.ReadTimestamp): one
// moment up to the skew between the two services' clocks, which matters
// only for a record written during the recheck (a difference that stays
// shows at every instant). Only database sources can be read again by
// key.
//
// Findings are read again in batches (recheckBatch per bundle at most,
// one read of each side per batch and attempt, one wait per attempt), not
// one by one: a target with tens of thousands of extra records costs a
// few reads per batch instead of three waits per record.

// recheckAttempts and recheckWait: a batch of findings is read again 3
// times, 150, 300 and 450 ms after the previous read (or the batch). recheckBatch is the
// most findings read again at once. datastoreReadLag is how far in the
// past a Datastore read time is.
const (
	recheckAttempts  = 3
	recheckWait      = 150 * time.Millisecond
	recheckBatch     = 500
	datastoreReadLag = 200 * time.Millisecond
)

// RecheckSpec says where a finding is read again.
type RecheckSpec struct {
	Source      config.Endpoint  `json:"source"`
	Target      config.Endpoint  `json:"target"`
	SourceTable *spannerdb.Table `json:"source_table,omitempty"`
	Spec        rekeyer.Text     `json:"spec"`
	// SourceStore and TargetStore are record.Spanner or record.Datastore.
	SourceStore string `json:"source_store"`
	TargetStore string `json:"target_store"`
}

// NewRecheck returns the recheck of a verify job, nil when its source is
// not a database.
func NewRecheck(src, tgt config.Endpoint, source *spannerdb.Table, spec rekeyer.Spec) *RecheckSpec {
	if !operator.HoldsOld(src.Type) {
		return nil
	}
	return &RecheckSpec{Source: src, Target: tgt, SourceTable: source, Spec: spec.Text(), SourceStore: spec.SourceStore, TargetStore: spec.TargetStore}
}

// rechecker reads findings again.
type rechecker struct {
	spec       *RecheckSpec
	side       Side
	rk         *rekeyer.Rekeyer
	oldS, newS *spanner.Client
	oldD, newD *datastore.Client
	releases   []func() // the shared clients' (sharedClient)
}

func openRechecker(ctx context.Context, spec *RecheckSpec, side Side) (*rechecker, error) {
	rk, err := spec.Spec.Build()
	if err != nil {
		return nil, err
	}
	r := &rechecker{spec: spec, side: side, rk: rk}
	open := func(store string, e config.Endpoint, s **spanner.Client, d **datastore.Client) error {
		var release func()
		var err error
		*s, *d, release, err = sharedClient(store, e)
		if err == nil {
			r.releases = append(r.releases, release)
		}
		return err
	}
	if err := open(spec.SourceStore, spec.Source, &r.oldS, &r.oldD); err != nil {
		return nil, err
	}
	if err := open(spec.TargetStore, spec.Target, &r.newS, &r.newD); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *rechecker) close() {
	for _, release := range r.releases {
		release()
	}
	r.releases = nil
}

// recheckItem is a finding waiting to be read again: its record's old
// key (nil when it has none: extra in new with no inverse rewrite) and new
// key, and whether old and new agreed on it at one of the rereads.
type recheckItem struct {
	key            string // the new key's text, as the join keyed it
	jd             joined
	oldRef, newRef *record.Record
	settled        bool
}

// item makes the recheck item of a finding.
func (r *rechecker) item(key string, jd joined) *recheckItem {
	it := &recheckItem{key: key, jd: jd, oldRef: jd.old, newRef: jd.got}
	if it.oldRef == nil && jd.got != nil { // extra in new: its old key by the inverse rewrite
		if inv, ok := inverseOf(r.rk, jd.got, r.spec.Source); ok {
			it.oldRef = inv
		}
	}
	if it.newRef == nil {
		it.newRef = jd.want
	}
	return it
}

// inverseOf is the old record of a new one by the inverse rewrite, in
// source's namespace and database; false when there is no inverse.
func inverseOf(rk *rekeyer.Rekeyer, got *record.Record, source config.Endpoint) (*record.Record, bool) {
	inv := *got
	inv.Fields = append([]record.Field(nil), got.Fields...)
	if rk.Invert(&inv) != nil {
		return nil, false
	}
	if inv.Key != nil {
		k := *inv.Key
		k.Namespace, k.Database = source.Namespace, source.Database
		inv.Key = &k
	}
	return &inv, true
}

// settle reads the items again, at most recheckAttempts times, each time
// old and new at one moment, and marks those old and new agree on as
// settled. started is when the batch was formed (after the job's reads of
// its records).
func (r *rechecker) settle(ctx context.Context, items []*recheckItem, started time.Time) error {
	for attempt := 1; attempt <= recheckAttempts; attempt++ {
		var open []*recheckItem
		for _, it := range items {
			if !it.settled {
				open = append(open, it)
			}
		}
		if len(open) == 0 {
			return nil
		}
		select {
		case <-time.After(time.Duration(attempt) * recheckWait):
		case <-ctx.Done():
			return ctx.Err()
		}
		olds, news, err := r.readAtOnce(ctx, open, started)
		if err != nil {
			return err
		}
		for i, it := range open {
			it.settled = r.agree(olds[i], news[i])
		}
	}
	return nil
}

// agree reports whether old and new agree on a record: both absent, or
// new holding what the rewrite makes of old.
func (r *rechecker) agree(oldNow, newNow *record.Record) bool {
	switch {
	case oldNow == nil && newNow == nil:
		return true
	case oldNow != nil && newNow != nil:
		want := *oldNow
		want.Fields = append([]record.Field(nil), oldNow.Fields...)
		if err := r.rk.Rewrite(&want); err != nil {
			return false
		}
		d, err := r.side.differ(newNow, &want)
		return err == nil && d == ""
	}
	return false
}

// readAtOnce reads the items' old and new records at one moment (see
// above), nil where there is none.
func (r *rechecker) readAtOnce(ctx context.Context, items []*recheckItem, started time.Time) (olds, news []*record.Record, err error) {
	if r.newS != nil && r.oldS != nil {
		return r.readSpanner(ctx, items)
	}
	if r.oldD != nil && r.newD != nil {
		at, err := datastoreReadTime(ctx, started)
		if err != nil {
			return nil, nil, err
		}
		if olds, err = r.readDatastore(ctx, r.oldD, items, true, at); err != nil {
			return nil, nil, fmt.Errorf("old at %s: %w", at.Format(time.RFC3339Nano), err)
		}
		if news, err = r.readDatastore(ctx, r.newD, items, false, at); err != nil {
			return nil, nil, fmt.Errorf("new at %s: %w", at.Format(time.RFC3339Nano), err)
		}
		return olds, news, nil
	}
	if r.oldD != nil && r.newS != nil && r.side.Table != nil {
		// Datastore to Spanner: both at one read time, of two clocks
		// (see above).
		at, err := datastoreReadTime(ctx, started)
		if err != nil {
			return nil, nil, err
		}
		if olds, err = r.readDatastore(ctx, r.oldD, items, true, at); err != nil {
			return nil, nil, fmt.Errorf("old at %s: %w", at.Format(time.RFC3339Nano), err)
		}
		if news, err = r.newRows(ctx, atTime(r.newS, at), items); err != nil {
			return nil, nil, fmt.Errorf("at %s: %w", at.Format(time.RFC3339Nano), err)
		}
		return olds, news, nil
	}
	return nil, nil, errors.New("verify: a recheck from Spanner to Datastore is not supported")
}

// datastoreReadTime is a Datastore read time after started (the job's
// reads) and a little in the past (the server refuses one in its
// future), waiting for it if need be.
func datastoreReadTime(ctx context.Context, started time.Time) (time.Time, error) {
	at := time.Now().Add(-datastoreReadLag)
	if !at.After(started) {
		select {
		case <-time.After(started.Sub(at) + time.Millisecond):
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
		at = time.Now().Add(-datastoreReadLag)
	}
	return at.UTC().Truncate(time.Microsecond), nil
}

// readSpanner reads the items' new rows in a strong read-only transaction
// and their old rows at its timestamp, each row in its table (the main
// table or an interleaved one).
func (r *rechecker) readSpanner(ctx context.Context, items []*recheckItem) (olds, news []*record.Record, err error) {
	if r.side.Table == nil || r.spec.SourceTable == nil {
		return nil, nil, errors.New("verify: a Spanner recheck without the tables' schemas")
	}
	// New's tables in one snapshot, tried again while the emulator
	// refuses the transaction for one running concurrently.
	var at time.Time
	err = spannerdb.ReadOnly(ctx, r.newS, func(ctx context.Context, txn *spanner.ReadOnlyTransaction) (err error) {
		if news, err = r.newRows(ctx, txn, items); err != nil {
			return err
		}
		if at, err = txn.Timestamp(); err != nil {
			return fmt.Errorf("new: the read's timestamp: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	olds, err = spannerRowsOf(ctx, atTime(r.oldS, at), items, func(it *recheckItem) *record.Record { return it.oldRef }, r.spec.SourceTable, r.side.SourceChildren)
	if err != nil {
		return nil, nil, fmt.Errorf("old at %s: %w", at.Format(time.RFC3339Nano), err)
	}
	return olds, news, nil
}

// atTime reads through a single use of c at time at for each read: a
// single use serves one read only, and the items' rows may be in
// several tables.
func atTime(c *spanner.Client, at time.Time) spannerReader {
	return singleAt{c, at}
}

// singleAt is atTime's reader.
type singleAt struct {
	c  *spanner.Client
	at time.Time
}

func (s singleAt) Read(ctx context.Context, table string, keys spanner.KeySet, columns []string) *spanner.RowIterator {
	return s.c.Single().WithTimestampBound(spanner.ReadTimestamp(s.at)).Read(ctx, table, keys, columns)
}

// newRows reads the items' new rows through rd.
func (r *rechecker) newRows(ctx context.Context, rd spannerReader, items []*recheckItem) ([]*record.Record, error) {
	out, err := spannerRowsOf(ctx, rd, items, func(it *recheckItem) *record.Record { return it.newRef }, r.side.Table, r.side.Children)
	if err != nil {
		return nil, fmt.Errorf("new: %w", err)
	}
	return out, nil
}

// spannerRowsOf reads through rd the rows ref gives of the items (none
// where it gives nil), each in its table (main or one of children); nil
// where there is none.
func spannerRowsOf(ctx context.Context, rd spannerReader, items []*recheckItem, ref func(*recheckItem) *record.Record, main *spannerdb.Table, children []*spannerdb.Table) ([]*record.Record, error) {
	keys := map[*spannerdb.Table][]spanner.Key{}
	text := make([]string, len(items))
	for i, it := range items {
		rec := ref(it)
		if rec == nil {
			continue
		}
		t, _ := tableOf(rec, main, children)
		k, err := spannerdb.SpannerKey(rec, t)
		if err != nil {
			return nil, err
		}
		keys[t] = append(keys[t], k)
		if text[i], err = rowKeyText(rec, t, true); err != nil {
			return nil, err
		}
	}
	rows := map[string]*record.Record{}
	for t, ks := range keys {
		if err := readSpannerRows(ctx, rd, t, ks, rows); err != nil {
			return nil, err
		}
	}
	out := make([]*record.Record, len(items))
	for i := range items {
		if text[i] != "" {
			out[i] = rows[text[i]]
		}
	}
	return out, nil
}

// spannerReader is a read-only transaction or a single use.
type spannerReader interface {
	Read(ctx context.Context, table string, keys spanner.KeySet, columns []string) *spanner.RowIterator
}

// readSpannerRows reads the rows of keys from t into out, by their key's
// text after the table's name (rowKeyText).
func readSpannerRows(ctx context.Context, rd spannerReader, t *spannerdb.Table, keys []spanner.Key, out map[string]*record.Record) error {
	cols := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = c.Name
	}
	return rd.Read(ctx, t.Name, spanner.KeySetFromKeys(keys...), cols).Do(func(row *spanner.Row) error {
		rec, err := spannerdb.RowToRecord(row, t)
		if err != nil {
			return err
		}
		k, err := rowKeyText(&rec, t, true)
		if err != nil {
			return err
		}
		out[k] = &rec
		return nil
	})
}

// readDatastore looks up the items' old (or new) entities in a read-only
// transaction at read time at.
func (r *rechecker) readDatastore(ctx context.Context, c *datastore.Client, items []*recheckItem, old bool, at time.Time) ([]*record.Record, error) {
	out := make([]*record.Record, len(items))
	var keys []*datastore.Key
	var idx []int
	for i, it := range items {
		ref := it.newRef
		if old {
			ref = it.oldRef
		}
		if ref == nil {
			continue
		}
		if ref.Key == nil {
			return nil, errors.New("verify: recheck of a record without a key")
		}
		keys = append(keys, datastoredb.KeyToDatastore(*ref.Key))
		idx = append(idx, i)
	}
	if len(keys) == 0 {
		return out, nil
	}
	tx, err := c.NewTransaction(ctx, datastore.ReadOnly, datastore.WithReadTime(at))
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	pls := make([]datastore.PropertyList, len(keys))
	err = tx.GetMulti(keys, pls)
	var me datastore.MultiError
	if errors.As(err, &me) {
		for _, e := range me {
			if e != nil && !errors.Is(e, datastore.ErrNoSuchEntity) {
				return nil, e
			}
		}
	} else if err != nil {
		return nil, err
	}
	for n, k := range keys {
		if me != nil && me[n] != nil {
			continue
		}
		rec, err := datastoredb.FromEntity(k, pls[n])
		if err != nil {
			return nil, err
		}
		out[idx[n]] = &rec
	}
	return out, nil
}
