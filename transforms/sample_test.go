package transforms

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/internal/testkit/beamtest"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
	keyrewrite "github.com/rekeyio/rekey/rewrite"
)

// numbered is record i of a test input: its position I and a payload P
// that depends on it, so a kept record can be checked whole.
func numbered(i int) record.Record {
	return record.Record{Table: "T", Fields: []record.Field{
		{Name: "I", Value: record.Int(int64(i))},
		{Name: "P", Value: record.Bytes(binary.BigEndian.AppendUint64(nil, uint64(i)*0x9e3779b97f4a7c15))},
	}}
}

// numberedBatches is records 0..n-1 in batches of size.
func numberedBatches(n, size int) []any { return numberedFrom(0, n, size) }

// numberedFrom is records from..from+n-1 in batches of size.
func numberedFrom(from, n, size int) []any {
	var out []any
	for start := from; start < from+n; start += size {
		recs := make([]record.Record, 0, size)
		for i := start; i < min(start+size, from+n); i++ {
			recs = append(recs, numbered(i))
		}
		out = append(out, record.Batch{Recs: recs})
	}
	return out
}

// positions checks that every record of batches is one of numbered(0..n-1),
// whole, and none comes twice; it returns their positions.
func positions(t *testing.T, n int, batches [][]byte) []int {
	t.Helper()
	seen := map[int]bool{}
	var out []int
	for _, b := range batches {
		recs, err := record.DecodeBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) > BatchSize {
			t.Errorf("a batch of %d records, more than %d", len(recs), BatchSize)
		}
		for _, r := range recs {
			v, _ := r.Get("I")
			i := int(v.Int)
			if want := numbered(i); i < 0 || i >= n || r.Describe() != want.Describe() || !slices.EqualFunc(r.Fields, want.Fields, sameField) {
				t.Fatalf("kept %s %v, which is not a record of the input", r.Describe(), r.Fields)
			}
			if seen[i] {
				t.Fatalf("record %d kept twice", i)
			}
			seen[i] = true
			out = append(out, i)
		}
	}
	return out
}

func sameField(a, b record.Field) bool {
	return a.Name == b.Name && a.Value.Kind == b.Value.Kind && a.Value.String() == b.Value.String()
}

// chiSquare is Pearson's statistic of counts against an even spread.
func chiSquare(counts []int) float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	e := float64(total) / float64(len(counts))
	x := 0.0
	for _, c := range counts {
		x += (float64(c) - e) * (float64(c) - e) / e
	}
	return x
}

// deciles counts the values of pos (in 0..span-1) in 10 equal ranges.
func deciles(pos []int, span int, of func(int) int) []int {
	counts := make([]int, 10)
	for _, p := range pos {
		counts[of(p)*10/span]++
	}
	return counts
}

// maxChiSquare bounds the statistic of 10 deciles of a uniform sample.
// For a uniform sample the statistic follows about 0.9·χ² with 9 degrees
// of freedom (without replacement, 10% of the input: the finite
// population factor 0.9), so it exceeds 40 (χ² > 44) with probability
// about 1e-6. A biased sample is far off: keeping the first (or the last)
// 2,000 of 20,000 records puts all of them in one decile of position,
// 18,000; keeping the first 50 of every batch of 500 (a per-batch "first
// n") puts all of them in the first decile of position within a batch,
// again 18,000.
const maxChiSquare = 40

// Sample keeps exactly n of 20,000 records read in 40 batches, each a
// record of the input once, spread evenly over the input (by position
// and by position within a batch), on every local runner; the sampled
// counter counts them.
func TestSampleKeepsNUniformly(t *testing.T) {
	const total, n, batch = 20_000, 2_000, 500
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			out := beamtest.NewCollector(t)
			m := beamtest.Run(t, runner, func(s beam.Scope) {
				out.Collect(s, Sample(s, n, t.TempDir(), beam.Create(s, numberedBatches(total, batch)...)))
			})
			pos := positions(t, total, out.Bytes())
			if len(pos) != n {
				t.Fatalf("kept %d records, want %d", len(pos), n)
			}
			if m["rekey/sampled"] != n {
				t.Errorf("rekey/sampled = %d, want %d (%v)", m["rekey/sampled"], n, m)
			}
			byPosition := deciles(pos, total, func(p int) int { return p })
			inBatch := deciles(pos, batch, func(p int) int { return p % batch })
			for what, counts := range map[string][]int{"position": byPosition, "position within a batch": inBatch} {
				if x := chiSquare(counts); x > maxChiSquare {
					t.Errorf("kept records by decile of %s: %v, χ² = %.1f; want about %d each (χ² ≤ %d)", what, counts, x, n/10, maxChiSquare)
				}
			}
		})
	}
}

// With fewer records than n, Sample keeps them all, once each.
func TestSampleKeepsAllOfFewer(t *testing.T) {
	const total = 700
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			out := beamtest.NewCollector(t)
			m := beamtest.Run(t, runner, func(s beam.Scope) {
				out.Collect(s, Sample(s, 1000, t.TempDir(), beam.Create(s, numberedBatches(total, 300)...)))
			})
			if pos := positions(t, total, out.Bytes()); len(pos) != total {
				t.Errorf("kept %d of %d records, want all", len(pos), total)
			}
			if m["rekey/sampled"] != total {
				t.Errorf("rekey/sampled = %d, want %d", m["rekey/sampled"], total)
			}
		})
	}
}

// seeded is a fixed random source; twin sources of one seed draw the
// same priorities.
func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, ^seed)) }

// iterOver is a grouped input of elems, as a runner gives it.
func iterOver(elems [][]byte) func(*[]byte) bool {
	next := 0
	return func(c *[]byte) bool {
		if next == len(elems) {
			return false
		}
		*c = elems[next]
		next++
		return true
	}
}

// The parts of Sample, run as a runner would over 5 bundles of 2,000
// records with fixed random sources: each bundle spills records and sends
// only its n smallest priorities, in chunks; the cutoff and the read back
// keep exactly the records of the n smallest priorities drawn over all
// bundles, each file's in the order of their priorities, though the read
// takes several passes over each file (PassBytes 4,096).
func TestSampleKeepsTheBottomKOfAllBundles(t *testing.T) {
	const n, bundles, perBundle = 1200, 5, 2000
	ctx, metrics := beamtest.MetricsContext(context.Background())
	dir := t.TempDir()
	type drawn struct {
		p uint64
		i int
	}
	var all []drawn
	var chunks [][]byte
	for b := range bundles {
		f := &sampleFn{N: n, Dir: dir}
		f.Setup()
		f.rng = seeded(uint64(b + 1))
		twin := seeded(uint64(b + 1))
		f.StartBundle(ctx, nil)
		for _, batch := range numberedFrom(b*perBundle, perBundle, BatchSize) {
			recs := batch.(record.Batch).Recs
			for _, r := range recs {
				v, _ := r.Get("I")
				all = append(all, drawn{twin.Uint64(), int(v.Int)})
			}
			if err := f.ProcessElement(ctx, batch.(record.Batch), nil); err != nil {
				t.Fatal(err)
			}
		}
		sent := 0
		if err := f.FinishBundle(ctx, func(_ int, c []byte) {
			chunks = append(chunks, c)
			_, _, ps, err := decodeChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			sent += len(ps) / 8
		}); err != nil {
			t.Fatal(err)
		}
		if sent != n {
			t.Errorf("bundle %d sent %d priorities, want its %d smallest", b, sent, n)
		}
	}
	if len(chunks) != bundles {
		t.Errorf("%d chunks, want 1 a bundle", len(chunks))
	}
	spilled, err := filepath.Glob(filepath.Join(dir, "*.spill"))
	if err != nil || len(spilled) != bundles {
		t.Fatalf("%d spill files (%v), want one a bundle", len(spilled), err)
	}

	var cuts [][]byte
	if err := (&cutoffFn{N: n}).ProcessElement(ctx, 0, iterOver(chunks), func(b []byte) { cuts = append(cuts, b) }); err != nil {
		t.Fatal(err)
	}
	byI := map[int]uint64{}
	for _, d := range all {
		byI[d.i] = d.p
	}
	var out [][]byte
	read := &readSampleFn{PassBytes: 4096}
	for _, c := range cuts {
		var file [][]byte
		if err := read.ProcessElement(ctx, c, func(b record.Batch) { file = append(file, b.Encode()) }); err != nil {
			t.Fatal(err)
		}
		var ps []uint64
		for _, i := range positions(t, bundles*perBundle, file) {
			ps = append(ps, byI[i])
		}
		if !slices.IsSorted(ps) {
			t.Errorf("a file's %d records are not in the order of their priorities", len(ps))
		}
		out = append(out, file...)
	}
	got := positions(t, bundles*perBundle, out)
	slices.Sort(got)

	slices.SortFunc(all, func(a, b drawn) int { return cmp.Compare(a.p, b.p) })
	want := make([]int, n)
	for i := range want {
		want[i] = all[i].i
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("kept %d records, not those of the %d smallest priorities", len(got), n)
	}
	if m := metrics(); m["rekey/sampled"] != n {
		t.Errorf("rekey/sampled = %d, want %d", m["rekey/sampled"], n)
	}
	if err := RemoveSpill(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("RemoveSpill left %v", left)
	}
}

// writeSpill writes a spill file of records numbered from with the given
// priorities, and the chunk its bundle would send.
func writeSpill(t *testing.T, dir string, from int, ps []uint64) []byte {
	t.Helper()
	name := spillPath(dir, fmt.Sprint(from))
	var b []byte
	for k, p := range ps {
		enc := record.EncodeBatch([]record.Record{numbered(from + k)})
		b = binary.BigEndian.AppendUint64(b, p)
		b = binary.AppendUvarint(b, uint64(len(enc)))
		b = append(b, enc...)
	}
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var chunk []byte
	chunks(name, uint64(len(ps)), ps, func(c []byte) { chunk = c })
	return chunk
}

// Priorities that tie at the cutoff: exactly n records are kept, the
// first of the tied ones in each file as the cutoff counted them.
func TestSampleKeepsExactlyNOnATieAtTheCutoff(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := writeSpill(t, dir, 0, []uint64{5, 1, 5, 9})
	b := writeSpill(t, dir, 100, []uint64{5, 2, 5})
	var cuts [][]byte
	if err := (&cutoffFn{N: 4}).ProcessElement(ctx, 0, iterOver([][]byte{a, b}), func(c []byte) { cuts = append(cuts, c) }); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, c := range cuts {
		if err := (&readSampleFn{PassBytes: 64}).ProcessElement(ctx, c, func(b record.Batch) { out = append(out, b.Encode()) }); err != nil {
			t.Fatal(err)
		}
	}
	got := positions(t, 200, out)
	slices.Sort(got)
	// 1 and 2 are below the cutoff 5; two of the four 5s are kept.
	if len(got) != 4 || !slices.Contains(got, 1) || !slices.Contains(got, 101) {
		t.Errorf("kept %v, want records 1 and 101 and two of those of priority 5", got)
	}
	for _, i := range got {
		if i == 3 {
			t.Errorf("kept record 3, of priority 9")
		}
	}
}

func TestDecodeChunkRefusesDamage(t *testing.T) {
	var chunk []byte
	chunks("dir/sample-x.spill", 7, []uint64{1, 2, 3}, func(c []byte) { chunk = c })
	if name, spilled, ps, err := decodeChunk(chunk); err != nil || name != "dir/sample-x.spill" || spilled != 7 || len(ps) != 24 {
		t.Fatalf("decodeChunk = %q, %d spilled, %d bytes, %v", name, spilled, len(ps), err)
	}
	for what, bad := range map[string][]byte{
		"short":                chunk[:3],
		"name cut":             chunk[:10],
		"one priority too few": chunk[:len(chunk)-8],
		"bytes after":          append(append([]byte(nil), chunk...), 0),
	} {
		if _, _, _, err := decodeChunk(bad); err == nil {
			t.Errorf("%s chunk: no error", what)
		}
	}
}

// bitreverseSpec rewrites table T's INT64 key I by bit reversal.
var bitreverseSpec = rekeyer.Spec{Strategy: keyrewrite.StepConfig{Strategy: "bitreverse"},
	SourceStore: record.Spanner, TargetStore: record.Spanner, Table: "T", Key: "I INT64"}

// RewriteKeepingOld rewrites as Rewrite does and carries every record's
// old form, which TakeOld gives back whole, leaving the rewritten record
// as Rewrite would have made it; a record that cannot be rewritten is a
// dead letter, as with Rewrite.
func TestRewriteKeepingOldRoundTrip(t *testing.T) {
	const total = 1200
	in := numberedBatches(total, BatchSize)
	in = append(in, record.Batch{Recs: []record.Record{{Table: "T", Fields: []record.Field{{Name: "X", Value: record.Int(1)}}}}})
	kept, dead, plain := beamtest.NewCollector(t), beamtest.NewCollector(t), beamtest.NewCollector(t)
	beamtest.Run(t, "direct", func(s beam.Scope) {
		batches := beam.Create(s, in...)
		rewritten, deads := RewriteKeepingOld(s, bitreverseSpec, batches)
		kept.Collect(s, rewritten)
		dead.Collect(s, deads)
		rewritten, _ = Rewrite(s, bitreverseSpec, batches)
		plain.Collect(s, rewritten)
	})
	for _, b := range plain.Bytes() {
		recs, err := record.DecodeBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Index(OldField) >= 0 {
				t.Fatalf("Rewrite's record %s carries %s", r.Describe(), OldField)
			}
		}
	}
	rk, err := bitreverseSpec.Build()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, b := range kept.Bytes() {
		recs, err := record.DecodeBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			old, err := TakeOld(&r)
			if err != nil {
				t.Fatal(err)
			}
			v, _ := old.Get("I")
			want := numbered(int(v.Int))
			if !slices.EqualFunc(old.Fields, want.Fields, sameField) || old.Table != want.Table {
				t.Fatalf("old record %v, want %v", old.Fields, want.Fields)
			}
			if err := rk.Rewrite(&want); err != nil {
				t.Fatal(err)
			}
			if r.Index(OldField) >= 0 || !slices.EqualFunc(r.Fields, want.Fields, sameField) {
				t.Fatalf("rewritten record after TakeOld %v, want %v", r.Fields, want.Fields)
			}
			seen[v.Int] = true
		}
	}
	if len(seen) != total {
		t.Errorf("%d records came out, want %d", len(seen), total)
	}
	if ds := dead.Strings(); len(ds) != 1 || !strings.Contains(ds[0], "no key column I") || strings.Contains(ds[0], OldField) {
		t.Errorf("dead letters %q, want one for the record without I, without %s", ds, OldField)
	}
}

func TestTakeOldRefuses(t *testing.T) {
	plain := numbered(1)
	if _, err := TakeOld(&plain); err == nil || !strings.Contains(err.Error(), OldField) {
		t.Errorf("a record without %s: error %v", OldField, err)
	}
	bad := numbered(2)
	bad.Fields = append(bad.Fields, record.Field{Name: OldField, Value: record.Bytes([]byte("not a batch"))})
	if _, err := TakeOld(&bad); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("a bad %s field", OldField)) {
		t.Errorf("a damaged %s: error %v", OldField, err)
	}
	two := numbered(3)
	two.Fields = append(two.Fields, record.Field{Name: OldField, Value: record.Bytes(record.EncodeBatch([]record.Record{numbered(3), numbered(4)}))})
	if _, err := TakeOld(&two); err == nil {
		t.Errorf("%s holding two records: no error", OldField)
	}
}
