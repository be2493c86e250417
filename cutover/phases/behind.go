package phases

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
)

// BehindOld and BehindNew are the values of a touched mark's Behind (the
// Spanner column, DatastoreMark's field): the store that missed a write
// the other took.
const (
	BehindOld = "old"
	BehindNew = "new"
)

// BehindClearer is a Store that can clear the touched marks' Behind
// (SpannerStore, DatastoreStore).
type BehindClearer interface {
	// ClearBehindOld clears Behind = "old" in the marks of cohorts last
	// touched before before: a reverse backfill that began then copied
	// new to old whole, so old is no longer behind for them. It returns
	// how many it cleared.
	ClearBehindOld(ctx context.Context, migration string, cohorts []cohort.Range, before time.Time) (int64, error)
}

// ClearBehindOld implements BehindClearer.
func (s SpannerStore) ClearBehindOld(ctx context.Context, migrationName string, cohorts []cohort.Range, before time.Time) (int64, error) {
	var total int64
	for _, r := range cohorts {
		_, err := spannerdb.Transact(ctx, s.Client, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			n, err := txn.Update(ctx, spanner.Statement{
				SQL:    "UPDATE " + SpannerTouchedTable + " SET Behind = NULL WHERE Migration = @m AND Cohort BETWEEN @a AND @b AND Behind = 'old' AND TouchedAt < @t",
				Params: map[string]any{"m": migrationName, "a": int64(r.First), "b": int64(r.Last), "t": before},
			})
			total += n
			return err
		})
		if err != nil {
			return total, fmt.Errorf("clearing the touched marks of cohorts %s: %w", r, err)
		}
	}
	return total, nil
}

// ClearBehindOld implements BehindClearer: the marks are keyed by the
// migration's name, so it reads the migration's marks by key range.
func (s DatastoreStore) ClearBehindOld(ctx context.Context, migrationName string, cohorts []cohort.Range, before time.Time) (int64, error) {
	from := datastore.NameKey(DatastoreTouchedKind, migrationName+"|", nil)
	to := datastore.NameKey(DatastoreTouchedKind, migrationName+"|\U0010ffff", nil)
	from.Namespace, to.Namespace = s.Namespace, s.Namespace
	q := datastore.NewQuery(DatastoreTouchedKind).Namespace(s.Namespace).FilterField("__key__", ">=", from).FilterField("__key__", "<", to)
	var marks []DatastoreMark
	keys, err := s.Client.GetAll(ctx, q, &marks)
	if err != nil {
		return 0, fmt.Errorf("reading the touched marks of %s: %w", migrationName, err)
	}
	var n int64
	for i, m := range marks {
		in := false
		for _, r := range cohorts {
			in = in || r.Contains(int(m.Cohort))
		}
		if !in || m.Behind != BehindOld || !m.TouchedAt.Before(before) {
			continue
		}
		k := keys[i]
		_, err := s.Client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
			var now DatastoreMark
			if err := tx.Get(k, &now); errors.Is(err, datastore.ErrNoSuchEntity) {
				return nil
			} else if err != nil {
				return err
			}
			if now.Behind != BehindOld || !now.TouchedAt.Before(before) {
				return nil
			}
			now.Behind = ""
			_, err := tx.Put(k, &now)
			return err
		})
		if err != nil {
			return n, fmt.Errorf("clearing the touched mark %s: %w", k, err)
		}
		n++
	}
	return n, nil
}
