package transforms

import (
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/record"
)

func init() {
	register.DoFn3x1[context.Context, []byte, func(int, []byte), error](&sampleFn{})
	register.Emitter2[int, []byte]()
	register.DoFn4x1[context.Context, int, func(*[]byte) bool, func([]byte), error](&mergeSampleFn{})
	register.Iter1[[]byte]()
}

// Sampled counts the records a Sample kept.
var Sampled = beam.NewCounter("rekey", "sampled")

// Sample keeps a uniform random sample of n of the records in batches
// (all of them if there are fewer), without replacement, whatever their
// order or how the runner bundles them: every record draws a random
// priority and the n smallest priorities are kept ("bottom-k", a
// reservoir sample that can be computed in parts). Each bundle keeps its
// own n smallest, and one worker merges the bundles' candidates, so no
// more than n records a bundle cross the shuffle.
func Sample(s beam.Scope, n int, batches beam.PCollection) beam.PCollection {
	s = s.Scope("Sample")
	parts := beam.ParDo(s, &sampleFn{N: n}, batches)
	return beam.ParDo(s, &mergeSampleFn{N: n}, beam.GroupByKey(s, parts))
}

// candidate is a record (one record's record.EncodeBatch: a few dozen
// bytes where the decoded record takes hundreds) with its priority.
type candidate struct {
	p   uint64
	enc []byte
}

// bottom is a max-heap of the n smallest priorities seen.
type bottom struct {
	n int
	c []candidate
}

func (b *bottom) Len() int           { return len(b.c) }
func (b *bottom) Less(i, j int) bool { return b.c[i].p > b.c[j].p }
func (b *bottom) Swap(i, j int)      { b.c[i], b.c[j] = b.c[j], b.c[i] }
func (b *bottom) Push(x any)         { b.c = append(b.c, x.(candidate)) }
func (b *bottom) Pop() any           { x := b.c[len(b.c)-1]; b.c = b.c[:len(b.c)-1]; return x }

// accepts reports whether a candidate of priority p would be kept.
func (b *bottom) accepts(p uint64) bool { return len(b.c) < b.n || p < b.c[0].p }

// offer keeps c if its priority is among the n smallest.
func (b *bottom) offer(c candidate) {
	switch {
	case len(b.c) < b.n:
		heap.Push(b, c)
	case c.p < b.c[0].p:
		b.c[0] = c
		heap.Fix(b, 0)
	}
}

// chunks encodes the kept candidates in elements of at most BatchSize
// records: their number (4 bytes), then each one's priority (8 bytes),
// length (4 bytes) and record, big-endian.
func (b *bottom) chunks(emit func([]byte)) {
	for start := 0; start < len(b.c); start += BatchSize {
		part := b.c[start:min(start+BatchSize, len(b.c))]
		size := 4
		for _, c := range part {
			size += 12 + len(c.enc)
		}
		out := binary.BigEndian.AppendUint32(make([]byte, 0, size), uint32(len(part)))
		for _, c := range part {
			out = binary.BigEndian.AppendUint64(out, c.p)
			out = binary.BigEndian.AppendUint32(out, uint32(len(c.enc)))
			out = append(out, c.enc...)
		}
		emit(out)
	}
}

// decodeChunk reads a chunk written by chunks.
func decodeChunk(b []byte, visit func(candidate)) error {
	if len(b) < 4 {
		return errors.New("sample: short chunk")
	}
	n := int(binary.BigEndian.Uint32(b))
	b = b[4:]
	for i := range n {
		if len(b) < 12 {
			return fmt.Errorf("sample: chunk cut at candidate %d of %d", i+1, n)
		}
		p, size := binary.BigEndian.Uint64(b), int(binary.BigEndian.Uint32(b[8:]))
		if len(b) < 12+size {
			return fmt.Errorf("sample: chunk cut in candidate %d of %d", i+1, n)
		}
		visit(candidate{p: p, enc: b[12 : 12+size]})
		b = b[12+size:]
	}
	if len(b) != 0 {
		return fmt.Errorf("sample: %d bytes after the chunk's %d candidates", len(b), n)
	}
	return nil
}

type sampleFn struct {
	N   int `json:"n"`
	b   *bottom
	rng *rand.Rand
}

func (f *sampleFn) Setup() { f.rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())) }

func (f *sampleFn) StartBundle(_ context.Context, _ func(int, []byte)) {
	f.b = &bottom{n: f.N}
}

func (f *sampleFn) ProcessElement(ctx context.Context, batch []byte, _ func(int, []byte)) error {
	recs, err := record.DecodeBatch(batch)
	if err != nil {
		return err
	}
	for i := range recs {
		if p := f.rng.Uint64(); f.b.accepts(p) {
			f.b.offer(candidate{p: p, enc: record.EncodeBatch(recs[i : i+1])})
		}
	}
	return nil
}

func (f *sampleFn) FinishBundle(_ context.Context, emit func(int, []byte)) error {
	f.b.chunks(func(c []byte) { emit(0, c) })
	f.b = nil
	return nil
}

type mergeSampleFn struct {
	N int `json:"n"`
}

func (f *mergeSampleFn) ProcessElement(ctx context.Context, _ int, chunks func(*[]byte) bool, emit func([]byte)) error {
	b := &bottom{n: f.N}
	var chunk []byte
	for chunks(&chunk) {
		// The candidates kept must not point into a chunk the runner may
		// reuse: each kept one is copied.
		if err := decodeChunk(chunk, func(c candidate) {
			if b.accepts(c.p) {
				b.offer(candidate{p: c.p, enc: append([]byte(nil), c.enc...)})
			}
		}); err != nil {
			return err
		}
	}
	Sampled.Inc(ctx, int64(len(b.c)))
	for start := 0; start < len(b.c); start += BatchSize {
		part := b.c[start:min(start+BatchSize, len(b.c))]
		recs := make([]record.Record, 0, len(part))
		for _, c := range part {
			one, err := record.DecodeBatch(c.enc)
			if err != nil {
				return fmt.Errorf("sample: %w", err)
			}
			recs = append(recs, one...)
		}
		emit(record.EncodeBatch(recs))
	}
	return nil
}
