package source

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
	"github.com/rekeyio/rekey/transforms"
)

// SpannerConfig configures a Spanner source.
type SpannerConfig struct {
	Project  string `json:"project"`
	Instance string `json:"instance"`
	Database string `json:"database"`
	Table    string `json:"table"`
	// Columns is a projection; it must include the key columns. Empty
	// means every column except generated ones outside the key (the
	// target computes its own).
	Columns []string `json:"columns,omitempty"`
	// Filter is a GoogleSQL condition for a WHERE clause, e.g.
	// "Region = 3 AND Deleted IS NULL".
	Filter string `json:"filter,omitempty"`
	// ReadTime, if set, is the timestamp the read is at (the database as
	// it was then); zero is a strong read at the moment the read starts.
	// Reads of several tables at one ReadTime see one snapshot.
	ReadTime time.Time `json:"read_time,omitzero"`
	// SpareFields is room for more fields that each record gets beyond
	// its columns (the fields the rewrite adds, which it then adds in
	// place: transforms.RewriteOwning).
	SpareFields int `json:"spare_fields,omitempty"`
}

// bound is the timestamp bound of cfg's read.
func (c SpannerConfig) bound() spanner.TimestampBound {
	if c.ReadTime.IsZero() {
		return spanner.StrongRead()
	}
	return spanner.ReadTimestamp(c.ReadTime)
}

// readTimeHint explains a read error that may come from a read time
// older than the database keeps.
func (c SpannerConfig) readTimeHint(err error) string {
	if c.ReadTime.IsZero() {
		return ""
	}
	switch spanner.ErrCode(err) {
	case codes.InvalidArgument, codes.FailedPrecondition:
		return fmt.Sprintf(" (the read is at read time %s: the database keeps old versions for its version_retention_period, an hour by default; for an older or longer read raise it (ALTER DATABASE ... SET OPTIONS (version_retention_period = '7d')), or read without one: source.read_time: none)", c.ReadTime.Format(time.RFC3339Nano))
	}
	return ""
}

// DatabasePath returns projects/P/instances/I/databases/D.
func (c SpannerConfig) DatabasePath() string {
	return spannerdb.DatabasePath(c.Project, c.Instance, c.Database)
}

// Metrics of the Spanner source besides transforms.Read (namespace rekey).
var (
	// SpannerPartitions counts the partitions PartitionQuery returned.
	SpannerPartitions = beam.NewCounter("rekey", "spanner_read_partitions")
	// SpannerTxnCleanups counts batch transactions cleaned up after the
	// read (one per run).
	SpannerTxnCleanups = beam.NewCounter("rekey", "spanner_read_txn_cleanups")
)

func init() {
	register.DoFn3x1[context.Context, []byte, func(int64, []byte), error](&partitionSpannerFn{})
	register.Emitter2[int64, []byte]()
	register.DoFn6x1[context.Context, int64, func(*[]byte) bool, func(record.Batch), func(string), func([]byte), error](&readSpannerFn{})
	register.Iter1[[]byte]()
	register.Emitter1[[]byte]()
	register.Emitter1[string]()
	register.Function2x0(keyForCleanup)
	register.Emitter2[int, []byte]()
	register.DoFn3x1[context.Context, int, func(*[]byte) bool, error](&cleanupSpannerFn{})
}

// Spanner reads a table (or a projection and filter of it) into record
// batches, all at one timestamp, in parallel:
//
//  1. a single DoFn opens a BatchReadOnlyTransaction (at cfg.ReadTime, or
//     a strong read: one timestamp for the whole read), runs PartitionQuery over
//     SELECT columns FROM table [WHERE filter] and emits each partition
//     with the transaction's ID, both serialized, keyed by partition
//     number;
//  2. a GroupByKey spreads the partitions over workers (beam.Reshuffle
//     would do nothing on prism);
//  3. a read DoFn reopens the transaction from its ID, executes its
//     partition and emits batches of at most transforms.BatchSize records
//     (record.Batch). A row that cannot be converted becomes a dead
//     letter (stage "read") instead of failing the job;
//  4. once every partition is read (a GroupByKey on one key of the read
//     stage's completions), the transaction is reopened by ID and
//     cleaned up.
//
// The read timestamp must stay within the database's version retention
// period (one hour by default) until the last partition is read.
func Spanner(s beam.Scope, cfg SpannerConfig) (batches, deadLetters beam.PCollection) {
	s = s.Scope("source.Spanner")
	parts := beam.ParDo(s, &partitionSpannerFn{Cfg: cfg}, beam.Impulse(s))
	grouped := beam.GroupByKey(s, parts)
	batches, deadLetters, done := beam.ParDo3(s, &readSpannerFn{Cfg: cfg}, grouped)
	cleanup := beam.GroupByKey(s, beam.ParDo(s, keyForCleanup, done))
	beam.ParDo0(s, &cleanupSpannerFn{Cfg: cfg}, cleanup)
	return batches, deadLetters
}

// SelectSQL returns the query the source partitions for table t.
func SelectSQL(t *spannerdb.Table, cfg SpannerConfig) (string, error) {
	var cols []string
	if len(cfg.Columns) == 0 {
		for _, c := range t.Columns {
			if !c.Generated || t.Key.Index(c.Name) >= 0 {
				cols = append(cols, c.Name)
			}
		}
	} else {
		for _, name := range cfg.Columns {
			c := t.Column(name)
			if c == nil {
				return "", fmt.Errorf("spanner source: column %s not in table %s", name, t.Name)
			}
			cols = append(cols, c.Name)
		}
		for _, k := range t.Key.Columns {
			found := false
			for _, c := range cols {
				found = found || strings.EqualFold(c, k.Name)
			}
			if !found {
				return "", fmt.Errorf("spanner source: columns %v leave out key column %s of table %s; a projection must keep the key", cfg.Columns, k.Name, t.Name)
			}
		}
	}
	for i, c := range cols {
		cols[i] = rewrite.QuoteIdent(c)
	}
	sql := "SELECT " + strings.Join(cols, ", ") + " FROM " + rewrite.QuoteIdent(t.Name)
	if f := strings.TrimSpace(cfg.Filter); f != "" {
		sql += " WHERE (" + f + ")"
	}
	return sql, nil
}

// sharedClient is this process's client of db for the DoFns of reads
// in configuration variant (newClient's), and its release
// (spannerdb.Shared). The readers and the cleanup only use the batch
// transactions by their ids.
//
// The planning of a read (one per table of a job) opens a client of its
// own and closes it when it is done (partitionSpannerFn): it reads the
// schema and begins the batch transaction on that client's multiplexed
// session, and on the emulator a transaction begun on a session ends the
// session's older ones — on a client shared with another table's
// planning, or another job's in the same process (two cohort jobs at
// once), a schema read or a second begin would end the batch transaction
// the readers still use ("Invalid transaction ID. Transaction ID must be
// >= …"). Closing the client leaves its session, and the transaction on
// it, to the readers (the client deletes no multiplexed session), and
// keeps a process that runs job after job from holding a client per
// planning.
func sharedClient(db, variant string) (*spanner.Client, func(), error) {
	return spannerdb.Shared(db, variant, func(ctx context.Context) (*spanner.Client, error) { return newClient(ctx, db) })
}

// newClient opens a client for a read. Partitions are executed on the
// batch transaction's own session, so the client keeps no idle sessions.
func newClient(ctx context.Context, db string) (*spanner.Client, error) {
	c, err := spanner.NewClientWithConfig(ctx, db, spanner.ClientConfig{
		SessionPoolConfig: spanner.SessionPoolConfig{MinOpened: 0, MaxIdle: 0},
	})
	if err != nil {
		return nil, fmt.Errorf("spanner client for %s: %w", db, err)
	}
	return c, nil
}

// partitionSpannerFn plans the read: transaction, query, partitions.
type partitionSpannerFn struct {
	Cfg SpannerConfig `json:"cfg"`
}

func (f *partitionSpannerFn) ProcessElement(ctx context.Context, _ []byte, emit func(int64, []byte)) (err error) {
	db := f.Cfg.DatabasePath()
	client, err := newClient(ctx, db) // its own, closed when done: see sharedClient
	if err != nil {
		return err
	}
	defer client.Close()
	t, err := spannerdb.ReadTable(ctx, client, f.Cfg.Table)
	if err != nil {
		return fmt.Errorf("spanner source: %w", err)
	}
	sql, err := SelectSQL(t, f.Cfg)
	if err != nil {
		return err
	}
	txn, err := client.BatchReadOnlyTransaction(ctx, f.Cfg.bound())
	if err != nil {
		return fmt.Errorf("spanner source: begin batch read of %s: %w%s", db, err, f.Cfg.readTimeHint(err))
	}
	defer func() {
		if err != nil {
			txn.Cleanup(ctx) // no read stage will run
		} else {
			txn.Close() // the read stages go on with the transaction
		}
	}()
	parts, err := txn.PartitionQuery(ctx, spanner.Statement{SQL: sql}, spanner.PartitionOptions{})
	if err != nil {
		return fmt.Errorf("spanner source: partition %q: %w%s", sql, err, f.Cfg.readTimeHint(err))
	}
	if len(parts) == 0 {
		return fmt.Errorf("spanner source: PartitionQuery of %q returned no partitions", sql)
	}
	tid, err := txn.ID.MarshalBinary()
	if err != nil {
		return fmt.Errorf("spanner source: serialize transaction id: %w", err)
	}
	for i, p := range parts {
		pb, err := p.MarshalBinary()
		if err != nil {
			return fmt.Errorf("spanner source: serialize partition %d: %w", i, err)
		}
		emit(int64(i), encodePartition(partition{Txn: tid, Partition: pb, Table: t.Name}))
	}
	SpannerPartitions.Inc(ctx, int64(len(parts)))
	return nil
}

// partition is one unit of read work: a serialized transaction ID and
// partition, and the table name the records carry.
type partition struct {
	Txn, Partition []byte
	Table          string
}

func encodePartition(p partition) []byte {
	b := make([]byte, 0, len(p.Txn)+len(p.Partition)+len(p.Table)+15)
	for _, f := range [][]byte{p.Txn, p.Partition, []byte(p.Table)} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

func decodePartition(b []byte) (partition, error) {
	var fields [3][]byte
	for i := range fields {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return partition{}, errors.New("spanner source: corrupt partition element")
		}
		fields[i], b = b[k:k+int(n)], b[k+int(n):]
	}
	return partition{Txn: fields[0], Partition: fields[1], Table: string(fields[2])}, nil
}

// readSpannerFn executes partitions.
type readSpannerFn struct {
	Cfg     SpannerConfig `json:"cfg"`
	client  *spanner.Client
	release func()
}

func (f *readSpannerFn) Setup(ctx context.Context) error {
	c, release, err := sharedClient(f.Cfg.DatabasePath(), "source")
	f.client, f.release = c, release
	return err
}

func (f *readSpannerFn) Teardown() {
	if f.release != nil {
		f.release()
	}
}

func (f *readSpannerFn) ProcessElement(ctx context.Context, _ int64, values func(*[]byte) bool, emit func(record.Batch), dead func(string), done func([]byte)) error {
	var elem []byte
	for values(&elem) {
		p, err := decodePartition(elem)
		if err != nil {
			return err
		}
		if err := f.read(ctx, p, emit, dead); err != nil {
			return err
		}
		done(p.Txn)
	}
	return nil
}

func (f *readSpannerFn) read(ctx context.Context, p partition, emit func(record.Batch), dead func(string)) error {
	var tid spanner.BatchReadOnlyTransactionID
	if err := tid.UnmarshalBinary(p.Txn); err != nil {
		return fmt.Errorf("spanner source: transaction id: %w", err)
	}
	var part spanner.Partition
	if err := part.UnmarshalBinary(p.Partition); err != nil {
		return fmt.Errorf("spanner source: partition: %w", err)
	}
	txn := f.client.BatchReadOnlyTransactionFromID(tid)
	defer txn.Close()
	source := "spanner:" + f.Cfg.DatabasePath() + "/" + p.Table
	if err := convertRows(ctx, txn.Execute(ctx, &part).Do, p.Table, source, f.Cfg.SpareFields, emit, dead); err != nil {
		// The rows emitted so far are lost with the failed bundle; the
		// runner retries the whole partition.
		return fmt.Errorf("spanner source: read partition of %s: %w%s", p.Table, err, f.Cfg.readTimeHint(err))
	}
	return nil
}

// convertRows converts the rows rows yields into records of table and
// emits them in batches of at most transforms.BatchSize; a row that does
// not convert is dead-lettered. Both count as read.
func convertRows(ctx context.Context, rows func(func(*spanner.Row) error) error, table, source string, spare int, emit func(record.Batch), dead func(string)) error {
	t := &spannerdb.Table{Name: table}
	batch := make([]record.Record, 0, transforms.BatchSize)
	flush := func() {
		if len(batch) > 0 {
			n := len(batch)
			emit(record.Batch{Recs: batch})
			transforms.CountRead(ctx, int64(n))
			batch = make([]record.Record, 0, transforms.BatchSize) // the emitted one is its consumers'
		}
	}
	err := rows(func(row *spanner.Row) error {
		rec, err := spannerdb.RowToRecordSpare(row, t, spare)
		if err != nil {
			dead(record.NewDeadLetter(record.StageRead, source, &rec, err))
			transforms.CountRead(ctx, 1)
			transforms.CountDeadLettered(ctx, 1)
			return nil
		}
		batch = append(batch, rec)
		if len(batch) == transforms.BatchSize {
			flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	flush()
	return nil
}

// keyForCleanup brings every completion to one key.
func keyForCleanup(txn []byte, emit func(int, []byte)) { emit(0, txn) }

// cleanupSpannerFn cleans up the batch transaction once all partitions
// are read.
type cleanupSpannerFn struct {
	Cfg     SpannerConfig `json:"cfg"`
	client  *spanner.Client
	release func()
}

func (f *cleanupSpannerFn) Setup(ctx context.Context) error {
	c, release, err := sharedClient(f.Cfg.DatabasePath(), "source")
	f.client, f.release = c, release
	return err
}

func (f *cleanupSpannerFn) Teardown() {
	if f.release != nil {
		f.release()
	}
}

func (f *cleanupSpannerFn) ProcessElement(ctx context.Context, _ int, txns func(*[]byte) bool) error {
	seen := map[string]bool{}
	var b []byte
	for txns(&b) {
		if seen[string(b)] {
			continue
		}
		seen[string(b)] = true
		var tid spanner.BatchReadOnlyTransactionID
		if err := tid.UnmarshalBinary(b); err != nil {
			return fmt.Errorf("spanner source: transaction id: %w", err)
		}
		f.client.BatchReadOnlyTransactionFromID(tid).Cleanup(ctx)
		SpannerTxnCleanups.Inc(ctx, 1)
	}
	return nil
}

// CountSpanner counts the rows of cfg's table where its filter holds (a
// single-use strong read), for sizing a sample before the read.
func CountSpanner(ctx context.Context, cfg SpannerConfig) (int64, error) {
	c, err := newClient(ctx, cfg.DatabasePath())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	sql := "SELECT COUNT(*) FROM " + rewrite.QuoteIdent(cfg.Table)
	if f := strings.TrimSpace(cfg.Filter); f != "" {
		sql += " WHERE (" + f + ")"
	}
	var n int64
	err = c.Single().Query(ctx, spanner.Statement{SQL: sql}).Do(func(r *spanner.Row) error { return r.Column(0, &n) })
	if err != nil {
		return 0, fmt.Errorf("spanner source: counting the rows of %s: %w", cfg.Table, err)
	}
	return n, nil
}
