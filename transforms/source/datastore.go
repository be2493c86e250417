package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
	"github.com/rekeyio/rekey/transforms"
)

// DatastoreConfig configures a Datastore (Firestore in Datastore mode)
// source.
type DatastoreConfig struct {
	// Project is the Google Cloud project (empty: DATASTORE_PROJECT_ID).
	Project string `json:"project"`
	// Database is the database id (empty: the default database).
	Database string `json:"database"`
	// Namespace is the namespace read (empty: the default namespace).
	Namespace string `json:"namespace"`
	// Kind is the kind read: every entity of it, at any depth of the key
	// path (roots and entities with ancestors alike).
	Kind string `json:"kind"`
	// Splits is how many key ranges the read is cut into; 0 chooses from
	// the kind's statistics like Beam Java (about 64 MiB a range, at least
	// 12, at most 50,000; 12 when there are no statistics, as on the
	// emulator). Fewer ranges come out when the kind has fewer distinct
	// sampled keys.
	Splits int `json:"splits"`
	// ReadTime, if set, is the moment the whole read sees: every query
	// (the key sample and each range) reads the database as it was then
	// (Datastore's read_time, microseconds), so the read is a snapshot.
	// The database must still hold that version (an hour, or 7 days at
	// whole minutes with point-in-time recovery).
	ReadTime time.Time `json:"read_time,omitzero"`
}

func (c DatastoreConfig) check() error {
	var errs []error
	if c.Kind == "" {
		errs = append(errs, errors.New("datastore source: kind is empty"))
	} else if err := rewrite.ValidateDatastoreKey(rewrite.DatastoreKey{Namespace: c.Namespace, Path: []rewrite.PathElement{{Kind: c.Kind, ID: 1}}}); err != nil {
		errs = append(errs, fmt.Errorf("datastore source: kind %q namespace %q: %w", c.Kind, c.Namespace, err))
	}
	if c.Splits < 0 || c.Splits > datastoreMaxSplits {
		errs = append(errs, fmt.Errorf("datastore source: splits %d: want 0 (choose) to %d", c.Splits, datastoreMaxSplits))
	}
	return errors.Join(errs...)
}

func (c DatastoreConfig) source() string {
	if c.Namespace == "" {
		return "datastore:" + c.Kind
	}
	return "datastore:" + c.Namespace + "/" + c.Kind
}

// Split counts, as Beam Java's Datastore reader chooses them.
const (
	datastoreMinSplits      = 12
	datastoreMaxSplits      = 50000
	datastoreBytesPerSplit  = 64 << 20
	datastoreSampleScanPage = 10000
	// datastoreReadPage is the limit of one range query; the service
	// answers a page in several responses, the emulator in one (see
	// datastoredb.MaxRecvMsgSize), and a page too large for the receive
	// limit is halved.
	datastoreReadPage = transforms.BatchSize
	// datastoreBatchBytes caps a batch's estimated size, so entities near
	// 1 MiB do not make 500 MB elements.
	datastoreBatchBytes = 8 << 20
)

var (
	datastoreRangesRead    = beam.NewCounter("rekey", "datastore_read_ranges")
	datastoreQueries       = beam.NewCounter("rekey", "datastore_read_queries")
	datastoreScanFallbacks = beam.NewCounter("rekey", "datastore_split_scan_fallback")
)

func init() {
	register.DoFn3x1[context.Context, []byte, func(int, string), error](&datastoreSplitFn{})
	register.Emitter2[int, string]()
	register.DoFn5x1[context.Context, int, func(*string) bool, func(record.Batch), func(string), error](&datastoreReadFn{})
	register.Iter1[string]()
	register.Emitter1[string]()
}

// Datastore reads every entity of a kind into record batches, in
// parallel over key ranges:
//
//  1. a DoFn fed by an Impulse samples the kind's keys with a keys-only
//     query ordered by __scatter__ (SampleKeysPerSplit per split, like
//     Beam Java), falling back to a sampled keys-only scan when that
//     yields nothing; sorts the sample in Datastore's real key order
//     (rewrite.CompareDatastore: ids before names, ids numerically; not
//     the name-only comparison of Beam Go's datastoreio); and emits the
//     contiguous ranges [start, end) between evenly spaced sample keys,
//     the first open at the start and the last open at the end;
//  2. a GroupByKey on the range number spreads the ranges over workers
//     (beam.Reshuffle would do nothing on prism);
//  3. a read DoFn (one client per DoFn instance, made in Setup) queries
//     each range with __key__ >= start and __key__ < end in the
//     namespace, pages with limits and cursors, converts entities with
//     datastoredb.FromEntity and emits batches of at most
//     transforms.BatchSize records (and about 8 MiB). An entity that
//     cannot be converted becomes a dead letter (stage "read").
//
// A kind query returns the kind's entities at every depth of the key path
// in full-key order (an ancestor's kind and id first), and the ranges cut
// that same order, so each entity is read exactly once. With
// cfg.ReadTime every query reads at that one moment, so the read is a
// snapshot: what is written meanwhile is not seen. The Firestore emulator
// honours a query's read time (an entity updated, deleted or created
// since reads as it was then), but not a lookup's, and it accepts times
// older than the real service's retention, so an expired read time is
// an error only on the service. Without a read time, entities written
// meanwhile may or may not be seen.
func Datastore(s beam.Scope, cfg DatastoreConfig) (batches, deadLetters beam.PCollection) {
	s = s.Scope("source.Datastore")
	ranges := beam.ParDo(s, &datastoreSplitFn{Cfg: cfg}, beam.Impulse(s))
	grouped := beam.GroupByKey(s, ranges)
	return beam.ParDo2(s, &datastoreReadFn{Cfg: cfg}, grouped)
}

// datastoreRange is a datastoredb.KeyRange in transit: the keys in
// datastore.Key.Encode form, empty for an open end.
type datastoreRange struct {
	Start string `json:"start,omitempty"`
	End   string `json:"end,omitempty"`
}

func encodeDatastoreRange(r datastoredb.KeyRange) (string, error) {
	var t datastoreRange
	if r.Start != nil {
		t.Start = datastoredb.KeyToDatastore(*r.Start).Encode()
	}
	if r.End != nil {
		t.End = datastoredb.KeyToDatastore(*r.End).Encode()
	}
	b, err := json.Marshal(t)
	return string(b), err
}

// decodeDatastoreRange returns the range's client keys, nil when open.
func decodeDatastoreRange(s string) (start, end *datastore.Key, err error) {
	var t datastoreRange
	if err := json.Unmarshal([]byte(s), &t); err != nil {
		return nil, nil, fmt.Errorf("datastore source: bad range %q: %w", s, err)
	}
	if t.Start != "" {
		if start, err = datastore.DecodeKey(t.Start); err != nil {
			return nil, nil, fmt.Errorf("datastore source: bad range start: %w", err)
		}
	}
	if t.End != "" {
		if end, err = datastore.DecodeKey(t.End); err != nil {
			return nil, nil, fmt.Errorf("datastore source: bad range end: %w", err)
		}
	}
	return start, end, nil
}

type datastoreSplitFn struct {
	Cfg DatastoreConfig `json:"cfg"`

	client  *datastore.Client
	release func()
}

func (f *datastoreSplitFn) Setup(ctx context.Context) error {
	if err := f.Cfg.check(); err != nil {
		return err
	}
	c, release, err := sharedDatastoreClient(f.Cfg)
	if err != nil {
		return err
	}
	f.client, f.release = c, release
	return nil
}

// sharedDatastoreClient is this process's client for cfg's reads
// (datastoreClient's), one per read time, and its release
// (datastoredb.Shared).
func sharedDatastoreClient(cfg DatastoreConfig) (*datastore.Client, func(), error) {
	variant := "live"
	if !cfg.ReadTime.IsZero() {
		variant = "at " + cfg.ReadTime.UTC().Format(time.RFC3339Nano)
	}
	return datastoredb.Shared(cfg.Project, cfg.Database, variant, func(ctx context.Context) (*datastore.Client, error) { return datastoreClient(ctx, cfg) })
}

// datastoreClient is a client for cfg's reads: at cfg.ReadTime if set.
func datastoreClient(ctx context.Context, cfg DatastoreConfig) (*datastore.Client, error) {
	c, err := datastoredb.Client(ctx, cfg.Project, cfg.Database)
	if err != nil {
		return nil, err
	}
	if !cfg.ReadTime.IsZero() {
		c.WithReadOptions(datastore.ReadTime(cfg.ReadTime))
	}
	return c, nil
}

// readTimeHint explains a read error that may come from an expired read
// time.
func (c DatastoreConfig) readTimeHint(err error) string {
	if c.ReadTime.IsZero() {
		return ""
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.FailedPrecondition:
		return fmt.Sprintf(" (the read is at read time %s: the database keeps old versions for an hour, or 7 days at whole minutes with point-in-time recovery; for a longer read enable it and give a whole-minute source.read_time, or read without one: source.read_time: none)", c.ReadTime.Format(time.RFC3339Nano))
	}
	return ""
}

func (f *datastoreSplitFn) Teardown() error {
	if f.release != nil {
		f.release()
	}
	f.client, f.release = nil, nil
	return nil
}

func (f *datastoreSplitFn) ProcessElement(ctx context.Context, _ []byte, emit func(int, string)) error {
	n := f.Cfg.Splits
	if n == 0 {
		n = estimateDatastoreSplits(ctx, f.client, f.Cfg)
	}
	var sample []rewrite.DatastoreKey
	if n > 1 {
		var scanned bool
		var err error
		sample, _, scanned, err = sampleDatastoreKeys(ctx, f.client, f.Cfg, n*datastoredb.SampleKeysPerSplit)
		if err != nil {
			return err
		}
		if scanned {
			datastoreScanFallbacks.Inc(ctx, 1)
		}
	}
	for i, r := range datastoredb.Ranges(datastoredb.SplitPoints(sample, n)) {
		enc, err := encodeDatastoreRange(r)
		if err != nil {
			return err
		}
		emit(i, enc)
	}
	return nil
}

// kindStats reads the kind's statistics entity (__Stat_Kind__, or
// __Stat_Ns_Kind__ in a namespace); false when there is none (the
// emulator has none, and the service updates them about daily).
func kindStats(ctx context.Context, c *datastore.Client, cfg DatastoreConfig) (datastore.PropertyList, bool) {
	statKind := "__Stat_Kind__"
	if cfg.Namespace != "" {
		statKind = "__Stat_Ns_Kind__"
	}
	q := datastore.NewQuery(statKind).Namespace(cfg.Namespace).FilterField("kind_name", "=", cfg.Kind).Limit(1)
	var stats []datastore.PropertyList
	if _, err := c.GetAll(ctx, q, &stats); err != nil || len(stats) == 0 {
		return nil, false
	}
	return stats[0], true
}

// kindCount is the kind's entity count from its statistics.
func kindCount(ctx context.Context, c *datastore.Client, cfg DatastoreConfig) (int64, bool) {
	stats, ok := kindStats(ctx, c, cfg)
	for _, p := range stats {
		if n, isInt := p.Value.(int64); isInt && p.Name == "count" {
			return n, ok
		}
	}
	return 0, false
}

// estimateDatastoreSplits chooses a split count from the kind's statistics
// entity (__Stat_Kind__, or __Stat_Ns_Kind__ in a namespace): one split per
// 64 MiB, clamped to [12, 50000]; 12 without statistics (the emulator has
// none, and the service updates them about daily).
func estimateDatastoreSplits(ctx context.Context, c *datastore.Client, cfg DatastoreConfig) int {
	stats, _ := kindStats(ctx, c, cfg)
	for _, p := range stats {
		if b, ok := p.Value.(int64); ok && p.Name == "entity_bytes" {
			return min(max(int(b/datastoreBytesPerSplit), datastoreMinSplits), datastoreMaxSplits)
		}
	}
	return datastoreMinSplits
}

// sampleDatastoreKeys returns up to size keys of the kind, ideally from
// the __scatter__ index: the service keeps a pseudo-random __scatter__
// value on a fraction of the entities, so a keys-only query ordered by it
// is a cheap random sample. The Firestore emulator answers such a query
// with no results and no error, and so does the service for a kind too
// small to have scatter values; then (or on an error) the sample is taken
// from a keys-only scan of the whole kind, paged, by reservoir sampling
// (scanned reports it, and seen is the number of keys the scan saw: the
// kind's entities; -1 when the sample came from the index).
func sampleDatastoreKeys(ctx context.Context, c *datastore.Client, cfg DatastoreConfig, size int) (sample []rewrite.DatastoreKey, seen int, scanned bool, err error) {
	q := datastore.NewQuery(cfg.Kind).Namespace(cfg.Namespace).KeysOnly().Order("__scatter__").Limit(size)
	keys, err := c.GetAll(ctx, q, nil)
	if err == nil && len(keys) > 0 {
		sample = make([]rewrite.DatastoreKey, len(keys))
		for i, k := range keys {
			sample[i] = datastoredb.KeyFromDatastore(k)
		}
		return sample, -1, false, nil
	}
	if err != nil && (ctx.Err() != nil || status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated) {
		return nil, 0, false, fmt.Errorf("datastore source: sampling %s: %w%s", cfg.source(), err, cfg.readTimeHint(err))
	}
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	base := datastore.NewQuery(cfg.Kind).Namespace(cfg.Namespace).KeysOnly().Order("__key__")
	var cursor *datastore.Cursor
	for {
		q := base.Limit(datastoreSampleScanPage)
		if cursor != nil {
			q = q.Start(*cursor)
		}
		it := c.Run(ctx, q)
		n := 0
		for {
			k, err := it.Next(nil)
			if err == iterator.Done {
				break
			}
			if err != nil {
				return nil, 0, true, fmt.Errorf("datastore source: scanning keys of %s: %w%s", cfg.source(), err, cfg.readTimeHint(err))
			}
			n++
			seen++
			switch {
			case len(sample) < size:
				sample = append(sample, datastoredb.KeyFromDatastore(k))
			default:
				if j := rng.IntN(seen); j < size {
					sample[j] = datastoredb.KeyFromDatastore(k)
				}
			}
		}
		if n < datastoreSampleScanPage {
			return sample, seen, true, nil
		}
		next, err := it.Cursor()
		if err != nil {
			return nil, 0, true, fmt.Errorf("datastore source: scanning keys of %s: %w", cfg.source(), err)
		}
		cursor = &next
	}
}

type datastoreReadFn struct {
	Cfg DatastoreConfig `json:"cfg"`

	client  *datastore.Client
	release func()
}

func (f *datastoreReadFn) Setup(ctx context.Context) error {
	c, release, err := sharedDatastoreClient(f.Cfg)
	if err != nil {
		return err
	}
	f.client, f.release = c, release
	return nil
}

func (f *datastoreReadFn) Teardown() error {
	if f.release != nil {
		f.release()
	}
	f.client, f.release = nil, nil
	return nil
}

func (f *datastoreReadFn) ProcessElement(ctx context.Context, _ int, ranges func(*string) bool, emit func(record.Batch), dead func(string)) error {
	var enc string
	for ranges(&enc) {
		start, end, err := decodeDatastoreRange(enc)
		if err != nil {
			return err
		}
		if err := f.read(ctx, start, end, emit, dead); err != nil {
			return err
		}
		datastoreRangesRead.Inc(ctx, 1)
	}
	return nil
}

// read queries one range page by page and emits its records.
func (f *datastoreReadFn) read(ctx context.Context, start, end *datastore.Key, emit func(record.Batch), dead func(string)) error {
	base := datastore.NewQuery(f.Cfg.Kind).Namespace(f.Cfg.Namespace)
	if start != nil {
		base = base.FilterField("__key__", ">=", start)
	}
	if end != nil {
		base = base.FilterField("__key__", "<", end)
	}
	base = base.Order("__key__")
	b := datastoreBatcher{emit: emit}
	limit := datastoreReadPage
	var cursor *datastore.Cursor
	for {
		q := base.Limit(limit)
		if cursor != nil {
			q = q.Start(*cursor)
		}
		datastoreQueries.Inc(ctx, 1)
		it := f.client.Run(ctx, q)
		n := 0
		shrink := false
		for {
			var props datastore.PropertyList
			key, err := it.Next(&props)
			if err == iterator.Done {
				break
			}
			if err != nil {
				if tooLargeResponse(err) && limit > 1 {
					// Resume after the last entity read, in smaller pages.
					shrink = true
					break
				}
				return fmt.Errorf("datastore source: reading %s range [%v, %v): %w%s", f.Cfg.source(), start, end, err, f.Cfg.readTimeHint(err))
			}
			n++
			rec, err := datastoredb.FromEntity(key, props)
			if err != nil {
				dead(record.RawDeadLetter(record.StageRead, f.Cfg.source(), datastoredb.KeyFromDatastore(key).String(), err))
				transforms.CountRead(ctx, 1)
				transforms.CountDeadLettered(ctx, 1)
				continue
			}
			b.add(ctx, rec, datastoredb.EntitySize(key, props))
		}
		if shrink || n == limit {
			if n > 0 {
				next, err := it.Cursor()
				if err != nil {
					return fmt.Errorf("datastore source: cursor in %s: %w", f.Cfg.source(), err)
				}
				cursor = &next
			}
			if shrink {
				limit = max(limit/2, 1)
			}
			continue
		}
		b.flush(ctx)
		return nil
	}
}

// tooLargeResponse reports a response over the gRPC receive limit.
func tooLargeResponse(err error) bool {
	return status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "larger than max")
}

// datastoreBatcher groups records into batches of at most
// transforms.BatchSize records and about datastoreBatchBytes.
type datastoreBatcher struct {
	emit  func(record.Batch)
	recs  []record.Record
	bytes int
}

func (b *datastoreBatcher) add(ctx context.Context, r record.Record, size int) {
	if len(b.recs) > 0 && b.bytes+size > datastoreBatchBytes {
		b.flush(ctx)
	}
	b.recs = append(b.recs, r)
	b.bytes += size
	if len(b.recs) >= transforms.BatchSize {
		b.flush(ctx)
	}
}

func (b *datastoreBatcher) flush(ctx context.Context) {
	if len(b.recs) == 0 {
		return
	}
	n := len(b.recs)
	b.emit(record.Batch{Recs: b.recs})
	transforms.CountRead(ctx, int64(n))
	b.recs = nil // the emitted batch is its consumers'

	b.bytes = 0
}
