package source

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms"
)

// Counters of DatastoreSample (namespace rekey).
var (
	// DatastoreSampleScanned is 1 when the sample's keys came from a
	// keys-only scan of the kind, 0 when from the __scatter__ index.
	DatastoreSampleScanned = beam.NewCounter("rekey", "datastore_sample_scanned")
	// DatastoreSampleKeys counts the sampled keys, DatastoreSampleGone
	// those whose entity was deleted before it was read.
	DatastoreSampleKeys = beam.NewCounter("rekey", "datastore_sample_keys")
	DatastoreSampleGone = beam.NewCounter("rekey", "datastore_sample_gone")
	// DatastoreSampleOf is the number of entities of the kind the sample
	// was taken from: counted by the scan, or the kind's statistics
	// (absent when neither is there).
	DatastoreSampleOf = beam.NewCounter("rekey", "datastore_sample_of")
)

func init() {
	register.DoFn3x1[context.Context, []byte, func(int, string), error](&datastoreSampleKeysFn{})
	register.DoFn5x1[context.Context, int, func(*string) bool, func(record.Batch), func(string), error](&datastoreGetFn{})
}

// datastoreSampleGroups is how many groups the sampled keys are dealt to,
// so the reads spread over workers.
const datastoreSampleGroups = 16

// datastoreGetBatch is how many keys one GetMulti reads.
const datastoreGetBatch = 500

// DatastoreSample reads a random sample of up to n entities of a kind
// without reading the others: one DoFn samples n keys (sampleDatastoreKeys:
// a keys-only query ordered by the __scatter__ property the service keeps
// on a pseudo-random fraction of entities, or, where that yields nothing
// — the emulator, a small kind — a reservoir sample of a keys-only scan),
// a GroupByKey deals them to workers, and a DoFn reads their entities with
// GetMulti into record batches. An entity deleted in between is left out
// (DatastoreSampleGone); one that cannot be converted is a dead letter.
func DatastoreSample(s beam.Scope, cfg DatastoreConfig, n int) (batches, deadLetters beam.PCollection) {
	s = s.Scope("source.DatastoreSample")
	keys := beam.ParDo(s, &datastoreSampleKeysFn{Cfg: cfg, N: n}, beam.Impulse(s))
	return beam.ParDo2(s, &datastoreGetFn{Cfg: cfg}, beam.GroupByKey(s, keys))
}

type datastoreSampleKeysFn struct {
	Cfg DatastoreConfig `json:"cfg"`
	N   int             `json:"n"`
}

func (f *datastoreSampleKeysFn) ProcessElement(ctx context.Context, _ []byte, emit func(int, string)) error {
	if err := f.Cfg.check(); err != nil {
		return err
	}
	c, err := datastoredb.Client(ctx, f.Cfg.Project, f.Cfg.Database)
	if err != nil {
		return err
	}
	defer c.Close()
	sample, seen, scanned, err := sampleDatastoreKeys(ctx, c, f.Cfg, f.N)
	if err != nil {
		return err
	}
	if scanned {
		DatastoreSampleScanned.Inc(ctx, 1)
		DatastoreSampleOf.Inc(ctx, int64(seen))
	} else if n, ok := kindCount(ctx, c, f.Cfg); ok {
		DatastoreSampleOf.Inc(ctx, n)
	}
	DatastoreSampleKeys.Inc(ctx, int64(len(sample)))
	for i, k := range sample {
		emit(i%datastoreSampleGroups, datastoredb.KeyToDatastore(k).Encode())
	}
	return nil
}

type datastoreGetFn struct {
	Cfg DatastoreConfig `json:"cfg"`

	client  *datastore.Client
	release func()
}

func (f *datastoreGetFn) Setup(ctx context.Context) error {
	c, release, err := datastoredb.Shared(f.Cfg.Project, f.Cfg.Database, "", nil)
	f.client, f.release = c, release
	return err
}

func (f *datastoreGetFn) Teardown() error {
	if f.release != nil {
		f.release()
	}
	f.client, f.release = nil, nil
	return nil
}

func (f *datastoreGetFn) ProcessElement(ctx context.Context, _ int, encoded func(*string) bool, emit func(record.Batch), dead func(string)) error {
	b := datastoreBatcher{emit: emit}
	var keys []*datastore.Key
	var enc string
	for encoded(&enc) {
		k, err := datastore.DecodeKey(enc)
		if err != nil {
			return fmt.Errorf("datastore sample: bad key %q: %w", enc, err)
		}
		keys = append(keys, k)
		if len(keys) == datastoreGetBatch {
			if err := f.get(ctx, keys, &b, dead); err != nil {
				return err
			}
			keys = keys[:0]
		}
	}
	if err := f.get(ctx, keys, &b, dead); err != nil {
		return err
	}
	b.flush(ctx)
	return nil
}

// get reads keys' entities and adds them to b.
func (f *datastoreGetFn) get(ctx context.Context, keys []*datastore.Key, b *datastoreBatcher, dead func(string)) error {
	if len(keys) == 0 {
		return nil
	}
	props := make([]datastore.PropertyList, len(keys))
	err := f.client.GetMulti(ctx, keys, props)
	var multi datastore.MultiError
	if err != nil && !errors.As(err, &multi) {
		return fmt.Errorf("datastore sample: reading %d entities of %s: %w", len(keys), f.Cfg.source(), err)
	}
	for i, k := range keys {
		if multi != nil && multi[i] != nil {
			if errors.Is(multi[i], datastore.ErrNoSuchEntity) {
				DatastoreSampleGone.Inc(ctx, 1)
				continue
			}
			return fmt.Errorf("datastore sample: reading %s: %w", k, multi[i])
		}
		rec, err := datastoredb.FromEntity(k, props[i])
		if err != nil {
			dead(record.RawDeadLetter(record.StageRead, f.Cfg.source(), datastoredb.KeyFromDatastore(k).String(), err))
			transforms.CountRead(ctx, 1)
			transforms.CountDeadLettered(ctx, 1)
			continue
		}
		b.add(ctx, rec, datastoredb.EntitySize(k, props[i]))
	}
	return nil
}
