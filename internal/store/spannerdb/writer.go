package spannerdb

import (
	"context"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/internal/write/retry"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/record"
)

// Spanner's limits per commit, and the Writer's defaults below them.
const (
	// MaxCommitMutations is Spanner's limit of mutations per commit: each
	// written column of each row counts once (the "cells"), and so does
	// each secondary index entry the write changes.
	MaxCommitMutations = 80_000
	// MaxCommitBytes is Spanner's limit on the size of a commit (100 MiB).
	MaxCommitBytes = 100 << 20

	// DefaultMaxMutations, DefaultMaxBytes and DefaultMaxRows are Beam
	// Java SpannerIO's batch bounds: 5,000 cells leaves 16x headroom under
	// the 80,000-mutation limit for index entries; 1 MiB keeps commits
	// small and quick to retry, far under the 100 MB limit; 500 rows keeps
	// a commit's key range narrow enough to touch few splits.
	DefaultMaxMutations = 5_000
	DefaultMaxBytes     = 1 << 20
	DefaultMaxRows      = 500
)

// Row is one row of a commit: the record and the mutation made from it.
type Row struct {
	Record   *record.Record
	Mutation *spanner.Mutation
}

// CommitFunc applies the mutations of rows in one commit: with replay
// protection (Apply) when insert, at least once otherwise (upserts and
// deletes are idempotent). Rows must not be modified.
type CommitFunc func(ctx context.Context, insert bool, rows []Row) error

// ReadFunc reads columns of the rows of keys in table, calling f for each
// row found.
type ReadFunc func(ctx context.Context, table string, keys spanner.KeySet, columns []string, f func(*spanner.Row) error) error

// ClientCommit commits with c.Apply: spanner.ApplyAtLeastOnce for upserts
// and deletes (one RPC; a replay rewrites the same values, or deletes
// again), Apply's replay protection
// for inserts (so an insert is never refused because of its own retried
// RPC).
func ClientCommit(c *spanner.Client) CommitFunc {
	return func(ctx context.Context, insert bool, rows []Row) error {
		ms := make([]*spanner.Mutation, len(rows))
		for i := range rows {
			ms[i] = rows[i].Mutation
		}
		var opts []spanner.ApplyOption
		if !insert {
			opts = append(opts, spanner.ApplyAtLeastOnce())
		}
		_, err := c.Apply(ctx, ms, opts...)
		return err
	}
}

// ClientRead reads with a single-use read-only transaction of c.
func ClientRead(c *spanner.Client) ReadFunc {
	return func(ctx context.Context, table string, keys spanner.KeySet, columns []string, f func(*spanner.Row) error) error {
		return c.Single().Read(ctx, table, keys, columns).Do(f)
	}
}

// Writer writes records to one Spanner table in commits bounded by
// MaxMutations cells (columns x rows), MaxBytes estimated bytes and
// MaxRows rows (a single row over a bound is committed alone). See the
// package doc, "Writing", for what it does with a failed commit and how it
// may be used concurrently.
type Writer struct {
	// Table is the target table's schema (ReadTable).
	Table *Table
	// Mode is storewrite.ModeUpsert (the default when empty),
	// storewrite.ModeInsert, or storewrite.ModeDelete: each record's row
	// is deleted by its primary key (the other fields are not read), a
	// row that is not stored being no error; the deletes are counted in
	// the Outcome's Deleted.
	Mode string
	// MaxMutations, MaxBytes and MaxRows bound a commit; 0 takes
	// DefaultMaxMutations, DefaultMaxBytes and DefaultMaxRows, and
	// MaxMutations and MaxBytes are clamped to MaxCommitMutations and
	// MaxCommitBytes.
	MaxMutations, MaxBytes, MaxRows int
	// Source names the target in dead letters.
	Source string

	// Commit and Read reach the store; NewWriter sets them to a client's
	// Apply and Single().Read. Tests replace them (to fake the store or to
	// inject faults around the real one).
	Commit CommitFunc
	Read   ReadFunc
	// Conditional, if set, commits instead of Commit, always as upserts:
	// a commit that may leave some rows unwritten on purpose, returning
	// how many (a cohort backfill leaves a row the application wrote or
	// deleted since it was read; see operator.SpannerBackfill). It must be
	// one transaction, so that a retry after an unknown outcome decides
	// again. It is not used in delete mode.
	Conditional func(ctx context.Context, rows []Row) (skipped int, err error)

	// Retry is the backoff of commits failing with a transient error
	// (zero fields take retry's defaults); Throttle, if set, is consulted
	// before each attempt and told its outcome.
	Retry    retry.Policy
	Throttle retry.Throttle
	// Slots, if set, is a semaphore every commit holds while it runs (its
	// retries included, the wait for it not part of any attempt's
	// deadline): the cap of commits in flight shared by all who hold it.
	Slots chan struct{}
	// Pacer, if set, paces the commits under a ramp-up: a batch is sent in
	// commits of at most Pacer.Size rows, sized as each goes, and each
	// commit waits for its budget right before it is sent (holding its
	// slot, so commits queued for a slot do not go out together).
	Pacer storewrite.Pacer

	pending Batch
}

// Batch is the converted rows of one commit.
type Batch struct {
	rows         []row
	cells, bytes int
}

// Len returns the rows of b.
func (b *Batch) Len() int { return len(b.rows) }

// row is a converted record waiting for its commit.
type row struct {
	rec   record.Record
	m     *spanner.Mutation
	cells int
	size  int
}

// NewWriter reads table's schema and returns a Writer on it committing
// through c.
func NewWriter(ctx context.Context, c *spanner.Client, table string) (*Writer, error) {
	t, err := ReadTable(ctx, c, table)
	if err != nil {
		return nil, err
	}
	return &Writer{Table: t, Commit: ClientCommit(c), Read: ClientRead(c)}, nil
}

func (w *Writer) insert() bool { return w.Mode == storewrite.ModeInsert }

func (w *Writer) deletes() bool { return w.Mode == storewrite.ModeDelete }

func bound(v, def, most int) int {
	switch {
	case v <= 0:
		return def
	case v > most:
		return most
	}
	return v
}

func (w *Writer) maxMutations() int {
	return bound(w.MaxMutations, DefaultMaxMutations, MaxCommitMutations)
}
func (w *Writer) maxBytes() int { return bound(w.MaxBytes, DefaultMaxBytes, MaxCommitBytes) }
func (w *Writer) maxRows() int  { return bound(w.MaxRows, DefaultMaxRows, int(^uint(0)>>1)) }

// Add converts rec into a mutation and buffers it. When rec does not fit
// in the buffered batch, that batch is returned, full, for the caller to
// commit (WriteBatch), and rec starts the next one; otherwise Add returns
// nil. A record that does not convert (a column the table lacks, a missing
// NOT NULL column, a string longer than its column...) is dead-lettered
// into out at once.
func (w *Writer) Add(rec *record.Record, out *storewrite.Outcome) *Batch {
	m, err := MutationFor(rec, w.Table, w.Mode)
	if err != nil {
		out.DeadLetter(w.Source, rec, err)
		return nil
	}
	r := row{rec: *rec, m: m, cells: writtenColumns(rec, w.Table), size: recordSize(rec)}
	if w.deletes() {
		// A delete of a row is one mutation (plus its index entries, as
		// for a write) and carries only the key.
		r.cells, r.size = 1, keySize(rec, w.Table)
	}
	var full *Batch
	p := &w.pending
	if len(p.rows) > 0 && (p.cells+r.cells > w.maxMutations() || p.bytes+r.size > w.maxBytes() || len(p.rows)+1 > w.maxRows()) {
		full = w.Cut()
	}
	p.rows = append(p.rows, r)
	p.cells += r.cells
	p.bytes += r.size
	return full
}

// Cut returns the buffered batch, nil when there is none, and empties the
// buffer.
func (w *Writer) Cut() *Batch {
	if len(w.pending.rows) == 0 {
		return nil
	}
	b := w.pending
	w.pending = Batch{rows: make([]row, 0, len(b.rows))}
	return &b
}

// Reset drops the buffered rows without writing them.
func (w *Writer) Reset() { w.pending = Batch{rows: w.pending.rows[:0]} }

// Buffered returns how many rows wait for the next Cut.
func (w *Writer) Buffered() int { return len(w.pending.rows) }

// Write converts recs and commits them, batch after batch, with what was
// buffered before; it returns when all are written or refused, or with the
// error of a commit that failed for a reason not the rows'.
func (w *Writer) Write(ctx context.Context, recs []record.Record) (storewrite.Outcome, error) {
	var out storewrite.Outcome
	for i := range recs {
		if b := w.Add(&recs[i], &out); b != nil {
			o, err := w.WriteBatch(ctx, b)
			out.Merge(o)
			if err != nil {
				w.Reset()
				return out, err
			}
		}
	}
	o, err := w.WriteBatch(ctx, w.Cut())
	out.Merge(o)
	return out, err
}

// WriteBatch commits b (nil: nothing), isolating the rows at fault, and
// returns what it did. It reads only the Writer's configuration, so
// batches may be written on goroutines of their own, each with its own
// Outcome, while Add and Cut go on.
func (w *Writer) WriteBatch(ctx context.Context, b *Batch) (storewrite.Outcome, error) {
	var out storewrite.Outcome
	if b == nil {
		return out, nil
	}
	h := storewrite.Halves[row]{
		Commit: func(ctx context.Context, rows []row) error { return w.commit(ctx, rows, &out) },
		Settle: func(ctx context.Context, rows []row, err error) ([]row, bool, error) {
			if !w.insert() || storewrite.Code(err) != codes.AlreadyExists {
				return nil, false, nil
			}
			// A re-run, or a replay: settle every existing row with one
			// read instead of isolating them one by one.
			rest, serr := w.settleExisting(ctx, rows, err, &out)
			if serr != nil {
				return nil, false, serr
			}
			// None of them exists (written meanwhile by someone else?):
			// isolate.
			return rest, len(rest) < len(rows), nil
		},
		Refuse: func(r row, err error) { out.DeadLetter(w.Source, &r.rec, err) },
		Split:  func() { out.Splits++ },
		Fail: func(n int, err error) error {
			return fmt.Errorf("commit of %d rows to %s failed for a reason that is not the row's: %w", n, w.Table.Name, err)
		},
	}
	err := storewrite.Chunks(b.rows, w.Pacer, func(rows []row) error { return h.Write(ctx, rows) })
	return out, err
}

// commit commits rows under the slots, the retry policy and the throttle,
// recording what happened in out.
func (w *Writer) commit(ctx context.Context, rows []row, out *storewrite.Outcome) error {
	rs := make([]Row, len(rows))
	cells, size := 0, 0
	for i := range rows {
		rs[i] = Row{Record: &rows[i].rec, Mutation: rows[i].m}
		cells += rows[i].cells
		size += rows[i].size
	}
	start := time.Now()
	if w.Slots != nil {
		select {
		case w.Slots <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("waiting to commit to %s: %w", w.Table.Name, ctx.Err())
		}
	}
	paced := out.Paced
	if err := storewrite.Pace(ctx, w.Pacer, len(rows), out); err != nil {
		if w.Slots != nil {
			<-w.Slots
		}
		return fmt.Errorf("committing to %s: %w", w.Table.Name, err)
	}
	skipped := 0
	err := storewrite.Retry(ctx, w.Retry, w.Throttle, out, func(actx context.Context) (err error) {
		if w.Conditional != nil && !w.deletes() {
			skipped, err = w.Conditional(actx, rs)
			return err
		}
		return w.Commit(actx, w.insert(), rs)
	})
	if w.Slots != nil {
		<-w.Slots
	}
	out.Commits = append(out.Commits, storewrite.Commit{Records: len(rows), Mutations: cells, Bytes: size, Took: time.Since(start) - (out.Paced - paced), OK: err == nil})
	switch {
	case err != nil:
	case w.deletes():
		out.Deleted += len(rows)
	default:
		out.Written += len(rows) - skipped
		out.Skipped += skipped
	}
	return err
}

// settleExisting reads the stored rows of rows' keys at once, after an
// insert met existing rows: a row stored with exactly the values being
// written counts as written (an earlier run or attempt wrote it), one
// stored with other values is dead-lettered; the rows not stored are
// returned, to commit again.
func (w *Writer) settleExisting(ctx context.Context, rows []row, commitErr error, out *storewrite.Outcome) ([]row, error) {
	t := w.Table
	wants := make([]record.Record, len(rows))
	keys := make([]string, len(rows))
	var set []spanner.KeySet
	var cols []string
	seen := map[string]bool{}
	for i := range rows {
		want, err := Normalize(&rows[i].rec, t)
		if err != nil {
			return nil, err
		}
		key, err := SpannerKey(&want, t)
		if err != nil {
			return nil, err
		}
		wants[i], keys[i] = want, key.String()
		set = append(set, key)
		for _, fd := range want.Fields {
			if l := strings.ToLower(fd.Name); !seen[l] {
				seen[l] = true
				cols = append(cols, fd.Name)
			}
		}
	}
	for _, c := range t.Key.Columns {
		if l := strings.ToLower(c.Name); !seen[l] {
			seen[l] = true
			cols = append(cols, c.Name)
		}
	}
	stored := map[string]record.Record{}
	err := w.Read(ctx, t.Name, spanner.KeySets(set...), cols, func(r *spanner.Row) error {
		got, err := RowToRecord(r, t)
		if err != nil {
			return err
		}
		key, err := SpannerKey(&got, t)
		if err != nil {
			return err
		}
		stored[key.String()] = got
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading back existing rows of %s: %w", t.Name, err)
	}
	rest := rows[:0:0]
	same := 0
	for i := range rows {
		got, ok := stored[keys[i]]
		switch {
		case !ok:
			rest = append(rest, rows[i])
		case record.Same(pick(&got, &wants[i]), &wants[i]):
			same++
		default:
			out.DeadLetter(w.Source, &rows[i].rec,
				fmt.Errorf("insert: row %s of %s already exists with other values (%s: %w)", keys[i], t.Name, spanner.ErrCode(commitErr), commitErr))
		}
	}
	out.Existing += same
	out.Written += same
	return rest, nil
}

// pick returns got's fields named as want's, in want's order (a field
// got lacks is left out, so the comparison fails).
func pick(got, want *record.Record) *record.Record {
	out := &record.Record{Table: got.Table}
	for _, fd := range want.Fields {
		if v, ok := got.Get(fd.Name); ok {
			out.Fields = append(out.Fields, record.Field{Name: fd.Name, Value: v})
		}
	}
	return out
}

// writtenColumns is the number of cells a record's mutation writes.
func writtenColumns(rec *record.Record, t *Table) int {
	n := 0
	for _, fd := range rec.Fields {
		if c := t.Column(fd.Name); c != nil && !c.Generated {
			n++
		}
	}
	return n
}

// recordSize estimates the bytes a record adds to a commit, as Beam
// SpannerIO's MutationSizeEstimator does: the sizes of the values.
func recordSize(rec *record.Record) int {
	n := 0
	for _, fd := range rec.Fields {
		n += valueSize(fd.Value)
	}
	return n
}

// keySize estimates the bytes of a record's primary key in table t (what
// a delete carries).
func keySize(rec *record.Record, t *Table) int {
	n := 0
	for _, c := range t.Key.Columns {
		if v, ok := rec.Get(c.Name); ok {
			n += valueSize(v)
		}
	}
	return n
}

func valueSize(v record.Value) int {
	switch v.Kind {
	case record.KindNull:
		return 0
	case record.KindBool:
		return 1
	case record.KindDate:
		return 4
	case record.KindTimestamp:
		return 12
	case record.KindString, record.KindNumeric, record.KindJSON:
		return len(v.Str)
	case record.KindBytes:
		return len(v.Bytes)
	case record.KindArray:
		n := 0
		for _, e := range v.Array {
			n += valueSize(e)
		}
		return n
	case record.KindEntity:
		n := 0
		for _, fd := range v.Entity {
			n += len(fd.Name) + valueSize(fd.Value)
		}
		return n
	}
	return 8
}
