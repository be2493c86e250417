package sink

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/internal/retry"
	"github.com/rekeyio/rekey/internal/spannerdb"
	"github.com/rekeyio/rekey/internal/throttle"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms"
)

// Spanner's limits per commit, and the sink's defaults below them.
const (
	// SpannerMaxCommitMutations is Spanner's limit of mutations per
	// commit: each written column of each row counts once (the "cells"),
	// and so does each secondary index entry the write changes.
	SpannerMaxCommitMutations = 80_000
	// SpannerMaxCommitBytes is Spanner's limit on the size of a commit.
	SpannerMaxCommitBytes = 100 << 20

	// DefaultMaxMutations, DefaultMaxBytes and DefaultMaxRows are Beam
	// Java SpannerIO's batch bounds: 5,000 cells leaves 16x headroom under
	// the 80,000-mutation limit for index entries; 1 MiB keeps commits
	// small and quick to retry, far under the 100 MB limit; 500 rows keeps
	// a commit's key range narrow enough to touch few splits.
	DefaultMaxMutations = 5_000
	DefaultMaxBytes     = 1 << 20
	DefaultMaxRows      = 500
)

// SpannerSinkConfig configures a Spanner sink.
type SpannerSinkConfig struct {
	Project  string `json:"project"`
	Instance string `json:"instance"`
	Database string `json:"database"`
	// Table receives every record, whatever the record's own Table says.
	Table string `json:"table"`
	// Mode is "upsert" (the default: InsertOrUpdate, so a re-run after a
	// failure overwrites its own earlier writes and converges) or "insert"
	// (Insert: a row that exists already is refused, unless it holds
	// exactly the values being written, which a re-run finds; see Spanner).
	Mode string `json:"mode,omitempty"`
	// MaxMutations caps the cells (columns x rows) of a commit, MaxBytes
	// its estimated size and MaxRows its rows; 0 takes the defaults. A
	// single row over a bound is committed alone.
	MaxMutations int `json:"max_mutations,omitempty"`
	MaxBytes     int `json:"max_bytes,omitempty"`
	MaxRows      int `json:"max_rows,omitempty"`
	// CommitPerElement commits each input batch on its own, never
	// together with the next one's rows (the bounds may still cut it):
	// for batches planned as one commit each (transforms/writeplan).
	CommitPerElement bool `json:"commit_per_element,omitempty"`
	// MaxInFlight caps the commits this sink has in flight at once in a
	// worker process, all bundles together: 0 means 1 against the Spanner
	// emulator (SPANNER_EMULATOR_HOST set: it runs one read-write
	// transaction at a time and aborts the others) and no cap otherwise
	// (each bundle has up to spannerAhead commits in flight; workers
	// scale out).
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// Guard is the retry policy and adaptive throttle of commits.
	Guard Guard `json:"guard"`
}

// DatabasePath returns projects/P/instances/I/databases/D.
func (c SpannerSinkConfig) DatabasePath() string {
	return fmt.Sprintf("projects/%s/instances/%s/databases/%s", c.Project, c.Instance, c.Database)
}

// WithDefaults fills in the mode and the batch bounds left zero.
func (c SpannerSinkConfig) WithDefaults() SpannerSinkConfig {
	if c.Mode == "" {
		c.Mode = spannerdb.ModeUpsert
	}
	if c.MaxMutations == 0 {
		c.MaxMutations = DefaultMaxMutations
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxRows == 0 {
		c.MaxRows = DefaultMaxRows
	}
	return c
}

// Validate reports a config the sink cannot run with.
func (c SpannerSinkConfig) Validate() error {
	c = c.WithDefaults()
	var problems []string
	if c.Project == "" || c.Instance == "" || c.Database == "" || c.Table == "" {
		problems = append(problems, "project, instance, database and table are required")
	}
	if c.Mode != spannerdb.ModeUpsert && c.Mode != spannerdb.ModeInsert {
		problems = append(problems, fmt.Sprintf("mode %q: want upsert or insert", c.Mode))
	}
	if c.MaxMutations < 1 || c.MaxMutations > SpannerMaxCommitMutations {
		problems = append(problems, fmt.Sprintf("max_mutations %d: want 1..%d", c.MaxMutations, SpannerMaxCommitMutations))
	}
	if c.MaxBytes < 1 || c.MaxBytes > SpannerMaxCommitBytes {
		problems = append(problems, fmt.Sprintf("max_bytes %d: want 1..%d", c.MaxBytes, SpannerMaxCommitBytes))
	}
	if c.MaxRows < 1 {
		problems = append(problems, fmt.Sprintf("max_rows %d: want at least 1", c.MaxRows))
	}
	if len(problems) > 0 {
		return fmt.Errorf("spanner sink: %s", strings.Join(problems, "; "))
	}
	return nil
}

// Metrics of the Spanner sink besides transforms.Written, DeadLettered
// and Retried (namespace rekey).
var (
	// SpannerCommits counts successful commits.
	SpannerCommits = beam.NewCounter("rekey", "spanner_commits")
	// SpannerCommitCells, SpannerCommitRows and SpannerCommitBytes are
	// the sizes of successful commits: cells (columns x rows), rows and
	// estimated bytes.
	SpannerCommitCells = beam.NewDistribution("rekey", "spanner_commit_cells")
	SpannerCommitRows  = beam.NewDistribution("rekey", "spanner_commit_rows")
	SpannerCommitBytes = beam.NewDistribution("rekey", "spanner_commit_bytes")
	// SpannerCommitMillis is the latency of commits, failed ones included.
	SpannerCommitMillis = beam.NewDistribution("rekey", "spanner_commit_millis")
	// SpannerAlreadyWritten counts rows an insert found stored with the
	// very values it was writing (an earlier run or attempt wrote them);
	// they count as written.
	SpannerAlreadyWritten = beam.NewCounter("rekey", "spanner_already_written")
)

func init() {
	register.DoFn3x1[context.Context, []byte, func(string), error](&spannerWriteFn{})
	register.Emitter1[string]()
}

// Spanner writes record batches (record.EncodeBatch) to a table and
// returns the dead letters: records it refused, as JSON lines with stage
// "write" and the reason.
//
// Each worker reads the table's schema once (spannerdb.ReadTable) and
// converts every record into a mutation (spannerdb.MutationFor); a record
// that does not convert (a column the table lacks, a missing NOT NULL
// column, a string longer than its column...) is dead-lettered at once.
// Mutations accumulate into commits bounded by MaxMutations cells,
// MaxBytes and MaxRows; a commit is flushed when the next row would pass a
// bound, after each batch with CommitPerElement, and at the end of each
// bundle, and every flush error is returned.
//
// Every commit goes through the Guard: the process's adaptive throttle
// for the database may hold it back first, and a transient error (Aborted,
// Unavailable, ResourceExhausted, DeadlineExceeded, Internal) is retried
// with exponential backoff and full jitter, each attempt within its
// deadline, until the cumulative backoff is spent; then the bundle fails
// and the runner retries it. A commit Spanner refuses for its rows
// (InvalidArgument, FailedPrecondition, AlreadyExists, NotFound such as a
// missing parent row of an interleaved table, OutOfRange) is cut in
// halves, and halves of those, so the good rows land and each refused row
// is dead-lettered alone with Spanner's error as the reason. A commit
// refused for access (PermissionDenied, Unauthenticated) dead-letters its
// rows at once with that reason. Any other error (a missing database or
// table, a cancelled context, an unknown error) fails the bundle.
//
// Upsert commits use ApplyAtLeastOnce (one RPC; a replay rewrites the same
// values). Insert commits use Apply's replay protection, so an insert is
// never refused because of its own retried RPC; a row that exists already
// is refused, unless it is stored with exactly the values being written
// (the rows of a refused commit are read back at once to compare), which
// makes re-running an insert-mode migration safe and quick. Upsert is the default because a re-run simply converges.
//
// It panics if cfg is invalid (see Validate).
func Spanner(s beam.Scope, cfg SpannerSinkConfig, batches beam.PCollection) (deadLetters beam.PCollection) {
	s = s.Scope("sink.Spanner")
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return beam.ParDo(s, &spannerWriteFn{Cfg: cfg.WithDefaults()}, batches)
}

// spannerAhead is how many commits a bundle has in flight at once: its
// goroutine reads, plans and converts the next batches while earlier ones
// commit, so the store is not left idle between commits (queued behind
// the process's cap, when there is one). With 2, the Spanner emulator
// sat idle 7% of a 100,000-row run (commits in flight 0.93 on average,
// bench/throughput); with 4, 3%.
const spannerAhead = 4

// pendingRow is a converted record waiting for its commit.
type pendingRow struct {
	rec   record.Record
	m     *spanner.Mutation
	cells int
	size  int
}

type spannerWriteFn struct {
	Cfg SpannerSinkConfig `json:"cfg"`

	client       *spanner.Client
	table        *spannerdb.Table
	source       string
	pending      []pendingRow
	pacer        *throttle.Pacer // the pending rows' pacer (Guard.Ramp), or nil
	cells, bytes int
	apply        func(ctx context.Context, rows []pendingRow, ms []*spanner.Mutation) error // tests replace it
	slots        chan struct{}                                                              // the process's commits in flight, when capped
	throttle     retry.Throttle                                                             // the process's adaptive throttle for the database, nil when off

	// Commits run on goroutines, at most spannerAhead per bundle (ahead),
	// each recording what it did in a spannerOutcome; Beam's emitters and
	// metrics belong to the bundle's goroutine, so ProcessElement and
	// FinishBundle report the outcomes of finished commits.
	ahead    chan struct{}
	inflight sync.WaitGroup
	done     finished[*spannerOutcome]
}

// spannerOutcome is what a commit (with its splits and retries) did.
type spannerOutcome struct {
	commitLog
	written, already int
	splits           int
	commits          []spannerCommit
	err              error
}

// spannerCommit is one commit attempt's size and time.
type spannerCommit struct {
	rows, cells, bytes int
	millis             int64
	ok                 bool
}

// report emits o's dead letters and counts the rest, on the bundle's
// goroutine, and returns o's error.
func (o *spannerOutcome) report(ctx context.Context, dead func(string)) error {
	o.commitLog.report(ctx, dead)
	for _, c := range o.commits {
		SpannerCommitMillis.Update(ctx, c.millis)
		if c.ok {
			SpannerCommits.Inc(ctx, 1)
			SpannerCommitCells.Update(ctx, int64(c.cells))
			SpannerCommitRows.Update(ctx, int64(c.rows))
			SpannerCommitBytes.Update(ctx, int64(c.bytes))
		}
	}
	if o.already > 0 {
		SpannerAlreadyWritten.Inc(ctx, int64(o.already))
	}
	transforms.CountWritten(ctx, int64(o.written+o.already))
	for range o.splits {
		transforms.CountSplit(ctx)
	}
	return o.err
}

// deadLetter records rec as refused with err.
func (f *spannerWriteFn) deadLetter(o *spannerOutcome, rec *record.Record, err error) {
	o.dead = append(o.dead, record.NewDeadLetter(record.StageWrite, f.source, rec, err))
}

func (f *spannerWriteFn) Setup(ctx context.Context) error {
	c, err := spanner.NewClient(ctx, f.Cfg.DatabasePath())
	if err != nil {
		return fmt.Errorf("spanner sink: client for %s: %w", f.Cfg.DatabasePath(), err)
	}
	f.client = c
	f.source = "spanner:" + f.Cfg.DatabasePath() + "/" + f.Cfg.Table
	f.throttle = f.Cfg.Guard.throttle(f.source)
	if f.apply == nil {
		f.apply = func(ctx context.Context, _ []pendingRow, ms []*spanner.Mutation) error {
			return f.applyMutations(ctx, ms)
		}
	}
	n := f.Cfg.MaxInFlight
	if n == 0 && os.Getenv("SPANNER_EMULATOR_HOST") != "" {
		n = 1
	}
	if n > 0 {
		f.slots = commitSlots(f.Cfg.DatabasePath(), n)
	}
	f.ahead = make(chan struct{}, spannerAhead)
	return nil
}

var inFlight = struct {
	sync.Mutex
	m map[string]chan struct{}
}{m: map[string]chan struct{}{}}

// commitSlots returns the process's semaphore of n commits to db.
func commitSlots(db string, n int) chan struct{} {
	inFlight.Lock()
	defer inFlight.Unlock()
	key := fmt.Sprintf("%s/%d", db, n)
	c, ok := inFlight.m[key]
	if !ok {
		c = make(chan struct{}, n)
		inFlight.m[key] = c
	}
	return c
}

func (f *spannerWriteFn) Teardown() {
	f.inflight.Wait()
	if f.client != nil {
		f.client.Close()
	}
}

// StartBundle drops rows and outcomes a failed earlier bundle left
// behind: the runner retries that bundle as a whole.
func (f *spannerWriteFn) StartBundle(_ context.Context, _ func(string)) {
	f.pending, f.cells, f.bytes, f.pacer = f.pending[:0], 0, 0, nil
	f.inflight.Wait()
	f.done.drop()
}

func (f *spannerWriteFn) ProcessElement(ctx context.Context, batch []byte, dead func(string)) error {
	if f.table == nil {
		t, err := spannerdb.ReadTable(ctx, f.client, f.Cfg.Table)
		if err != nil {
			return fmt.Errorf("spanner sink: %w", err)
		}
		f.table = t
	}
	recs, err := record.DecodeBatch(batch)
	if err != nil {
		return fmt.Errorf("spanner sink: %w", err)
	}
	pacer, err := f.Cfg.Guard.pacer(batch)
	if err != nil {
		return fmt.Errorf("spanner sink: %w", err)
	}
	if pacer != f.pacer {
		// Rows are committed under the pacer of the batch they came in.
		if err := f.flush(ctx, dead); err != nil {
			return err
		}
		f.pacer = pacer
	}
	for i := range recs {
		rec := &recs[i]
		m, err := spannerdb.MutationFor(rec, f.table, f.Cfg.Mode)
		if err != nil {
			dead(record.NewDeadLetter(record.StageWrite, f.source, rec, err))
			transforms.CountDeadLettered(ctx, 1)
			continue
		}
		row := pendingRow{rec: *rec, m: m, cells: writtenColumns(rec, f.table), size: recordSize(rec)}
		if len(f.pending) > 0 && (f.cells+row.cells > f.Cfg.MaxMutations || f.bytes+row.size > f.Cfg.MaxBytes || len(f.pending)+1 > f.Cfg.MaxRows) {
			if err := f.flush(ctx, dead); err != nil {
				return err
			}
		}
		f.pending = append(f.pending, row)
		f.cells += row.cells
		f.bytes += row.size
	}
	if f.Cfg.CommitPerElement {
		return f.flush(ctx, dead)
	}
	return nil
}

func (f *spannerWriteFn) FinishBundle(ctx context.Context, dead func(string)) error {
	if err := f.flush(ctx, dead); err != nil {
		f.inflight.Wait()
		return err
	}
	f.inflight.Wait()
	return f.done.report(ctx, dead)
}

// flush hands the pending rows to a commit of their own, once fewer than
// spannerAhead commits of this bundle are in flight, and reports the
// commits finished meanwhile (returning the first error among them).
func (f *spannerWriteFn) flush(ctx context.Context, dead func(string)) error {
	if len(f.pending) == 0 {
		return nil
	}
	rows, pacer := f.pending, f.pacer
	f.pending, f.cells, f.bytes = make([]pendingRow, 0, len(rows)), 0, 0
	select {
	case f.ahead <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("spanner sink: waiting to commit to %s: %w", f.Cfg.Table, ctx.Err())
	}
	if err := f.done.report(ctx, dead); err != nil {
		<-f.ahead
		return err
	}
	f.inflight.Add(1)
	go func() {
		defer f.inflight.Done()
		o := &spannerOutcome{}
		if o.paced, o.err = pace(ctx, pacer, len(rows)); o.err == nil {
			o.err = f.commit(ctx, rows, o)
		}
		f.done.add(o)
		<-f.ahead
	}()
	return nil
}

// commit commits rows, recording what happened in o; on failure it
// isolates the rows at fault (see Spanner).
func (f *spannerWriteFn) commit(ctx context.Context, rows []pendingRow, o *spannerOutcome) error {
	ms := make([]*spanner.Mutation, len(rows))
	cells, size := 0, 0
	for i, r := range rows {
		ms[i] = r.m
		cells += r.cells
		size += r.size
	}
	start := time.Now()
	if f.slots != nil {
		// The wait for a slot is not part of any attempt's deadline.
		select {
		case f.slots <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("spanner sink: waiting to commit to %s: %w", f.Cfg.Table, ctx.Err())
		}
	}
	err := f.Cfg.Guard.do(ctx, f.throttle, func(actx context.Context) error { return f.apply(actx, rows, ms) },
		func(wait time.Duration) { o.retries = append(o.retries, wait) },
		func(wait time.Duration) { o.throttles = append(o.throttles, wait) })
	if f.slots != nil {
		<-f.slots
	}
	o.commits = append(o.commits, spannerCommit{rows: len(rows), cells: cells, bytes: size, millis: time.Since(start).Milliseconds(), ok: err == nil})
	if err == nil {
		o.written += len(rows)
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("spanner sink: commit of %d rows to %s: %w", len(rows), f.Cfg.Table, err)
	}
	if noAccess(err) {
		// Not the rows' fault, and no retry helps: every row waits in
		// the dead-letter output until access is granted (rekey redrive).
		for i := range rows {
			f.deadLetter(o, &rows[i].rec, err)
		}
		return nil
	}
	if !rowAtFault(err) {
		return fmt.Errorf("spanner sink: commit to %s failed for a reason that is not the row's (the runner retries the bundle): %w", f.Cfg.Table, err)
	}
	if f.Cfg.Mode == spannerdb.ModeInsert && spanner.ErrCode(err) == codes.AlreadyExists {
		// A re-run, or a replay: settle every existing row with one read
		// instead of isolating them one by one.
		rest, serr := f.settleExisting(ctx, rows, err, o)
		if serr != nil {
			return serr
		}
		if len(rest) == 0 {
			return nil
		}
		if len(rest) < len(rows) {
			return f.commit(ctx, rest, o)
		}
		// None of them exists (written meanwhile by someone else?): isolate.
	}
	if len(rows) == 1 {
		f.deadLetter(o, &rows[0].rec, err)
		return nil
	}
	o.splits++
	mid := len(rows) / 2
	if err := f.commit(ctx, rows[:mid], o); err != nil {
		return err
	}
	return f.commit(ctx, rows[mid:], o)
}

// noAccess reports errors of access: PermissionDenied, Unauthenticated.
func noAccess(err error) bool {
	c := spanner.ErrCode(err)
	return c == codes.PermissionDenied || c == codes.Unauthenticated
}

// rowAtFault reports whether Spanner refused a single-row commit because
// of the row: its values, its key, or a missing parent row. Errors about
// the database, table or session are not the row's.
func rowAtFault(err error) bool {
	switch spanner.ErrCode(err) {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.AlreadyExists, codes.OutOfRange:
		return true
	case codes.NotFound:
		msg := strings.ToLower(err.Error())
		for _, infra := range []string{"database not found", "table not found", "session not found", "instance not found"} {
			if strings.Contains(msg, infra) {
				return false
			}
		}
		return true
	}
	return false
}

// applyMutations commits: at least once for upserts (idempotent), with
// replay protection for inserts.
func (f *spannerWriteFn) applyMutations(ctx context.Context, ms []*spanner.Mutation) error {
	var opts []spanner.ApplyOption
	if f.Cfg.Mode != spannerdb.ModeInsert {
		opts = append(opts, spanner.ApplyAtLeastOnce())
	}
	_, err := f.client.Apply(ctx, ms, opts...)
	return err
}

// settleExisting reads the stored rows of rows' keys at once, after an
// insert met existing rows: a row stored with exactly the values being
// written counts as written (an earlier run or attempt wrote it), one
// stored with other values is dead-lettered; the rows not stored are
// returned, to commit again.
func (f *spannerWriteFn) settleExisting(ctx context.Context, rows []pendingRow, commitErr error, o *spannerOutcome) ([]pendingRow, error) {
	wants := make([]record.Record, len(rows))
	keys := make([]string, len(rows))
	var set []spanner.KeySet
	var cols []string
	seen := map[string]bool{}
	for i := range rows {
		want, err := spannerdb.Normalize(&rows[i].rec, f.table)
		if err != nil {
			return nil, fmt.Errorf("spanner sink: %w", err)
		}
		key, err := spannerdb.SpannerKey(&want, f.table)
		if err != nil {
			return nil, fmt.Errorf("spanner sink: %w", err)
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
	for _, c := range f.table.Key.Columns {
		if l := strings.ToLower(c.Name); !seen[l] {
			seen[l] = true
			cols = append(cols, c.Name)
		}
	}
	stored := map[string]record.Record{}
	err := f.client.Single().Read(ctx, f.table.Name, spanner.KeySets(set...), cols).Do(func(r *spanner.Row) error {
		got, err := spannerdb.RowToRecord(r, f.table)
		if err != nil {
			return err
		}
		key, err := spannerdb.SpannerKey(&got, f.table)
		if err != nil {
			return err
		}
		stored[key.String()] = got
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("spanner sink: reading back existing rows of %s: %w", f.Cfg.Table, err)
	}
	rest := rows[:0:0]
	same := 0
	for i := range rows {
		got, ok := stored[keys[i]]
		switch {
		case !ok:
			rest = append(rest, rows[i])
		case spannerdb.SameValues(pick(&got, &wants[i]), &wants[i]):
			same++
		default:
			f.deadLetter(o, &rows[i].rec,
				fmt.Errorf("insert: row %s of %s already exists with other values (%s: %w)", keys[i], f.Cfg.Table, spanner.ErrCode(commitErr), commitErr))
		}
	}
	o.already += same
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
func writtenColumns(rec *record.Record, t *spannerdb.Table) int {
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
