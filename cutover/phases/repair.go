package phases

import (
	"context"
	"fmt"
	"sort"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cohort"
)

// RepairEntry is one entry of the repair log: an application call whose
// authoritative write succeeded and whose second write (Missed: "old" or
// "new") failed, so the stores differ on the record until a repair.
type RepairEntry struct {
	Cohort int
	// ID names the entry in the log.
	ID string
	// Op is "write" or "delete"; OldKey the record's old key, as the
	// library names it.
	Op, OldKey, Missed, Reason string
	LoggedAt                   time.Time
}

func (e RepairEntry) String() string {
	return fmt.Sprintf("%s %s missed %s at %s: %s", e.Op, e.OldKey, e.Missed, e.LoggedAt.UTC().Format(time.RFC3339), e.Reason)
}

// RepairLog is the repair log of a phase store (SpannerStore: table
// RekeyRepair; DatastoreStore: kind RekeyRepair).
type RepairLog interface {
	// Repairs returns a migration's entries, oldest first.
	Repairs(ctx context.Context, migration string) ([]RepairEntry, error)
	// ClearRepairs removes entries (a repair copied their records again).
	ClearRepairs(ctx context.Context, migration string, entries []RepairEntry) error
}

func sortRepairs(es []RepairEntry) {
	sort.Slice(es, func(i, j int) bool { return es[i].LoggedAt.Before(es[j].LoggedAt) })
}

// Repairs implements RepairLog.
func (s SpannerStore) Repairs(ctx context.Context, migration string) ([]RepairEntry, error) {
	var out []RepairEntry
	err := s.Client.Single().Query(ctx, spanner.Statement{
		SQL:    "SELECT Cohort, Id, Op, OldKey, Missed, Reason, LoggedAt FROM " + SpannerRepairTable + " WHERE Migration = @m",
		Params: map[string]any{"m": migration},
	}).Do(func(r *spanner.Row) error {
		var e RepairEntry
		var c int64
		var reason spanner.NullString
		if err := r.Columns(&c, &e.ID, &e.Op, &e.OldKey, &e.Missed, &reason, &e.LoggedAt); err != nil {
			return err
		}
		e.Cohort, e.Reason = int(c), reason.StringVal
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the repair log of %s: %w", migration, err)
	}
	sortRepairs(out)
	return out, nil
}

// ClearRepairs implements RepairLog.
func (s SpannerStore) ClearRepairs(ctx context.Context, migration string, entries []RepairEntry) error {
	if len(entries) == 0 {
		return nil
	}
	var ms []*spanner.Mutation
	for _, e := range entries {
		ms = append(ms, spanner.Delete(SpannerRepairTable, spanner.Key{migration, int64(e.Cohort), e.ID}))
	}
	_, err := s.Client.Apply(ctx, ms)
	return err
}

// Repairs implements RepairLog.
func (s DatastoreStore) Repairs(ctx context.Context, migration string) ([]RepairEntry, error) {
	var rs []DatastoreRepair
	keys, err := s.Client.GetAll(ctx, datastore.NewQuery(DatastoreRepairKind).Namespace(s.Namespace).FilterField("Migration", "=", migration), &rs)
	if err != nil {
		return nil, fmt.Errorf("reading the repair log of %s: %w", migration, err)
	}
	out := make([]RepairEntry, len(rs))
	for i, r := range rs {
		out[i] = RepairEntry{Cohort: int(r.Cohort), ID: keys[i].Name, Op: r.Op, OldKey: r.OldKey, Missed: r.Missed, Reason: r.Reason, LoggedAt: r.LoggedAt}
	}
	sortRepairs(out)
	return out, nil
}

// ClearRepairs implements RepairLog.
func (s DatastoreStore) ClearRepairs(ctx context.Context, migration string, entries []RepairEntry) error {
	var keys []*datastore.Key
	for _, e := range entries {
		k := datastore.NameKey(DatastoreRepairKind, e.ID, nil)
		k.Namespace = s.Namespace
		keys = append(keys, k)
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := s.Client.DeleteMulti(ctx, keys[:n]); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// missedRefused says which store's missed writes (BehindOld or
// BehindNew) refuse mv while the repair log holds entries of them: new_only reads new alone, which must
// not lack what old took; old reads old alone, which must not lack what
// new took while it was authoritative.
func missedRefused(mv Move) (string, bool) {
	switch {
	case mv.Force:
		return "", false
	case mv.To == NewOnly:
		return BehindNew, true
	case mv.To == Old:
		return BehindOld, true
	}
	return "", false
}

// missedRefusal refuses mv, for cohorts with n entries in the repair log
// of writes store missed.
func missedRefusal(mv Move, missed string, n int64) error {
	if n == 0 {
		return nil
	}
	if missed == BehindOld {
		return fmt.Errorf("%w: cohorts %s: %d repair-log entries of writes or deletes that old missed (new took them while it was authoritative); move the cohorts to read_new and run rekey repair for them first", ErrIllegal, cohort.Format(mv.Cohorts), n)
	}
	return fmt.Errorf("%w: cohorts %s: %d repair-log entries of writes or deletes that new missed (old took them while it was authoritative); run rekey repair for these cohorts first", ErrIllegal, cohort.Format(mv.Cohorts), n)
}
