package phases

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/spanner"
	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
)

// The Spanner tables of the phase store: a row per migration (its
// version and number of cohorts), its spans interleaved in it, and its
// audit records.
const (
	SpannerMigrationTable = "RekeyCutover"
	SpannerPhaseTable     = "RekeyCohortPhase"
	SpannerAuditTable     = "RekeyCohortAudit"
	// SpannerRepairTable is the repair log; SpannerTouchedTable marks,
	// per new key, the application's last write or delete of a record
	// whose cohort is between dual_write and read_new, with its commit
	// time, so that a backfill neither overwrites a newer write nor brings
	// back a deleted record (see the package doc).
	SpannerRepairTable  = "RekeyRepair"
	SpannerTouchedTable = "RekeyTouched"
)

// SpannerDDL creates the phase store's tables.
var SpannerDDL = []string{
	`CREATE TABLE RekeyCutover (
  Migration STRING(MAX) NOT NULL,
  Buckets INT64 NOT NULL,
  Version INT64 NOT NULL,
  UpdatedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp=true)
) PRIMARY KEY (Migration)`,
	`CREATE TABLE RekeyCohortPhase (
  Migration STRING(MAX) NOT NULL,
  FirstCohort INT64 NOT NULL,
  LastCohort INT64 NOT NULL,
  Phase STRING(16) NOT NULL,
  Since TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp=true),
  ChangedBy STRING(MAX),
  PrevPhase STRING(16)
) PRIMARY KEY (Migration, FirstCohort),
  INTERLEAVE IN PARENT RekeyCutover ON DELETE CASCADE`,
	`CREATE TABLE RekeyCohortAudit (
  Migration STRING(MAX) NOT NULL,
  Version INT64 NOT NULL,
  ChangedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp=true),
  Who STRING(MAX),
  Why STRING(MAX),
  Cohorts STRING(MAX) NOT NULL,
  FromPhase STRING(MAX) NOT NULL,
  ToPhase STRING(16) NOT NULL,
  Forced BOOL NOT NULL
) PRIMARY KEY (Migration, Version),
  INTERLEAVE IN PARENT RekeyCutover ON DELETE CASCADE`,
	`CREATE TABLE RekeyRepair (
  Migration STRING(MAX) NOT NULL,
  Cohort INT64 NOT NULL,
  Id STRING(36) NOT NULL,
  Op STRING(8) NOT NULL,
  OldKey STRING(MAX) NOT NULL,
  Missed STRING(8) NOT NULL,
  Reason STRING(MAX),
  LoggedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp=true)
) PRIMARY KEY (Migration, Cohort, Id)`,
	`CREATE TABLE RekeyTouched (
  Migration STRING(MAX) NOT NULL,
  NewKey STRING(MAX) NOT NULL,
  Cohort INT64 NOT NULL,
  Deleted BOOL NOT NULL,
  TouchedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp=true),
  Op STRING(36),
  Behind STRING(8)
) PRIMARY KEY (Migration, NewKey)`,
}

// spannerAddedColumns are the columns added to the phase store's tables
// since they were first created, with their definitions: CreateSpannerTables
// adds them to tables that lack them.
var spannerAddedColumns = []struct{ table, column, def string }{
	{"RekeyCohortPhase", "PrevPhase", "STRING(16)"},
	{"RekeyTouched", "Op", "STRING(36)"},
	{"RekeyTouched", "Behind", "STRING(8)"},
}

var (
	spannerMigrationColumns = []string{"Migration", "Buckets", "Version", "UpdatedAt"}
	spannerPhaseColumns     = []string{"Migration", "FirstCohort", "LastCohort", "Phase", "Since", "ChangedBy", "PrevPhase"}
	spannerAuditColumns     = []string{"Migration", "Version", "ChangedAt", "Who", "Why", "Cohorts", "FromPhase", "ToPhase", "Forced"}
)

// SpannerStore is a Store in a Spanner database's tables (SpannerDDL).
// Times are the database's: a move's spans and audit record carry its
// commit timestamp, and a move is judged at the transaction's
// CURRENT_TIMESTAMP().
type SpannerStore struct {
	Client *spanner.Client
}

// CreateSpannerTables creates the phase store's tables in database db
// (projects/P/instances/I/databases/D) where they are missing, and adds
// the columns that tables made by an earlier version lack; it returns
// the statements it ran.
func CreateSpannerTables(ctx context.Context, c *spanner.Client, db string) ([]string, error) {
	missing, err := MissingSpannerDDL(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("reading the tables of %s: %w", db, err)
	}
	if len(missing) == 0 {
		return nil, nil
	}
	admin, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("spanner admin: %w", err)
	}
	defer admin.Close()
	op, err := admin.UpdateDatabaseDdl(ctx, &databasepb.UpdateDatabaseDdlRequest{Database: db, Statements: missing})
	if err == nil {
		err = op.Wait(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("creating the phase store's tables in %s: %w", db, err)
	}
	return missing, nil
}

// MissingSpannerDDL is what CreateSpannerTables would run in c's
// database: the phase store's tables it lacks (the phase map, the audit,
// the repair log, the touched marks) and the columns its tables lack.
func MissingSpannerDDL(ctx context.Context, c *spanner.Client) ([]string, error) {
	have := map[string]bool{}
	err := c.Single().Query(ctx, spanner.Statement{SQL: "SELECT TABLE_NAME, COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = ''"}).Do(func(r *spanner.Row) error {
		var table, column string
		if err := r.Columns(&table, &column); err != nil {
			return err
		}
		have[strings.ToLower(table)] = true
		have[strings.ToLower(table+"."+column)] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	var missing []string
	for i, name := range []string{SpannerMigrationTable, SpannerPhaseTable, SpannerAuditTable, SpannerRepairTable, SpannerTouchedTable} {
		if !have[strings.ToLower(name)] {
			missing = append(missing, SpannerDDL[i])
		}
	}
	for _, ac := range spannerAddedColumns {
		if have[strings.ToLower(ac.table)] && !have[strings.ToLower(ac.table+"."+ac.column)] {
			missing = append(missing, fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", ac.table, ac.column, ac.def))
		}
	}
	return missing, nil
}

// noSpannerStore is the error of a read of a database without the phase
// store's tables (err: Spanner's).
func noSpannerStore(err error) error {
	return fmt.Errorf("%w: the database has no tables %s, %s, %s yet ('rekey cohort prepare' creates them): %w", ErrNoPhaseStore, SpannerMigrationTable, SpannerPhaseTable, SpannerAuditTable, err)
}

// spannerReader is what Load and Move read through.
type spannerReader interface {
	ReadRow(ctx context.Context, table string, key spanner.Key, columns []string) (*spanner.Row, error)
	Read(ctx context.Context, table string, keys spanner.KeySet, columns []string) *spanner.RowIterator
}

func spannerLoad(ctx context.Context, r spannerReader, migration string) (*Map, error) {
	m := &Map{Migration: migration}
	row, err := r.ReadRow(ctx, SpannerMigrationTable, spanner.Key{migration}, []string{"Buckets", "Version"})
	switch {
	case spanner.ErrCode(err) == codes.NotFound && strings.Contains(err.Error(), "Table not found"):
		return nil, noSpannerStore(err)
	case errors.Is(err, spanner.ErrRowNotFound): // no move yet
		return m, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", SpannerMigrationTable, err)
	}
	var buckets int64
	if err := row.Columns(&buckets, &m.Version); err != nil {
		return nil, err
	}
	m.Buckets = int(buckets)
	err = r.Read(ctx, SpannerPhaseTable, spanner.Key{migration}.AsPrefix(), spannerPhaseColumns).Do(func(row *spanner.Row) error {
		var mig, phase string
		var first, last int64
		var by, prev spanner.NullString
		var s Span
		if err := row.Columns(&mig, &first, &last, &phase, &s.Since, &by, &prev); err != nil {
			return err
		}
		p, err := ParsePhase(phase)
		if err != nil {
			return fmt.Errorf("%s %s cohorts %d-%d: %w", SpannerPhaseTable, migration, first, last, err)
		}
		s.Range, s.Phase, s.By = cohort.Range{First: int(first), Last: int(last)}, p, by.StringVal
		if prev.Valid {
			if s.Prev, err = ParsePhase(prev.StringVal); err != nil {
				return fmt.Errorf("%s %s cohorts %d-%d: %w", SpannerPhaseTable, migration, first, last, err)
			}
		}
		m.Spans = append(m.Spans, s)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", SpannerPhaseTable, err)
	}
	sort.Slice(m.Spans, func(i, j int) bool { return m.Spans[i].First < m.Spans[j].First })
	return m, nil
}

// LoadStale reads a migration's phase map as Load does, but in one
// single-use query at a timestamp up to maxStaleness old, so that it never
// waits on the transactions of moves, backfills and repairs (nor is
// refused by the emulator while they run, as a multi-use read-only
// transaction is). The map's ReadAt is the timestamp read at: the phase
// cache counts the map's age from it (see package cutover, "Phase
// cache").
func (s SpannerStore) LoadStale(ctx context.Context, migration string, maxStaleness time.Duration) (*Map, error) {
	type span struct {
		FirstCohort, LastCohort int64
		Phase                   string
		Since                   time.Time
		ChangedBy, PrevPhase    spanner.NullString
	}
	ro := s.Client.Single().WithTimestampBound(spanner.MaxStaleness(maxStaleness))
	defer ro.Close()
	m := &Map{Migration: migration}
	err := ro.Query(ctx, spanner.Statement{
		SQL: `SELECT c.Buckets, c.Version, ARRAY(SELECT AS STRUCT p.FirstCohort, p.LastCohort, p.Phase, p.Since, p.ChangedBy, p.PrevPhase
  FROM RekeyCohortPhase p WHERE p.Migration = c.Migration) AS Spans
FROM RekeyCutover c WHERE c.Migration = @m`,
		Params: map[string]any{"m": migration},
	}).Do(func(row *spanner.Row) error {
		var buckets int64
		var spans []*span
		if err := row.Columns(&buckets, &m.Version, &spans); err != nil {
			return err
		}
		m.Buckets = int(buckets)
		for _, e := range spans {
			p, err := ParsePhase(e.Phase)
			if err != nil {
				return fmt.Errorf("%s %s cohorts %d-%d: %w", SpannerPhaseTable, migration, e.FirstCohort, e.LastCohort, err)
			}
			sp := Span{Range: cohort.Range{First: int(e.FirstCohort), Last: int(e.LastCohort)}, Phase: p, Since: e.Since, By: e.ChangedBy.StringVal}
			if e.PrevPhase.Valid {
				if sp.Prev, err = ParsePhase(e.PrevPhase.StringVal); err != nil {
					return fmt.Errorf("%s %s cohorts %d-%d: %w", SpannerPhaseTable, migration, e.FirstCohort, e.LastCohort, err)
				}
			}
			m.Spans = append(m.Spans, sp)
		}
		return nil
	})
	if err != nil {
		if spanner.ErrCode(err) == codes.InvalidArgument && strings.Contains(err.Error(), "not found") {
			return nil, noSpannerStore(err)
		}
		return nil, fmt.Errorf("reading the phases of %s: %w", migration, err)
	}
	if m.ReadAt, err = ro.Timestamp(); err != nil {
		return nil, err
	}
	sort.Slice(m.Spans, func(i, j int) bool { return m.Spans[i].First < m.Spans[j].First })
	return m, nil
}

// Load implements Store: one strong read-only transaction.
func (s SpannerStore) Load(ctx context.Context, migration string) (*Map, error) {
	var m *Map
	err := spannerdb.ReadOnly(ctx, s.Client, func(ctx context.Context, txn *spanner.ReadOnlyTransaction) error {
		var err error
		m, err = spannerLoad(ctx, txn, migration)
		return err
	})
	return m, err
}

// errRefused aborts a transaction whose move was refused.
var errRefused = errors.New("move refused")

// Move implements Store.
func (s SpannerStore) Move(ctx context.Context, mv Move) (*Map, Audit, error) {
	if missed, ok := missedRefused(mv); ok {
		// Before the move's transaction, kept short (the emulator runs
		// one at a time): no entry of new missing a write can appear once
		// read_new has been held, nor of old missing one while old is
		// authoritative (see the package doc, "Missed writes").
		var n int64
		var err error
		for attempt := 0; ; attempt++ {
			// Single-use reads (the emulator refuses a multi-use read-only
			// transaction while read-write ones run), again when refused.
			if n, err = spannerMissed(ctx, s.Client, mv, missed); err == nil || !spannerdb.EmulatorAborted(err) || attempt >= 50 {
				break
			}
			time.Sleep(time.Duration(min(attempt+1, 10)) * 10 * time.Millisecond)
		}
		if err != nil {
			return nil, Audit{}, err
		}
		if err := missedRefusal(mv, missed, n); err != nil {
			return nil, Audit{}, err
		}
	}
	var m *Map
	var a Audit
	var refusal error
	ts, err := spannerdb.Transact(ctx, s.Client, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		refusal = nil
		var err error
		if m, err = spannerLoad(ctx, txn, mv.Migration); err != nil {
			return err
		}
		var now time.Time
		if err := txn.Query(ctx, spanner.Statement{SQL: "SELECT CURRENT_TIMESTAMP()"}).Do(func(r *spanner.Row) error { return r.Columns(&now) }); err != nil {
			return fmt.Errorf("reading the database's time: %w", err)
		}
		if a, refusal = m.apply(mv, now); refusal != nil {
			return errRefused
		}
		// The migration's row first: the spans and the audit record are
		// interleaved in it.
		muts := append(spannerRecord(m, a), spanner.Delete(SpannerPhaseTable, spanner.Key{mv.Migration}.AsPrefix()))
		for _, sp := range m.Spans {
			var since any = sp.Since
			if sp.fresh {
				since = spanner.CommitTimestamp
			}
			var prev spanner.NullString
			if sp.Prev != "" {
				prev = spanner.NullString{StringVal: string(sp.Prev), Valid: true}
			}
			muts = append(muts, spanner.Insert(SpannerPhaseTable, spannerPhaseColumns, []any{mv.Migration, int64(sp.First), int64(sp.Last), string(sp.Phase), since, sp.By, prev}))
		}
		return txn.BufferWrite(muts)
	})
	if refusal != nil {
		return nil, Audit{}, refusal
	}
	if err != nil {
		return nil, Audit{}, fmt.Errorf("moving cohorts of %s: %w", mv.Migration, err)
	}
	m.settle(ts)
	a.At = ts
	return m, a, nil
}

// spannerRecord is what every move and note writes besides the spans: the
// migration's row with its version, and the audit record.
func spannerRecord(m *Map, a Audit) []*spanner.Mutation {
	return []*spanner.Mutation{
		spanner.InsertOrUpdate(SpannerMigrationTable, spannerMigrationColumns, []any{m.Migration, int64(m.Buckets), m.Version, spanner.CommitTimestamp}),
		spanner.Insert(SpannerAuditTable, spannerAuditColumns, []any{a.Migration, a.Version, spanner.CommitTimestamp, a.Who, a.Why, a.Cohorts, a.From, a.toText(), a.Forced}),
	}
}

// Note implements Store.
func (s SpannerStore) Note(ctx context.Context, n Note) (Audit, error) {
	var a Audit
	var refusal error
	ts, err := spannerdb.Transact(ctx, s.Client, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		m, err := spannerLoad(ctx, txn, n.Migration)
		if err != nil {
			return err
		}
		if a, refusal = m.note(n); refusal != nil {
			return errRefused
		}
		return txn.BufferWrite(spannerRecord(m, a))
	})
	if refusal != nil {
		return Audit{}, refusal
	}
	if err != nil {
		return Audit{}, fmt.Errorf("recording the %s of cohorts of %s: %w", n.Action, n.Migration, err)
	}
	a.At = ts
	return a, nil
}

// Audits implements Store.
func (s SpannerStore) Audits(ctx context.Context, migration string) ([]Audit, error) {
	var out []Audit
	err := s.Client.Single().Read(ctx, SpannerAuditTable, spanner.Key{migration}.AsPrefix(), spannerAuditColumns).Do(func(r *spanner.Row) error {
		var a Audit
		var who, why spanner.NullString
		var to string
		if err := r.Columns(&a.Migration, &a.Version, &a.At, &who, &why, &a.Cohorts, &a.From, &to, &a.Forced); err != nil {
			return err
		}
		a.Who, a.Why = who.StringVal, why.StringVal
		a.setTo(to)
		out = append(out, a)
		return nil
	})
	if spanner.ErrCode(err) == codes.NotFound && strings.Contains(err.Error(), "Table not found") {
		return nil, noSpannerStore(err)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", SpannerAuditTable, err)
	}
	return out, nil
}

// spannerMissed counts the repair-log entries of mv's cohorts that say
// missed (BehindOld or BehindNew) missed a write or delete the other took.
func spannerMissed(ctx context.Context, c *spanner.Client, mv Move, missed string) (int64, error) {
	var total int64
	for _, r := range mv.Cohorts {
		var n int64
		err := c.Single().Query(ctx, spanner.Statement{
			SQL:    "SELECT COUNT(*) FROM " + SpannerRepairTable + " WHERE Migration = @m AND Cohort BETWEEN @a AND @b AND Missed = @s",
			Params: map[string]any{"m": mv.Migration, "a": int64(r.First), "b": int64(r.Last), "s": missed},
		}).Do(func(row *spanner.Row) error { return row.Columns(&n) })
		if err != nil {
			return 0, err // unwrapped: the emulator's refusal must reach ReadOnly's retry
		}
		total += n
	}
	return total, nil
}
