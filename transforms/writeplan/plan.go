// Package writeplan orders a migration's writes so that they spread over the
// whole new key space at every moment while each commit stays within a
// narrow key range.
//
// A range-partitioned store (Spanner, Datastore) splits its key space into
// ranges served by different servers. Records usually arrive sorted by
// their old key, and a rewrite that keeps some of that order (or a plain
// copy) sends every write of a moment to one range. Shuffling alone does
// not help either: a commit of 500 records drawn from all over the key
// space touches every range at once. Writes does both things a store
// wants:
//
//  1. a global shuffle: every record gets a uniformly random shard key, and
//     a GroupByKey gathers each shard's records, a uniform sample of the
//     whole key space whatever the input order;
//  2. per shard, up to Buffer records are sorted by the store's key order
//     and cut into batches of at most BatchRows records, each a narrow key
//     range (one commit), and the batches are emitted in a random order in
//     which every run of consecutive batches is spread evenly over the key
//     space (writeorder.Order), continued from one buffer to the next.
//
// The sinks commit each planned batch on its own (their CommitPerElement
// option), so commits stay key-local.
//
// The number of shard keys (ShardKeys) is Shards, with two exceptions that
// depend on the number of records, counted before the shuffle. It is never
// less than keeps every shard within one buffer (total / (0.8 × Buffer)):
// a shard larger than its buffer would be sorted in chunks taken in
// arrival order, so sorted input would come out chunk by chunk, low keys
// first on every worker at once, which is the hotspot again. And a small
// input gets fewer shards, so that every shard makes at least 16 batches
// (total / (16 × BatchRows)), each then within about 1/16 of the key space.
//
// With Local set, step 1 is skipped: each worker plans the records it
// has, a buffer at a time, as they come (like Java SpannerIO's
// sort-and-batch). That is only right when the new keys are scattered
// (rewrite.Scatters), so that any run of input records is already a
// sample of the whole key space; then writing starts with the first
// buffer instead of after the whole input has been read and shuffled.
//
// With Spill set (a local directory the workers share, see
// internal/write/spill), what goes through the shuffle stays on that disk: the
// records are written there as they come and as they are dealt, and only
// references to them pass through the runner, which on a local runner
// would otherwise hold the whole input in memory several times over.
//
// Each record draws its own shard key (records dealt in whole pieces would
// make a shard a few clumps of neighbouring keys, and its batches would
// span them all), and the draws are stratified: a worker gathers up to
// Buffer records, sorts them, and deals each run of neighbouring records
// to distinct shards, so every shard holds an even share of every part of
// the key space (writeorder.Deal). That also keeps Beam's per-element cost low: one
// element per (gathered records, shard key) pair.
package writeplan

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"math/rand/v2"
	"sync/atomic"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"

	"github.com/rekeyio/rekey/internal/write/spill"
	"github.com/rekeyio/rekey/internal/write/writeorder"
	"github.com/rekeyio/rekey/record"
	_ "github.com/rekeyio/rekey/transforms/batchcoder" // record.Batch's coder
)

func init() {
	register.Function1x1(batchLen)
	register.DoFn3x1[[]byte, func(*int64) bool, func(int, []byte), error](&shardFn{})
	register.Emitter2[int, []byte]()
	register.DoFn4x1[context.Context, int, func(*[]byte) bool, func(record.Batch), error](&planFn{})
	register.Iter1[[]byte]()
	register.Emitter1[[]byte]()
	register.DoFn3x1[context.Context, record.Batch, func(record.Batch), error](&localPlanFn{})
	register.DoFn2x1[record.Batch, func([]byte), error](&spillFn{})
	register.Function1x1(encodeBatch)
}

// Writes plans the writes of record batches (record.Batch) and returns
// the planned batches, each of at most BatchRows records within a narrow
// key range, in write order. It panics if opts are invalid.
//
// The local plan takes and emits record.Batch values, so a source, the
// plan and a sink fused in one stage pass their records without encoding
// them. The global plan shuffles them, so it encodes them first (or
// spills them, Spill) and sends []byte through the GroupByKey; dealing
// them to shard keys reads each record's key in place (record.EachRaw)
// and passes the records on still encoded, so a record is encoded once
// before the shuffle and decoded once after it.
func Writes(s beam.Scope, opts writeorder.Options, batches beam.PCollection) beam.PCollection {
	s = s.Scope("writeplan.Writes")
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	for opts.Seed == 0 {
		opts.Seed = rand.Int64()
	}
	if opts.Local {
		return beam.ParDo(s, &localPlanFn{Opts: opts}, batches)
	}
	if opts.Spill != "" {
		batches = beam.ParDo(s, &spillFn{Dir: opts.Spill}, batches)
	} else {
		batches = beam.ParDo(s, encodeBatch, batches)
	}
	total := stats.Sum(s, beam.ParDo(s, batchLen, batches))
	keyed := beam.ParDo(s, &shardFn{Opts: opts}, batches, beam.SideInput{Input: total})
	return beam.ParDo(s, &planFn{Opts: opts}, beam.GroupByKey(s, keyed))
}

// buffer gathers records with their keys, for sorting.
type buffer struct {
	keyer *writeorder.Keyer
	items []writeorder.Item
	arena []byte
	// raws holds the encodings of the items of addRaw.
	raws []byte
}

// add decodes batch and appends its records, calling full each time the
// buffer reaches limit records.
func (b *buffer) add(batch []byte, limit int, full func()) error {
	recs, err := record.DecodeBatch(batch)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	b.addRecords(recs, limit, full)
	return nil
}

// addRecords appends recs, calling full each time the buffer reaches
// limit records. It changes neither recs nor its records (a batch's
// records are read-only, record.Batch): the buffer sorts its own items.
func (b *buffer) addRecords(recs []record.Record, limit int, full func()) {
	for i := range recs {
		start := len(b.arena)
		b.arena = b.keyer.Append(b.arena, &recs[i])
		b.items = append(b.items, writeorder.Item{Key: b.arena[start:len(b.arena):len(b.arena)], Rec: recs[i]})
		if len(b.items) >= limit {
			full()
		}
	}
}

// addRaw appends batch's records still encoded (record.EachRaw), calling
// full each time the buffer reaches limit records: what only passes the
// records on to the shuffle reads their keys and copies their bytes
// instead of decoding and encoding them again.
func (b *buffer) addRaw(batch []byte, limit int, full func()) error {
	err := record.EachRaw(batch, func(raw []byte, rec *record.Record) error {
		start := len(b.arena)
		b.arena = b.keyer.Append(b.arena, rec)
		at := len(b.raws)
		b.raws = append(b.raws, raw...)
		b.items = append(b.items, writeorder.Item{Key: b.arena[start:len(b.arena):len(b.arena)], Raw: b.raws[at:len(b.raws):len(b.raws)]})
		if len(b.items) >= limit {
			full()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	return nil
}

// encodeBatch is a batch's encoding, for the global plan's shuffle.
func encodeBatch(b record.Batch) []byte { return b.Encode() }

// reset empties the buffer and lets its records go.
func (b *buffer) reset() {
	clear(b.items)
	b.items, b.arena, b.raws = b.items[:0], b.arena[:0], b.raws[:0]
}

// batchLen is the number of records in a batch, read from its header or
// its spill reference (0 for a corrupt batch, which shardFn then
// reports).
func batchLen(batch []byte) int64 {
	if spill.IsRef(batch) {
		return int64(max(spill.Len(batch), 0))
	}
	return int64(max(record.BatchLen(batch), 0))
}

// spillFn writes each batch to a file in Dir and passes its reference on
// (see internal/write/spill).
type spillFn struct {
	Dir string `json:"dir"`

	w *spill.Writer
}

func (f *spillFn) Setup() { f.w = spill.NewWriter(f.Dir) }

func (f *spillFn) ProcessElement(batch record.Batch, emit func([]byte)) error {
	ref, err := f.w.Put(batch.Encode(), batch.Len())
	if err == nil {
		err = f.w.Flush()
	}
	if err != nil {
		return err
	}
	emit(ref)
	return nil
}

func (f *spillFn) FinishBundle(_ func([]byte)) error { return f.w.Close() }

// shardFn deals records to random shard keys. It gathers up to Buffer
// records of a bundle, sorts them by key and deals them evenly (writeorder.Deal), one
// element per (gathered records, shard key) pair, so that an element
// carries many records even when there are more shard keys than records
// in an input batch.
type shardFn struct {
	Opts writeorder.Options `json:"opts"`

	buffer
	keys   int
	hash   hash.Hash64
	reader spill.Reader
	// With Spill: the bundle's file, and what each shard key has in it.
	writer *spill.Writer
	spills []spilled
}

// spilled is what a bundle of shardFn wrote to its spill file for one
// shard key: n records in segs.
type spilled struct {
	n    int
	segs []spill.Segment
}

func (f *shardFn) Setup() error {
	var err error
	f.keyer, err = writeorder.NewKeyer(f.Opts)
	if f.Opts.Spill != "" {
		f.writer = spill.NewWriter(f.Opts.Spill)
	}
	return err
}

func (f *shardFn) Teardown() { f.reader.Close() }

// StartBundle and FinishBundle take the side input too, as Beam requires.
// It is the sum of the batches' lengths, as an iterable: a singleton
// would be missing where there are no batches, and the direct runner
// still builds it for FinishBundle.
func (f *shardFn) StartBundle(_ func(*int64) bool, _ func(int, []byte)) {
	f.reset()
	f.hash = fnv.New64a()
	f.spills = f.spills[:0]
}

func (f *shardFn) ProcessElement(batch []byte, totals func(*int64) bool, emit func(int, []byte)) error {
	if f.hash == nil {
		f.StartBundle(totals, emit)
	}
	var total, n int64
	for totals(&n) {
		total += n
	}
	f.keys = f.Opts.ShardKeys(total)
	return f.reader.Each(batch, func(batch []byte) error {
		f.hash.Write(batch)
		var ferr error
		err := f.addRaw(batch, f.Opts.Buffer, func() { ferr = errors.Join(ferr, f.flush(emit)) })
		return errors.Join(err, ferr)
	})
}

// FinishBundle deals what is left and, with Spill, emits one reference
// per shard key to all it got in the bundle.
func (f *shardFn) FinishBundle(_ func(*int64) bool, emit func(int, []byte)) error {
	err := f.flush(emit)
	f.reader.Close()
	if f.writer == nil || err != nil {
		return err
	}
	// The references may be read once the records are written out.
	if err := f.writer.Flush(); err != nil {
		return err
	}
	for shard, sp := range f.spills {
		if sp.n > 0 {
			emit(shardKey(shard, f.keys), f.writer.Ref(sp.n, sp.segs))
		}
	}
	return f.writer.Close()
}

// flush deals the buffered records to the shard keys and emits them, one
// batch per shard key (with Spill, it appends them to the bundle's file
// instead, see FinishBundle).
func (f *shardFn) flush(emit func(int, []byte)) error {
	if len(f.items) == 0 {
		return nil
	}
	// Seeded by the records' content, so a retried bundle deals them the
	// same way.
	rng := rand.New(rand.NewPCG(uint64(f.Opts.Seed), f.hash.Sum64()^uint64(len(f.items))))
	writeorder.Sort(f.items)
	for shard, raws := range writeorder.DealBy(f.items, f.keys, rng, func(it *writeorder.Item) []byte { return it.Raw }) {
		if len(raws) == 0 {
			continue
		}
		b := encodeRaws(raws)
		if f.writer == nil {
			emit(shardKey(shard, f.keys), b)
			continue
		}
		seg, err := f.writer.Append(b)
		if err != nil {
			return err
		}
		for len(f.spills) <= shard {
			f.spills = append(f.spills, spilled{})
		}
		f.spills[shard].n += len(raws)
		f.spills[shard].segs = append(f.spills[shard].segs, seg)
	}
	f.reset()
	return nil
}

// encodeRaws is the batch of the records encoded in raws.
func encodeRaws(raws [][]byte) []byte {
	size := 16
	for _, r := range raws {
		size += len(r)
	}
	b := record.AppendBatchHeader(make([]byte, 0, size), len(raws))
	for _, r := range raws {
		b = append(b, r...)
	}
	return b
}

// shardKey is the GroupByKey key of shard key shard of keys: both in one
// int, so that planFn learns the number of keys without a side input (on
// prism, a stage with a side input keeps the runner's scheduler busy
// while its bundle runs). ShardKeys is below 2^31.
func shardKey(shard, keys int) int { return keys<<32 | shard }

// splitShardKey is the inverse of shardKey.
func splitShardKey(k int) (shard, keys int) { return k & (1<<32 - 1), k >> 32 }

// planFn sorts each shard's records a buffer at a time and emits them in
// planned batches.
type planFn struct {
	Opts writeorder.Options `json:"opts"`

	buffer
	phase  float64
	phased bool
	reader spill.Reader
}

func (f *planFn) Setup() error {
	var err error
	f.keyer, err = writeorder.NewKeyer(f.Opts)
	return err
}

func (f *planFn) ProcessElement(ctx context.Context, key int, values func(*[]byte) bool, emit func(record.Batch)) error {
	shard, _ := splitShardKey(key)
	if !f.phased {
		// One phase per worker, drawn from its first shard: its buffers'
		// orders continue each other, and workers differ.
		f.phase = rand.New(rand.NewPCG(uint64(f.Opts.Seed), uint64(shard))).Float64()
		f.phased = true
	}
	flush := func() {
		if len(f.items) == 0 {
			return
		}
		// Under a ramp-up, the sink cuts each batch into commits sized
		// by the rate in force as each is sent (storewrite.Pacer).
		for _, b := range writeorder.Plan(f.items, f.Opts.BatchRows, f.phase) {
			emit(record.Batch{Recs: b})
		}
		PlannedBuffer.Update(ctx, int64(len(f.items)))
		f.reset()
	}
	var batch []byte
	for values(&batch) {
		if err := f.reader.Each(batch, func(b []byte) error { return f.add(b, f.Opts.Buffer, flush) }); err != nil {
			return err
		}
	}
	flush()
	return nil
}

func (f *planFn) Teardown() { f.reader.Close() }

// localPlanFn plans the records of a bundle a buffer at a time, as planFn
// does a shard's: when the new keys are scattered, any run of records in
// input order is already a sample of the whole new key space, so the
// global shuffle only delays the first write (it waits for the whole
// input) and is skipped. Like Java SpannerIO's sort-and-batch, with the
// batches' order randomised.
type localPlanFn struct {
	Opts writeorder.Options `json:"opts"`

	buffer
	phase float64
}

func (f *localPlanFn) Setup() error {
	var err error
	f.keyer, err = writeorder.NewKeyer(f.Opts)
	// Each DoFn instance's batches start at a different place, drawn
	// from the seed and the instance's number in the process.
	f.phase = rand.New(rand.NewPCG(uint64(f.Opts.Seed), localPlanners.Add(1))).Float64()
	return err
}

// localPlanners numbers the process's localPlanFn instances.
var localPlanners atomic.Uint64

func (f *localPlanFn) ProcessElement(ctx context.Context, batch record.Batch, emit func(record.Batch)) error {
	f.addRecords(batch.Recs, f.Opts.Buffer, func() { f.flush(ctx, emit) })
	return nil
}

func (f *localPlanFn) FinishBundle(ctx context.Context, emit func(record.Batch)) {
	f.flush(ctx, emit)
}

func (f *localPlanFn) flush(ctx context.Context, emit func(record.Batch)) {
	if len(f.items) == 0 {
		return
	}
	// Plan puts each planned batch in a new slice: it is its consumers'.
	for _, b := range writeorder.Plan(f.items, f.Opts.BatchRows, f.phase) {
		emit(record.Batch{Recs: b})
	}
	PlannedBuffer.Update(ctx, int64(len(f.items)))
	f.reset()
}

// PlannedBuffer is the distribution of the number of records sorted at
// once (namespace rekey): at most Buffer; close to 0.8 × Buffer when the
// input is large.
var PlannedBuffer = beam.NewDistribution("rekey", "plan_buffer")
