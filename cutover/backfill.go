package cutover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// Backfill is what a cohort backfill (rekey run --cohorts) writes by: the
// migration whose touched marks it consults, and the cohorts it copies
// with the time each entered the phase it is in (dual_write, unless the
// backfill was forced). A record is written only if the application has
// not touched its new key since its cohort's Since (see the package doc,
// "Why no acknowledged write is lost"). It is plain data: it travels in a
// Beam sink's configuration.
type Backfill struct {
	Migration string         `json:"migration"`
	Spans     []BackfillSpan `json:"spans"`
	// Namespace is the Datastore namespace of the phase store and the
	// touched marks (the target's).
	Namespace string `json:"namespace,omitempty"`
	// Reverse, if set, makes it a reverse backfill: old is written, each
	// record as new holds it when the record is written (see Reverse).
	Reverse *Reverse `json:"reverse,omitempty"`
}

// BackfillSpan is cohorts First..Last, in their phase since Since.
type BackfillSpan struct {
	First int       `json:"first"`
	Last  int       `json:"last"`
	Phase Phase     `json:"phase"`
	Since time.Time `json:"since"`
}

// Cohorts returns the backfill's cohorts as ranges.
func (b Backfill) Cohorts() []cohort.Range {
	rs := make([]cohort.Range, len(b.Spans))
	for i, s := range b.Spans {
		rs[i] = cohort.Range{First: s.First, Last: s.Last}
	}
	return cohort.Merge(rs)
}

// since returns when cohort c entered its phase, false if the backfill
// does not copy c.
func (b Backfill) since(c int) (time.Time, bool) {
	for _, s := range b.Spans {
		if c >= s.First && c <= s.Last {
			return s.Since, true
		}
	}
	return time.Time{}, false
}

// stops reports whether a key's touched mark (of cohort c, made at
// touchedAt, saying behind) stops the backfill or repair from writing
// new as old holds it: the application touched the key since (keeps);
// old is behind new for it (new holds the newer value); or the cohort is
// in read_new, where new is authoritative and only what the mark says new
// missed is copied (a repair: an entry of the log whose write new has
// taken since, or whose later write old missed, must not be undone).
func (b Backfill) stops(c int, touchedAt time.Time, behind string) bool {
	if b.keeps(c, touchedAt) || behind == oldSide.String() {
		return true
	}
	for _, s := range b.Spans {
		if c >= s.First && c <= s.Last && s.Phase == ReadNew {
			return behind != newSide.String()
		}
	}
	return false
}

// keeps reports whether a touched mark of cohort c made at touchedAt
// stops the backfill: the application wrote or deleted the record after
// its cohort entered the phase, so what the application did is newer than
// what the backfill read. A mark of a cohort the backfill does not copy
// stops it too (the record's user changed: leave the application's write).
func (b Backfill) keeps(c int, touchedAt time.Time) bool {
	since, ok := b.since(c)
	return !ok || touchedAt.After(since)
}

// ErrNotBackfillable is wrapped by PlanBackfill's refusals.
var ErrNotBackfillable = errors.New("cohorts cannot be backfilled")

// PlanBackfill reads migration's phases and returns the Backfill of
// cohorts: each must be in dual_write, held for rules' DualWriteHold (so
// every application instance writes both stores, and the backfill's read
// of old comes after every old-only write), unless force, which takes the
// cohorts in any phase (each span's Since still bounds the touched marks).
// The map is returned too. now should be the store's time (StoreTime),
// which the holds are measured in.
func PlanBackfill(ctx context.Context, st Store, migration string, cohorts []cohort.Range, force bool, rules Rules, now time.Time) (Backfill, *Map, error) {
	b := Backfill{Migration: migration}
	m, err := st.Load(ctx, migration)
	if err != nil {
		return b, nil, err
	}
	var refused []string
	for _, r := range cohort.Merge(cohorts) {
		if m.Buckets > 0 && r.Last >= m.Buckets {
			return b, m, fmt.Errorf("%w: cohorts %s are outside 0-%d", ErrNotBackfillable, r, m.Buckets-1)
		}
		for _, seg := range m.Segments(r) {
			switch {
			case force:
			case seg.Phase != DualWrite:
				refused = append(refused, fmt.Sprintf("%s are %s, not dual_write", seg.Range, seg.Phase))
				continue
			case now.Sub(seg.Since) < rules.hold():
				refused = append(refused, fmt.Sprintf("%s have been in dual_write %s of the %s needed (the application's phase-cache TTL plus a skew margin); retry after %s",
					seg.Range, now.Sub(seg.Since).Round(time.Second), rules.hold(), seg.Since.Add(rules.hold()).UTC().Format(time.RFC3339)))
				continue
			}
			b.Spans = append(b.Spans, BackfillSpan{First: seg.First, Last: seg.Last, Phase: seg.Phase, Since: seg.Since})
		}
	}
	if len(refused) > 0 {
		return b, m, fmt.Errorf("%w: cohorts %s (--force backfills them anyway, said so in the audit)", ErrNotBackfillable, strings.Join(refused, "; cohorts "))
	}
	return b, m, nil
}

// FinishBackfill moves a successful backfill's cohorts to backfilled, in
// one compare-and-set move, provided each is still in the phase it was
// planned in, entered at the same time: a cohort rolled back and moved
// again meanwhile may hold application writes the backfill skipped, and
// is refused. A move of other cohorts meanwhile is no obstacle (the check
// is made again on the newer map). force is the backfill's, said so in
// the audit.
func FinishBackfill(ctx context.Context, st Store, b Backfill, who, why string, force bool, rules Rules) (*Map, Audit, error) {
	for attempt := 0; ; attempt++ {
		m, err := st.Load(ctx, b.Migration)
		if err != nil {
			return nil, Audit{}, err
		}
		for _, s := range b.Spans {
			for _, seg := range m.Segments(cohort.Range{First: s.First, Last: s.Last}) {
				if seg.Phase != s.Phase || !seg.Since.Equal(s.Since) {
					return m, Audit{}, fmt.Errorf("%w: cohorts %s moved during the backfill (planned %s since %s, now %s since %s); run the backfill again",
						ErrConflict, seg.Range, s.Phase, s.Since.UTC().Format(time.RFC3339Nano), seg.Phase, seg.Since.UTC().Format(time.RFC3339Nano))
				}
			}
		}
		nm, a, err := st.Move(ctx, Move{Migration: b.Migration, Buckets: m.Buckets, Cohorts: b.Cohorts(), To: Backfilled, Version: m.Version, Who: who, Why: why, Force: force, Rules: rules})
		if errors.Is(err, ErrConflict) && attempt < 5 {
			continue // another move came first: judge again on the newer map
		}
		return nm, a, err
	}
}

// SpannerKeyText is the text of the key k of a row of table as the
// library names it in the touched marks, the repair log and messages:
// rekey's key notation, after the table's name for a child table
// ("Orders[7,1]"). The operator's jobs name rows by it too.
func SpannerKeyText(table string, child bool, k []rewrite.Value) string {
	if child {
		return table + rewrite.FormatKey(k, false)
	}
	return rewrite.FormatKey(k, false)
}

// SpannerBackfill returns the conditional commit (spannerdb.Writer's
// Conditional) of b into table t of client's database: one read-write
// transaction that reads the touched marks of the rows' keys and upserts
// the rows whose marks do not stop it (Backfill.keeps), returning how
// many it skipped.
func SpannerBackfill(client *spanner.Client, t *spannerdb.Table, b Backfill) func(ctx context.Context, rows []spannerdb.Row) (int, error) {
	return func(ctx context.Context, rows []spannerdb.Row) (int, error) {
		muts := make([]*spanner.Mutation, len(rows))
		for i, r := range rows {
			var err error
			if muts[i], err = spannerdb.MutationFor(r.Record, t, "upsert"); err != nil {
				return 0, status.Errorf(codes.InvalidArgument, "backfill: %s: %v", r.Record.Describe(), err)
			}
		}
		return spannerUnlessTouched(ctx, client, t, b, func(i int) *record.Record { return rows[i].Record }, muts)
	}
}

// SpannerRepairDeletes returns the conditional delete of a repair: one
// read-write transaction that deletes the rows of recs' keys from table t
// where their touched marks do not stop it (the application wrote the
// record since the repair began), returning how many it skipped.
func SpannerRepairDeletes(client *spanner.Client, t *spannerdb.Table, b Backfill) func(ctx context.Context, recs []record.Record) (int, error) {
	return func(ctx context.Context, recs []record.Record) (int, error) {
		muts := make([]*spanner.Mutation, len(recs))
		for i := range recs {
			k, err := spannerdb.SpannerKey(&recs[i], t)
			if err != nil {
				return 0, fmt.Errorf("repair: %s: %w", recs[i].Describe(), err)
			}
			muts[i] = spanner.Delete(t.Name, k)
		}
		return spannerUnlessTouched(ctx, client, t, b, func(i int) *record.Record { return &recs[i] }, muts)
	}
}

// spannerUnlessTouched applies, in one transaction, the mutations of the
// records whose touched marks do not stop b (muts[i] is rec(i)'s).
func spannerUnlessTouched(ctx context.Context, client *spanner.Client, t *spannerdb.Table, b Backfill, rec func(int) *record.Record, muts []*spanner.Mutation) (int, error) {
	keys := make([]string, len(muts))
	set := make([]spanner.KeySet, len(muts))
	for i := range muts {
		k, err := spannerdb.KeyOf(rec(i), t)
		if err != nil {
			return 0, status.Errorf(codes.InvalidArgument, "backfill: %s: %v", rec(i).Describe(), err)
		}
		keys[i] = SpannerKeyText(t.Name, t.Parent != "", k)
		set[i] = spanner.Key{b.Migration, keys[i]}
	}
	skipped := 0
	_, err := spannerdb.Transact(ctx, client, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		stop, behindNew := map[string]bool{}, map[string]bool{}
		err := txn.Read(ctx, SpannerTouchedTable, spanner.KeySets(set...), []string{"NewKey", "Cohort", "TouchedAt", "Behind"}).Do(func(row *spanner.Row) error {
			var key string
			var c int64
			var at time.Time
			var behind spanner.NullString
			if err := row.Columns(&key, &c, &at, &behind); err != nil {
				return err
			}
			stop[key] = b.stops(int(c), at, behind.StringVal)
			behindNew[key] = behind.StringVal == newSide.String()
			return nil
		})
		if err != nil {
			return err
		}
		var apply []*spanner.Mutation
		for i := range muts {
			if !stop[keys[i]] {
				apply = append(apply, muts[i])
				if behindNew[keys[i]] {
					// What new missed was in old before this was read.
					apply = append(apply, spanner.Update(SpannerTouchedTable, []string{"Migration", "NewKey", "Behind"}, []any{b.Migration, keys[i], spanner.NullString{}}))
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

// datastoreTouchedKey is the key of the touched mark of a new entity's
// key k: by the key's path, whatever its namespace (the marks live in
// the target namespace).
func datastoreTouchedKey(migration, namespace string, k rewrite.DatastoreKey) *datastore.Key {
	k.Namespace, k.Database = "", ""
	tk := datastore.NameKey(DatastoreTouchedKind, migration+"|"+k.String(), nil)
	tk.Namespace = namespace
	return tk
}

// DatastoreBackfill returns the conditional commit (datastoredb.Writer's
// Conditional) of b into client's database, the touched marks being in
// b.Namespace: one transaction that reads the marks of the entities' keys
// and upserts the entities whose marks do not stop it (Backfill.keeps),
// returning how many it skipped. A transaction that lost to a concurrent
// one fails as Aborted, which the writer retries.
func DatastoreBackfill(client *datastore.Client, b Backfill) func(ctx context.Context, ents []datastore.Entity) (int, error) {
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
func DatastoreRepairDeletes(client *datastore.Client, b Backfill) func(ctx context.Context, keys []*datastore.Key) (int, error) {
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
func datastoreUnlessTouched(ctx context.Context, client *datastore.Client, b Backfill, keys []*datastore.Key, apply func(tx *datastore.Transaction, keep []int) error) (int, error) {
	marks := make([]*datastore.Key, len(keys))
	for i, k := range keys {
		marks[i] = datastoreTouchedKey(b.Migration, b.Namespace, datastoredb.KeyFromDatastore(k))
	}
	skipped := 0
	_, err := client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
		got := make([]dsTouched, len(marks))
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
					got[i] = dsTouched{}
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
			if mark.Migration != "" && b.stops(int(mark.Cohort), mark.TouchedAt, mark.Behind) {
				continue
			}
			keep = append(keep, i)
			if mark.Behind == newSide.String() {
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
