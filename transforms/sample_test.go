package transforms

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
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

// numberedBatches is records 0..n-1 in encoded batches of size.
func numberedBatches(n, size int) []any { return numberedFrom(0, n, size) }

// numberedFrom is records from..from+n-1 in encoded batches of size.
func numberedFrom(from, n, size int) []any {
	var out []any
	for start := from; start < from+n; start += size {
		recs := make([]record.Record, 0, size)
		for i := start; i < min(start+size, from+n); i++ {
			recs = append(recs, numbered(i))
		}
		out = append(out, record.EncodeBatch(recs))
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
				out.Collect(s, Sample(s, n, beam.Create(s, numberedBatches(total, batch)...)))
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
				out.Collect(s, Sample(s, 1000, beam.Create(s, numberedBatches(total, 300)...)))
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

// The parts of Sample, run as a runner would over 5 bundles of 2,000
// records with fixed random sources: the merge keeps exactly the records
// of the n smallest priorities drawn over all bundles, though each bundle
// sent only its own n smallest, in chunks of at most BatchSize.
func TestSampleMergesBundlesToTheBottomK(t *testing.T) {
	const n, bundles, perBundle = 1200, 5, 2000
	ctx, metrics := beamtest.MetricsContext(context.Background())
	type drawn struct {
		p uint64
		i int
	}
	var all []drawn
	var chunks [][]byte
	for b := range bundles {
		f := &sampleFn{N: n}
		f.Setup()
		f.rng = seeded(uint64(b + 1))
		twin := seeded(uint64(b + 1))
		f.StartBundle(ctx, nil)
		for _, batch := range numberedFrom(b*perBundle, perBundle, BatchSize) {
			recs, err := record.DecodeBatch(batch.([]byte))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				v, _ := r.Get("I")
				all = append(all, drawn{twin.Uint64(), int(v.Int)})
			}
			if err := f.ProcessElement(ctx, batch.([]byte), nil); err != nil {
				t.Fatal(err)
			}
		}
		sent := 0
		if err := f.FinishBundle(ctx, func(_ int, c []byte) {
			chunks = append(chunks, c)
			if err := decodeChunk(c, func(candidate) { sent++ }); err != nil {
				t.Fatal(err)
			}
		}); err != nil {
			t.Fatal(err)
		}
		if sent != n {
			t.Errorf("bundle %d sent %d candidates, want its %d smallest", b, sent, n)
		}
	}
	if len(chunks) != bundles*3 {
		t.Errorf("%d chunks, want 3 a bundle (%d candidates in chunks of at most %d)", len(chunks), n, BatchSize)
	}

	next := 0
	iter := func(c *[]byte) bool {
		if next == len(chunks) {
			return false
		}
		*c = chunks[next]
		next++
		return true
	}
	var out [][]byte
	if err := (&mergeSampleFn{N: n}).ProcessElement(ctx, 0, iter, func(b []byte) { out = append(out, b) }); err != nil {
		t.Fatal(err)
	}
	got := positions(t, bundles*perBundle, out)
	slices.Sort(got)

	slices.SortFunc(all, func(a, b drawn) int { return cmpUint(a.p, b.p) })
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
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestDecodeChunkRefusesDamage(t *testing.T) {
	b := &bottom{n: 3}
	for i := range 3 {
		b.offer(candidate{p: uint64(i), enc: record.EncodeBatch([]record.Record{numbered(i)})})
	}
	var chunk []byte
	b.chunks(func(c []byte) { chunk = c })
	one := 12 + len(record.EncodeBatch([]record.Record{numbered(0)}))
	for name, bad := range map[string][]byte{
		"short":              chunk[:3],
		"candidate cut":      chunk[:4+one+5],
		"record cut":         chunk[:4+one+14],
		"one record too few": chunk[:4+2*one],
		"bytes after":        append(append([]byte(nil), chunk...), 0),
	} {
		if err := decodeChunk(bad, func(candidate) {}); err == nil {
			t.Errorf("%s chunk: no error", name)
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
	in = append(in, record.EncodeBatch([]record.Record{{Table: "T", Fields: []record.Field{{Name: "X", Value: record.Int(1)}}}}))
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
