package sink

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"cloud.google.com/go/spanner"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/write/attempts"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/internal/write/throttle"
	"github.com/rekeyio/rekey/record"
)

// SpannerSinkConfig configures a Spanner sink.
type SpannerSinkConfig struct {
	Project  string `json:"project"`
	Instance string `json:"instance"`
	Database string `json:"database"`
	// Table receives every record, whatever the record's own Table says.
	Table string `json:"table"`
	// Mode is "upsert" (the default: InsertOrUpdate, so a re-run after a
	// failure overwrites its own earlier writes and converges), "insert"
	// (Insert: a row that exists already is refused, unless it holds
	// exactly the values being written, which a re-run finds; see Spanner)
	// or "delete" (storewrite.ModeDelete: each record's row is deleted by
	// its primary key, counted as deleted; a cohort cleanup's).
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
	// Parallelism caps the commits this sink has in flight at once in a
	// worker process, all bundles together (write.parallelism): 0 means 1
	// against the Spanner emulator (SPANNER_EMULATOR_HOST set: it runs one
	// read-write transaction at a time and aborts the others) and no cap
	// otherwise (each bundle has up to spannerAhead commits in flight;
	// workers scale out).
	Parallelism int `json:"parallelism,omitempty"`
	// Guard is the retry policy and adaptive throttle of commits.
	Guard Guard `json:"guard"`
	// Backfill, if set, makes this a cohort backfill's sink: each commit
	// is one transaction that upserts only the rows the application has
	// not touched since their cohort's phase began (operator.SpannerBackfill;
	// Mode is then ignored), counting the others as backfill_skipped.
	Backfill *phases.Backfill `json:"backfill,omitempty"`
}

// DatabasePath returns projects/P/instances/I/databases/D.
func (c SpannerSinkConfig) DatabasePath() string {
	return spannerdb.DatabasePath(c.Project, c.Instance, c.Database)
}

// WithDefaults fills in the mode and the batch bounds left zero.
func (c SpannerSinkConfig) WithDefaults() SpannerSinkConfig {
	if c.Mode == "" {
		c.Mode = storewrite.ModeUpsert
	}
	if c.MaxMutations == 0 {
		c.MaxMutations = spannerdb.DefaultMaxMutations
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = spannerdb.DefaultMaxBytes
	}
	if c.MaxRows == 0 {
		c.MaxRows = spannerdb.DefaultMaxRows
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
	if err := storewrite.CheckMode(c.Mode); err != nil {
		problems = append(problems, err.Error())
	}
	if c.Mode == storewrite.ModeDelete && c.Backfill != nil {
		problems = append(problems, "a cohort backfill writes; it cannot be in delete mode")
	}
	if c.MaxMutations < 1 || c.MaxMutations > spannerdb.MaxCommitMutations {
		problems = append(problems, fmt.Sprintf("max_mutations %d: want 1..%d", c.MaxMutations, spannerdb.MaxCommitMutations))
	}
	if c.MaxBytes < 1 || c.MaxBytes > spannerdb.MaxCommitBytes {
		problems = append(problems, fmt.Sprintf("max_bytes %d: want 1..%d", c.MaxBytes, spannerdb.MaxCommitBytes))
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
	register.DoFn3x1[context.Context, record.Batch, func(string), error](&spannerWriteFn{})
	register.Emitter1[string]()
}

// Spanner writes record batches (record.Batch) to a table and
// returns the dead letters: records it refused, as JSON lines with stage
// "write" and the reason.
//
// Each worker reads the table's schema once and writes through a
// spannerdb.Writer (see its package doc, "Writing"): every record is
// converted into a mutation, a record that does not convert is
// dead-lettered at once; mutations accumulate into commits bounded by
// MaxMutations cells, MaxBytes and MaxRows; a commit is flushed when the
// next row would pass a bound, after each batch with CommitPerElement, and
// at the end of each bundle, and every flush error is returned.
//
// Every commit goes through the Guard: the process's adaptive throttle
// for the database may hold it back first, and a transient error is
// retried with exponential backoff and full jitter, each attempt within
// its deadline, until the cumulative backoff is spent; then the bundle
// fails and the runner retries it. A commit Spanner refuses for its rows
// is cut in halves, and halves of those, so the good rows land and each
// refused row is dead-lettered alone with Spanner's error as the reason; a
// commit refused for access dead-letters its rows at once; any other error
// fails the bundle (internal/write/storewrite has the table).
//
// Upsert commits use ApplyAtLeastOnce (one RPC; a replay rewrites the same
// values). Insert commits use Apply's replay protection, so an insert is
// never refused because of its own retried RPC; a row that exists already
// is refused, unless it is stored with exactly the values being written
// (the rows of a refused commit are read back at once to compare), which
// makes re-running an insert-mode migration safe and quick. Upsert is the
// default because a re-run simply converges.
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

type spannerWriteFn struct {
	Cfg SpannerSinkConfig `json:"cfg"`

	client *spanner.Client
	// other is the client of new a reverse backfill reads, when it is
	// not client's database.
	other *spanner.Client
	// releases give the shared clients back (spannerdb.Shared).
	releases []func()
	// w converts and batches on the bundle's goroutine (Add, Cut); its
	// batches commit on goroutines of their own (WriteBatch), at most
	// spannerAhead per bundle (ahead), each returning its Outcome. Beam's
	// emitters and metrics belong to the bundle's goroutine, so
	// ProcessElement and FinishBundle report the outcomes of finished
	// commits (done), and the conversions' dead letters (out) after each
	// element.
	w        *spannerdb.Writer
	newW     func(ctx context.Context) (*spannerdb.Writer, error) // tests replace it
	lease    throttle.Lease                                       // the ramp-up's state (tests replace it)
	out      outcome
	ahead    chan struct{}
	inflight sync.WaitGroup
	done     finished
}

// spannerMetrics counts the sizes and times of o's commits and the rows
// an insert found already written.
func spannerMetrics(ctx context.Context, o *storewrite.Outcome) {
	for _, c := range o.Commits {
		SpannerCommitMillis.Update(ctx, c.Took.Milliseconds())
		if c.OK {
			SpannerCommits.Inc(ctx, 1)
			SpannerCommitCells.Update(ctx, int64(c.Mutations))
			SpannerCommitRows.Update(ctx, int64(c.Records))
			SpannerCommitBytes.Update(ctx, int64(c.Bytes))
		}
	}
	if o.Existing > 0 {
		SpannerAlreadyWritten.Inc(ctx, int64(o.Existing))
	}
}

func (f *spannerWriteFn) Setup(ctx context.Context) error {
	c, err := f.shared(f.Cfg.DatabasePath())
	if err != nil {
		return err
	}
	f.client = c
	f.newW = func(ctx context.Context) (*spannerdb.Writer, error) {
		return spannerdb.NewWriter(ctx, c, f.Cfg.Table)
	}
	f.lease = spannerdb.RampLease{Client: c}
	f.ahead = make(chan struct{}, spannerAhead)
	return nil
}

// writer returns the Writer, made and configured on first use.
func (f *spannerWriteFn) writer(ctx context.Context) (*spannerdb.Writer, error) {
	if f.w != nil {
		return f.w, nil
	}
	w, err := f.newW(ctx)
	if err != nil {
		return nil, fmt.Errorf("spanner sink: %w", err)
	}
	w.Mode, w.MaxMutations, w.MaxBytes, w.MaxRows = f.Cfg.Mode, f.Cfg.MaxMutations, f.Cfg.MaxBytes, f.Cfg.MaxRows
	w.Source = "spanner:" + f.Cfg.DatabasePath() + "/" + f.Cfg.Table
	w.Retry = f.Cfg.Guard.Retry
	w.Throttle = f.Cfg.Guard.Throttle(w.Source)
	if w.Pacer, err = f.Cfg.Guard.Pacer(f.lease); err != nil {
		return nil, fmt.Errorf("spanner sink: %w", err)
	}
	if b := f.Cfg.Backfill; b != nil && f.client != nil {
		if b.Reverse == nil {
			w.Conditional = operator.SpannerBackfill(f.client, w.Table, *b)
		} else {
			newC := f.client
			if db := b.Reverse.NewDatabase; db != f.Cfg.DatabasePath() {
				if f.other == nil {
					if f.other, err = f.shared(db); err != nil {
						return nil, err
					}
				}
				newC = f.other
			}
			if w.Conditional, err = operator.SpannerReverse(ctx, f.client, newC, w.Table, *b.Reverse); err != nil {
				return nil, fmt.Errorf("spanner sink: %w", err)
			}
		}
	}
	n := f.Cfg.Parallelism
	if n == 0 && os.Getenv("SPANNER_EMULATOR_HOST") != "" {
		n = 1
	}
	if n > 0 {
		w.Slots = commitSlots(f.Cfg.DatabasePath(), n)
	}
	f.w = w
	return w, nil
}

// shared is this process's sink client of db (spannerdb.Shared), with
// the client's own commit retries counted apart (attempts).
func (f *spannerWriteFn) shared(db string) (*spanner.Client, error) {
	c, release, err := spannerdb.Shared(db, "sink", func(ctx context.Context) (*spanner.Client, error) {
		return spanner.NewClient(ctx, db, attempts.DialOption())
	})
	if err != nil {
		return nil, fmt.Errorf("spanner sink: client for %s: %w", db, err)
	}
	f.releases = append(f.releases, release)
	return c, nil
}

func (f *spannerWriteFn) Teardown() {
	f.inflight.Wait()
	for _, release := range f.releases {
		release()
	}
	f.releases, f.client, f.other = nil, nil, nil
}

// StartBundle drops rows and outcomes a failed earlier bundle left
// behind: the runner retries that bundle as a whole.
func (f *spannerWriteFn) StartBundle(_ context.Context, _ func(string)) {
	if f.w != nil {
		f.w.Reset()
	}
	f.out = outcome{}
	f.inflight.Wait()
	f.done.drop()
}

func (f *spannerWriteFn) ProcessElement(ctx context.Context, batch record.Batch, dead func(string)) error {
	w, err := f.writer(ctx)
	if err != nil {
		return err
	}
	recs := batch.Recs
	for i := range recs {
		if full := w.Add(&recs[i], &f.out.Outcome); full != nil {
			if err := f.flush(ctx, full, dead); err != nil {
				return err
			}
		}
	}
	if err := f.out.report(ctx, dead, spannerMetrics); err != nil {
		return err
	}
	if f.Cfg.CommitPerElement {
		return f.flush(ctx, w.Cut(), dead)
	}
	return nil
}

func (f *spannerWriteFn) FinishBundle(ctx context.Context, dead func(string)) error {
	var cut *spannerdb.Batch
	if f.w != nil {
		cut = f.w.Cut()
	}
	if err := f.flush(ctx, cut, dead); err != nil {
		f.inflight.Wait()
		return err
	}
	f.inflight.Wait()
	return f.done.report(ctx, dead, spannerMetrics)
}

// flush hands batch (nil: none) to a commit of its own, once fewer than
// spannerAhead commits of this bundle are in flight, and reports the
// commits finished meanwhile (returning the first error among them). Under
// a ramp-up the writer sizes and paces each commit as it is sent.
func (f *spannerWriteFn) flush(ctx context.Context, batch *spannerdb.Batch, dead func(string)) error {
	if batch == nil {
		return nil
	}
	w := f.w
	select {
	case f.ahead <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("spanner sink: waiting to commit to %s: %w", f.Cfg.Table, ctx.Err())
	}
	if err := f.done.report(ctx, dead, spannerMetrics); err != nil {
		<-f.ahead
		return err
	}
	f.inflight.Add(1)
	go func() {
		defer f.inflight.Done()
		o := &outcome{}
		if o.Outcome, o.err = w.WriteBatch(ctx, batch); o.err != nil {
			o.err = fmt.Errorf("spanner sink: %w", o.err)
		}
		f.done.add(o)
		<-f.ahead
	}()
	return nil
}
