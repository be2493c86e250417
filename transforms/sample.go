package transforms

import (
	"bufio"
	"cmp"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"   // gs:// paths
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // local paths
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/google/uuid"

	"github.com/rekeyio/rekey/record"
)

func init() {
	register.DoFn3x1[context.Context, record.Batch, func(int, []byte), error](&sampleFn{})
	register.Emitter2[int, []byte]()
	register.DoFn4x1[context.Context, int, func(*[]byte) bool, func([]byte), error](&cutoffFn{})
	register.Iter1[[]byte]()
	register.DoFn3x1[context.Context, []byte, func(record.Batch), error](&readSampleFn{})
	register.Emitter1[[]byte]()
}

// Sampled counts the records a Sample kept.
var Sampled = beam.NewCounter("rekey", "sampled")

// Sample keeps a uniform random sample of exactly n of the records in
// batches (all of them if there are fewer), without replacement, whatever
// their order or how the runner bundles them: every record draws a random
// priority and the n smallest priorities are kept ("bottom-k", a
// reservoir sample that can be computed in parts).
//
// The records never cross a stage boundary (a runner such as prism
// buffers everything that does, several times over). Each bundle writes
// the records that are among its own n smallest priorities when they
// come to a spill file in dir, and sends on only its n smallest
// priorities with the file's name. One worker finds the cutoff, the nth
// smallest priority of all, and says for every file how many of its
// records are kept; the same stage then reads each file back and emits
// the records under the cutoff, in the order of their priorities (a
// random order, as a merge of the bundles' candidates would give).
//
// dir (local or gs://) must be reachable by every worker, which may run
// in other processes with their own temporary directories; the spill
// files are left there (RemoveSpill removes them after the run).
func Sample(s beam.Scope, n int, dir string, batches beam.PCollection) beam.PCollection {
	s = s.Scope("Sample")
	parts := beam.ParDo(s, &sampleFn{N: n, Dir: dir}, batches)
	files := beam.ParDo(s, &cutoffFn{N: n}, beam.GroupByKey(s, parts))
	return beam.ParDo(s, &readSampleFn{PassBytes: samplePassBytes}, files)
}

// samplePassBytes is about the most bytes of kept records readSampleFn
// holds at once to sort them by priority: a file with more is read in
// several passes, each over a range of priorities.
const samplePassBytes = 64 << 20

// RemoveSpill removes the spill files Sample wrote in dir.
func RemoveSpill(ctx context.Context, dir string) error {
	glob := spillPath(dir, "*")
	fs, err := filesystem.New(ctx, glob)
	if err != nil {
		return err
	}
	defer fs.Close()
	names, err := fs.List(ctx, glob)
	if err != nil {
		return err
	}
	rm, ok := fs.(filesystem.Remover)
	if !ok {
		return fmt.Errorf("sample: cannot remove files from %s", dir)
	}
	for _, name := range names {
		if err := rm.Remove(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// spillPath is the spill file name in dir (local or gs://).
func spillPath(dir, name string) string {
	return strings.TrimSuffix(dir, "/") + "/sample-" + name + ".spill"
}

// priorities is a max-heap of the n smallest priorities seen.
type priorities struct {
	n int
	p []uint64
}

func (b *priorities) Len() int           { return len(b.p) }
func (b *priorities) Less(i, j int) bool { return b.p[i] > b.p[j] }
func (b *priorities) Swap(i, j int)      { b.p[i], b.p[j] = b.p[j], b.p[i] }
func (b *priorities) Push(x any)         { b.p = append(b.p, x.(uint64)) }
func (b *priorities) Pop() any           { x := b.p[len(b.p)-1]; b.p = b.p[:len(b.p)-1]; return x }

// accepts reports whether priority p is among the n smallest so far.
func (b *priorities) accepts(p uint64) bool { return len(b.p) < b.n || p < b.p[0] }

// offer keeps p if it is among the n smallest.
func (b *priorities) offer(p uint64) {
	switch {
	case len(b.p) < b.n:
		heap.Push(b, p)
	case p < b.p[0]:
		b.p[0] = p
		heap.Fix(b, 0)
	}
}

// chunkPriorities is the most priorities a chunk carries.
const chunkPriorities = 1 << 16

// chunks encodes a spill file's name, the number of records in it and
// its bundle's priorities in elements of at most chunkPriorities: the
// name's length (4 bytes), the name, the number of records (8 bytes), the
// number of priorities (4 bytes) and each priority (8 bytes), big-endian.
func chunks(name string, spilled uint64, ps []uint64, emit func([]byte)) {
	for start := 0; start < len(ps); start += chunkPriorities {
		part := ps[start:min(start+chunkPriorities, len(ps))]
		out := make([]byte, 0, 16+len(name)+8*len(part))
		out = binary.BigEndian.AppendUint32(out, uint32(len(name)))
		out = append(out, name...)
		out = binary.BigEndian.AppendUint64(out, spilled)
		out = binary.BigEndian.AppendUint32(out, uint32(len(part)))
		for _, p := range part {
			out = binary.BigEndian.AppendUint64(out, p)
		}
		emit(out)
	}
}

// decodeChunk reads a chunk written by chunks.
func decodeChunk(b []byte) (name string, spilled uint64, ps []byte, err error) {
	if len(b) < 4 {
		return "", 0, nil, errors.New("sample: short chunk")
	}
	size := int(binary.BigEndian.Uint32(b))
	if len(b) < 16+size {
		return "", 0, nil, errors.New("sample: chunk cut in its file name")
	}
	name, spilled, b = string(b[4:4+size]), binary.BigEndian.Uint64(b[4+size:]), b[12+size:]
	n := int(binary.BigEndian.Uint32(b))
	if len(b)-4 != 8*n {
		return "", 0, nil, fmt.Errorf("sample: a chunk of %d priorities holds %d bytes", n, len(b)-4)
	}
	return name, spilled, b[4:], nil
}

// sampleFn draws every record's priority, writes the records among its
// bundle's n smallest priorities so far to the bundle's spill file (its
// priority, 8 bytes big-endian, the length of its encoding as a uvarint,
// and the encoding: a one-record record.EncodeBatch) and at the end of
// the bundle sends the bundle's n smallest priorities.
type sampleFn struct {
	N   int    `json:"n"`
	Dir string `json:"dir"`

	rng     *rand.Rand
	b       *priorities
	name    string
	spilled uint64
	w       io.WriteCloser
	buf     *bufio.Writer
	rec     []byte
}

func (f *sampleFn) Setup() { f.rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())) }

func (f *sampleFn) StartBundle(_ context.Context, _ func(int, []byte)) {
	f.b, f.name, f.w, f.buf, f.spilled = &priorities{n: f.N}, "", nil, nil, 0
}

func (f *sampleFn) ProcessElement(ctx context.Context, batch record.Batch, _ func(int, []byte)) error {
	recs := batch.Recs
	for i := range recs {
		p := f.rng.Uint64()
		if !f.b.accepts(p) {
			continue
		}
		f.b.offer(p)
		if f.w == nil {
			if err := f.create(ctx); err != nil {
				return err
			}
		}
		f.rec = binary.BigEndian.AppendUint64(f.rec[:0], p)
		enc := record.EncodeBatch(recs[i : i+1])
		f.rec = binary.AppendUvarint(f.rec, uint64(len(enc)))
		f.rec = append(f.rec, enc...)
		if _, err := f.buf.Write(f.rec); err != nil {
			return fmt.Errorf("sample: writing %s: %w", f.name, err)
		}
		f.spilled++
	}
	return nil
}

func (f *sampleFn) create(ctx context.Context) error {
	name := spillPath(f.Dir, uuid.NewString())
	fs, err := filesystem.New(ctx, name)
	if err != nil {
		return err
	}
	w, err := fs.OpenWrite(ctx, name)
	fs.Close()
	if err != nil {
		return fmt.Errorf("sample: creating %s: %w", name, err)
	}
	f.name, f.w, f.buf = name, w, bufio.NewWriterSize(w, 1<<20)
	return nil
}

func (f *sampleFn) FinishBundle(_ context.Context, emit func(int, []byte)) error {
	if f.w == nil {
		return nil
	}
	err := f.buf.Flush()
	if cerr := f.w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sample: writing %s: %w", f.name, err)
	}
	chunks(f.name, f.spilled, f.b.p, func(c []byte) { emit(0, c) })
	f.b, f.w, f.buf = nil, nil, nil
	return nil
}

// drawn is a priority and the index of the file its record is in.
type drawn struct {
	p    uint64
	file uint32
}

// drawnHeap is a max-heap of the n smallest priorities seen, by priority.
type drawnHeap []drawn

func (h drawnHeap) Len() int           { return len(h) }
func (h drawnHeap) Less(i, j int) bool { return h[i].p > h[j].p }
func (h drawnHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *drawnHeap) Push(x any)        { *h = append(*h, x.(drawn)) }
func (h *drawnHeap) Pop() any          { x := (*h)[len(*h)-1]; *h = (*h)[:len(*h)-1]; return x }

// cutoffFn finds the nth smallest of all the bundles' priorities, the
// cutoff, and emits for every spill file what readSampleFn needs to read
// its kept records (see fileCut).
type cutoffFn struct {
	N int `json:"n"`
}

// fileCut says which records of a spill file are kept: those of a
// priority below Cutoff, and the first Equal (in file order) of priority
// Cutoff; Kept is their number, of the Spilled records in the file.
type fileCut struct {
	Name                 string
	Cutoff               uint64
	Equal, Kept, Spilled uint64
}

func (c fileCut) encode() []byte {
	out := binary.BigEndian.AppendUint64(nil, c.Cutoff)
	out = binary.BigEndian.AppendUint64(out, c.Equal)
	out = binary.BigEndian.AppendUint64(out, c.Kept)
	out = binary.BigEndian.AppendUint64(out, c.Spilled)
	return append(out, c.Name...)
}

func decodeFileCut(b []byte) (fileCut, error) {
	if len(b) < 32 {
		return fileCut{}, errors.New("sample: short file cut")
	}
	return fileCut{Cutoff: binary.BigEndian.Uint64(b), Equal: binary.BigEndian.Uint64(b[8:]), Kept: binary.BigEndian.Uint64(b[16:]), Spilled: binary.BigEndian.Uint64(b[24:]), Name: string(b[32:])}, nil
}

// cut computes the files' cuts from the bundles' chunks.
func cut(n int, next func(*[]byte) bool) ([]fileCut, error) {
	index := map[string]uint32{}
	var names []string
	var spilled []uint64
	h := make(drawnHeap, 0, min(n, 1<<20))
	var chunk []byte
	for next(&chunk) {
		name, n1, ps, err := decodeChunk(chunk)
		if err != nil {
			return nil, err
		}
		f, ok := index[name]
		if !ok {
			f = uint32(len(names))
			index[name] = f
			names = append(names, name)
			spilled = append(spilled, n1)
		}
		for i := 0; i < len(ps); i += 8 {
			p := binary.BigEndian.Uint64(ps[i:])
			switch {
			case len(h) < n:
				heap.Push(&h, drawn{p, f})
			case p < h[0].p:
				h[0] = drawn{p, f}
				heap.Fix(&h, 0)
			}
		}
	}
	cutoff, equal := uint64(math.MaxUint64), false
	if len(h) == n && n > 0 {
		cutoff, equal = h[0].p, true
	}
	cuts := make([]fileCut, len(names))
	for i, name := range names {
		cuts[i] = fileCut{Name: name, Cutoff: cutoff, Spilled: spilled[i]}
		if !equal {
			cuts[i].Equal = math.MaxUint64 // fewer than n: every record
		}
	}
	for _, d := range h {
		cuts[d.file].Kept++
		if equal && d.p == cutoff {
			cuts[d.file].Equal++
		}
	}
	return cuts, nil
}

func (f *cutoffFn) ProcessElement(ctx context.Context, _ int, chunks func(*[]byte) bool, emit func([]byte)) error {
	cuts, err := cut(f.N, chunks)
	if err != nil {
		return err
	}
	for _, c := range cuts {
		if c.Kept > 0 {
			emit(c.encode())
		}
	}
	return nil
}

// readSampleFn reads a spill file's kept records (fileCut) and emits
// them in batches of BatchSize, in the order of their priorities: in
// passes over the file, each over a range of priorities whose records
// take about PassBytes, which it sorts.
type readSampleFn struct {
	PassBytes int64 `json:"pass_bytes"`
}

// spillRecord is a kept record read back: its priority and where its
// encoding is in the pass's arena.
type spillRecord struct {
	p          uint64
	start, end int
}

func (f *readSampleFn) ProcessElement(ctx context.Context, elem []byte, emit func(record.Batch)) error {
	c, err := decodeFileCut(elem)
	if err != nil {
		return err
	}
	fs, err := filesystem.New(ctx, c.Name)
	if err != nil {
		return err
	}
	defer fs.Close()
	size, err := fs.Size(ctx, c.Name)
	if err != nil {
		return fmt.Errorf("sample: %s: %w", c.Name, err)
	}
	// The kept records' share of the file's bytes, from their share of
	// its records.
	keptBytes := float64(size)
	if c.Spilled > 0 && c.Kept < c.Spilled {
		keptBytes *= float64(c.Kept) / float64(c.Spilled)
	}
	passes := max(1, int(math.Ceil(keptBytes/float64(max(f.PassBytes, 1)))))
	// Pass i takes the priorities from bound(i) up to bound(i+1); the
	// last one up to the cutoff, with those equal to it.
	bound := func(i int) uint64 {
		hi, lo := bits.Mul64(c.Cutoff, uint64(i))
		q, _ := bits.Div64(hi, lo, uint64(passes))
		return q
	}
	// Sized for a pass's share with some room, so that neither grows
	// much.
	kept := make([]spillRecord, 0, int(float64(c.Kept)/float64(passes)*1.1)+64)
	arena := make([]byte, 0, int(keptBytes/float64(passes)*1.1)+4096)
	total := uint64(0)
	for pass := range passes {
		lo, hi, last := bound(pass), bound(pass+1), pass == passes-1
		kept, arena = kept[:0], arena[:0]
		equal := uint64(0)
		want := func(p uint64) bool {
			in := p < c.Cutoff || (p == c.Cutoff && equal < c.Equal)
			if p == c.Cutoff {
				equal++
			}
			return in && p >= lo && (p < hi || last)
		}
		err := scanSpill(ctx, fs, c.Name, want, func(p uint64, enc []byte) {
			start := len(arena)
			arena = append(arena, enc...)
			kept = append(kept, spillRecord{p: p, start: start, end: len(arena)})
		})
		if err != nil {
			return err
		}
		slices.SortFunc(kept, func(a, b spillRecord) int { return cmp.Compare(a.p, b.p) })
		for start := 0; start < len(kept); start += BatchSize {
			part := kept[start:min(start+BatchSize, len(kept))]
			recs := make([]record.Record, 0, len(part))
			for _, k := range part {
				one, err := record.DecodeBatch(arena[k.start:k.end])
				if err != nil {
					return fmt.Errorf("sample: %s: %w", c.Name, err)
				}
				recs = append(recs, one...)
			}
			emit(record.Batch{Recs: recs})
		}
		total += uint64(len(kept))
	}
	if total != c.Kept {
		return fmt.Errorf("sample: %s holds %d of the records kept, want %d", c.Name, total, c.Kept)
	}
	Sampled.Inc(ctx, int64(total))
	return nil
}

// scanSpill visits the records of a spill file, in file order, whose
// priority want accepts (want sees every priority, in order); enc is
// valid only during the call.
func scanSpill(ctx context.Context, fs filesystem.Interface, name string, want func(p uint64) bool, visit func(p uint64, enc []byte)) error {
	rc, err := fs.OpenRead(ctx, name)
	if err != nil {
		return fmt.Errorf("sample: opening %s: %w", name, err)
	}
	defer rc.Close()
	r := bufio.NewReaderSize(rc, 1<<20)
	var head [8]byte
	var buf []byte
	for {
		if _, err := io.ReadFull(r, head[:]); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("sample: reading %s: %w", name, err)
		}
		size, err := binary.ReadUvarint(r)
		if err != nil {
			return fmt.Errorf("sample: reading %s: %w", name, io.ErrUnexpectedEOF)
		}
		p := binary.BigEndian.Uint64(head[:])
		if !want(p) {
			if _, err := r.Discard(int(size)); err != nil {
				return fmt.Errorf("sample: reading %s: %w", name, io.ErrUnexpectedEOF)
			}
			continue
		}
		if cap(buf) < int(size) {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		if _, err := io.ReadFull(r, buf); err != nil {
			return fmt.Errorf("sample: reading %s: %w", name, io.ErrUnexpectedEOF)
		}
		visit(p, buf)
	}
}
