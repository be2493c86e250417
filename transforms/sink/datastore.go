package sink

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// DatastoreSinkConfig configures a Datastore (Firestore in Datastore mode)
// sink.
type DatastoreSinkConfig struct {
	// Project is the Google Cloud project (empty: DATASTORE_PROJECT_ID).
	Project string `json:"project"`
	// Database is the database id (empty: the default database).
	Database string `json:"database"`
	// Namespace, when set, replaces the namespace of every record's key;
	// empty keeps each key's own namespace.
	Namespace string `json:"namespace"`
	// LeaseNamespace is where the ramp-up's lease is kept
	// (datastoredb.RampLease): the endpoint's namespace, next to its
	// manifest (empty: Namespace).
	LeaseNamespace string `json:"lease_namespace,omitempty"`
	// Mode is "upsert" (the default: replace or create, so re-runs
	// converge), "insert" (create only; an existing key with the same
	// content counts as written, with other content it is dead-lettered)
	// or "delete" (each record's key is deleted, counted as deleted; a
	// cohort cleanup's). See storewrite.ModeUpsert, ModeInsert and
	// ModeDelete.
	Mode string `json:"mode"`
	// MaxEntities caps the entities of one commit (0: 500, the service's
	// limit, which is also the most allowed).
	MaxEntities int `json:"max_entities"`
	// MaxBytes caps the estimated bytes of one commit (0: 9,000,000; at
	// most the service's 10 MiB request limit).
	MaxBytes int `json:"max_bytes"`
	// CommitPerElement commits each input batch on its own, never
	// together with the next one's entities (the bounds may still cut
	// it): for batches planned as one commit each (transforms/writeplan).
	CommitPerElement bool `json:"commit_per_element,omitempty"`
	// Parallelism is how many input batches a worker process commits at
	// once, all its bundles together, with CommitPerElement (0 or 1: one
	// after the other, in each bundle). The records of
	// a batch are committed in their order; batches in flight together
	// land in no particular order (as batches of different workers do).
	Parallelism int `json:"parallelism,omitempty"`
	// Guard is the retry policy and adaptive throttle of commits.
	Guard Guard `json:"guard"`
	// Backfill, if set, makes this a cohort backfill's sink: each commit
	// is one transaction that upserts only the entities the application
	// has not touched since their cohort's phase began
	// (operator.DatastoreBackfill; Mode is then ignored), counting the
	// others as backfill_skipped.
	Backfill *phases.Backfill `json:"backfill,omitempty"`
}

func (c DatastoreSinkConfig) check() error {
	var errs []error
	if err := storewrite.CheckMode(c.Mode); err != nil {
		errs = append(errs, fmt.Errorf("datastore sink: %w", err))
	}
	if c.Mode == storewrite.ModeDelete && c.Backfill != nil {
		errs = append(errs, errors.New("datastore sink: a cohort backfill writes; it cannot be in delete mode"))
	}
	if c.MaxEntities < 0 || c.MaxEntities > datastoredb.MaxCommitEntities {
		errs = append(errs, fmt.Errorf("datastore sink: max_entities %d: want 0 (default) to %d", c.MaxEntities, datastoredb.MaxCommitEntities))
	}
	if c.MaxBytes < 0 || c.MaxBytes > datastoredb.MaxCommitBytes {
		errs = append(errs, fmt.Errorf("datastore sink: max_bytes %d: want 0 (default) to %d", c.MaxBytes, datastoredb.MaxCommitBytes))
	}
	if c.Namespace != "" {
		k := rewrite.DatastoreKey{Namespace: c.Namespace, Path: []rewrite.PathElement{{Kind: "K", ID: 1}}}
		if err := rewrite.ValidateDatastoreKey(k); err != nil {
			errs = append(errs, fmt.Errorf("datastore sink: namespace %q: %w", c.Namespace, err))
		}
	}
	return errors.Join(errs...)
}

// Counters of the Datastore sink, besides transforms.Written,
// DeadLettered and Retried.
var (
	// datastoreCommits counts successful commits, datastoreCommitEntities
	// is their size distribution (its max is at most MaxEntities).
	datastoreCommits        = beam.NewCounter("rekey", "datastore_commits")
	datastoreCommitEntities = beam.NewDistribution("rekey", "datastore_commit_entities")
	datastoreCommitBytes    = beam.NewDistribution("rekey", "datastore_commit_bytes")
	// datastoreExisting counts inserts found already present with the
	// same content.
	datastoreExisting = beam.NewCounter("rekey", "datastore_insert_existing")
)

func init() {
	register.DoFn3x1[context.Context, record.Batch, func(string), error](&datastoreWriteFn{})
	register.Emitter1[string]()
}

// Datastore writes record batches to Datastore and returns the dead
// letters (record.DeadLetter JSON lines, stage "write").
//
// Beam Go has no Datastore writer; this is rekey's. Each worker converts
// records with datastoredb.ToEntity and commits them through a
// datastoredb.Writer: non-transactional commits of at most MaxEntities
// entities and MaxBytes, never one key twice in a commit (a repeated key
// flushes first, so the last version stays), upserts by default. A record
// that cannot be converted is dead-lettered; a commit the service refuses
// for its content is split in halves until each refused entity is alone and
// dead-lettered with the service's error, while the others land; a commit
// refused for access (PermissionDenied, Unauthenticated) dead-letters its
// entities at once. Every commit goes through the Guard (the process's
// adaptive throttle for the database, then retries of transient errors
// with backoff and jitter); a commit still failing after the cumulative
// backoff, like other infrastructure errors, fails the bundle so the
// runner retries it (upserts make that safe; inserts recognise their own
// earlier writes). The buffer is flushed after
// each batch with CommitPerElement and in FinishBundle, and every error is
// returned.
func Datastore(s beam.Scope, cfg DatastoreSinkConfig, batches beam.PCollection) (deadLetters beam.PCollection) {
	s = s.Scope("sink.Datastore")
	return beam.ParDo(s, &datastoreWriteFn{Cfg: cfg}, batches)
}

type datastoreWriteFn struct {
	Cfg DatastoreSinkConfig `json:"cfg"`

	client *datastore.Client
	// w writes batch after batch on the bundle's goroutine; what it does
	// is recorded in out and reported after each element.
	w   *datastoredb.Writer
	out outcome
	// pacer paces every Writer's commits under a ramp-up (nil without).
	pacer storewrite.Pacer
	// cond is every Writer's conditional commit (a cohort backfill's);
	// other the client of new a reverse backfill reads, when it is not
	// client's database.
	cond  func(ctx context.Context, ents []datastore.Entity) (int, error)
	other *datastore.Client
	// releases give the shared clients back (datastoredb.Shared).
	releases []func()

	// With Parallelism > 1 and CommitPerElement, batches are committed by
	// goroutines, each with a Writer of its own from idle and an outcome
	// of its own, at most Parallelism at once in the process (slots: on
	// prism, two bundles with 8 commits each in flight made the Firestore
	// emulator a third slower than one with 8). Beam's emitters
	// and metrics belong to the bundle's goroutine, so ProcessElement and
	// FinishBundle report the outcomes of finished batches. As many
	// batches again may wait for a Writer (queued), so the bundle's
	// goroutine can read and plan the next records while a full set of
	// commits is in flight, without leaving the store idle meanwhile.
	idle     chan *datastoredb.Writer
	queued   chan struct{}
	slots    chan struct{} // the process's commits in flight to the database
	inflight sync.WaitGroup
	done     finished
}

// datastoreMetrics counts the sizes of o's successful commits and the
// inserts found present.
func datastoreMetrics(ctx context.Context, o *storewrite.Outcome) {
	for _, c := range o.Commits {
		if c.OK {
			datastoreCommits.Inc(ctx, 1)
			datastoreCommitEntities.Update(ctx, int64(c.Records))
			datastoreCommitBytes.Update(ctx, int64(c.Bytes))
		}
	}
	if o.Existing > 0 {
		datastoreExisting.Inc(ctx, int64(o.Existing))
	}
}

func (f *datastoreWriteFn) Setup(ctx context.Context) error {
	if err := f.Cfg.check(); err != nil {
		return err
	}
	c, release, err := datastoredb.Shared(f.Cfg.Project, f.Cfg.Database, "", nil)
	if err != nil {
		return err
	}
	f.client = c
	f.releases = append(f.releases, release)
	leaseNS := f.Cfg.LeaseNamespace
	if leaseNS == "" {
		leaseNS = f.Cfg.Namespace
	}
	if f.pacer, err = f.Cfg.Guard.Pacer(datastoredb.RampLease{Client: c, Namespace: leaseNS}); err != nil {
		return fmt.Errorf("sink.Datastore: %w", err)
	}
	if b := f.Cfg.Backfill; b != nil && b.Reverse != nil && b.Reverse.NewTable != "" {
		// A Datastore → Spanner migration's: new is a Spanner table.
		db := b.Reverse.NewDatabase
		newS, release, err := spannerdb.Shared(db, "sink", func(ctx context.Context) (*spanner.Client, error) { return spanner.NewClient(ctx, db) })
		if err != nil {
			return err
		}
		f.releases = append(f.releases, release)
		if f.cond, err = operator.DatastoreFromSpannerReverse(ctx, c, newS, *b.Reverse); err != nil {
			return fmt.Errorf("sink.Datastore: %w", err)
		}
	} else if b != nil && b.Reverse != nil {
		newC := c
		if r := b.Reverse; r.NewProject != f.Cfg.Project || r.NewDatastoreDB != f.Cfg.Database {
			var release func()
			if newC, release, err = datastoredb.Shared(r.NewProject, r.NewDatastoreDB, "", nil); err != nil {
				return err
			}
			f.releases = append(f.releases, release)
			f.other = newC
		}
		if f.cond, err = operator.DatastoreReverse(c, newC, *b.Reverse); err != nil {
			return fmt.Errorf("sink.Datastore: %w", err)
		}
	} else if b != nil {
		f.cond = operator.DatastoreBackfill(c, *b)
	}
	f.w = f.newWriter()
	if f.parallel() {
		f.idle = make(chan *datastoredb.Writer, f.Cfg.Parallelism)
		f.queued = make(chan struct{}, 2*f.Cfg.Parallelism)
		f.slots = commitSlots("datastore:"+f.Cfg.Project+"/"+f.Cfg.Database, f.Cfg.Parallelism)
		for range f.Cfg.Parallelism {
			f.idle <- f.newWriter()
		}
	}
	return nil
}

// newWriter returns a Writer on the client, configured.
func (f *datastoreWriteFn) newWriter() *datastoredb.Writer {
	w := datastoredb.NewWriter(f.client)
	w.Mode = f.Cfg.Mode
	w.MaxEntities = f.Cfg.MaxEntities
	w.MaxBytes = f.Cfg.MaxBytes
	w.Namespace = f.Cfg.Namespace
	w.Source = "datastore"
	if f.Cfg.Database != "" {
		w.Source += ":" + f.Cfg.Database
	}
	w.Retry = f.Cfg.Guard.Retry
	w.Throttle = f.Cfg.Guard.Throttle(w.Source + "/" + f.Cfg.Project)
	w.Pacer = f.pacer
	w.Conditional = f.cond
	return w
}

func (f *datastoreWriteFn) parallel() bool { return f.Cfg.CommitPerElement && f.Cfg.Parallelism > 1 }

func (f *datastoreWriteFn) Teardown() error {
	f.inflight.Wait()
	for _, release := range f.releases {
		release()
	}
	f.releases, f.client, f.other = nil, nil, nil
	return nil
}

func (f *datastoreWriteFn) StartBundle(_ context.Context, _ func(string)) {
	f.w.Reset()
	f.out = outcome{}
	// Commits a failed bundle left in flight belong to that bundle, which
	// the runner retries as a whole.
	f.inflight.Wait()
	f.done.drop()
}

func (f *datastoreWriteFn) ProcessElement(ctx context.Context, batch record.Batch, emit func(string)) error {
	// The batch is the sink's to keep while its commit is in flight
	// (record.Batch: no producer changes an emitted batch), and read-only.
	recs := batch.Recs
	if f.parallel() {
		f.queued <- struct{}{} // at most Parallelism batches in flight, as many waiting
		if err := f.done.report(ctx, emit, datastoreMetrics); err != nil {
			<-f.queued
			return err
		}
		f.inflight.Add(1)
		go f.commitBatch(ctx, recs)
		return nil
	}
	f.out.err = f.write(ctx, f.w, recs, f.Cfg.CommitPerElement, &f.out.Outcome)
	return f.out.report(ctx, emit, datastoreMetrics)
}

// write adds recs to w and, if flush, flushes it, recording in out.
func (f *datastoreWriteFn) write(ctx context.Context, w *datastoredb.Writer, recs []record.Record, flush bool, out *storewrite.Outcome) error {
	for i := range recs {
		if err := w.Add(ctx, &recs[i], out); err != nil {
			return fmt.Errorf("sink.Datastore: %w", err)
		}
	}
	if flush {
		if err := w.Flush(ctx, out); err != nil {
			return fmt.Errorf("sink.Datastore: %w", err)
		}
	}
	return nil
}

// commitBatch takes a Writer from the idle pool and commits recs with it
// (as one planned commit, in paced pieces under a ramp-up), and records
// the outcome; it runs on its own goroutine and returns the Writer to the
// pool.
func (f *datastoreWriteFn) commitBatch(ctx context.Context, recs []record.Record) {
	defer f.inflight.Done()
	defer func() { <-f.queued }()
	w := <-f.idle
	o := &outcome{}
	f.slots <- struct{}{}
	if o.err = f.write(ctx, w, recs, true, &o.Outcome); o.err != nil {
		w.Reset()
	}
	<-f.slots
	f.done.add(o)
	f.idle <- w
}

func (f *datastoreWriteFn) FinishBundle(ctx context.Context, emit func(string)) error {
	if f.parallel() {
		f.inflight.Wait()
		return f.done.report(ctx, emit, datastoreMetrics)
	}
	f.out.err = f.write(ctx, f.w, nil, true, &f.out.Outcome)
	return f.out.report(ctx, emit, datastoreMetrics)
}
