package transforms

import (
	"slices"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/internal/testkit/beamtest"
	"github.com/rekeyio/rekey/record"
	keyrewrite "github.com/rekeyio/rekey/rewrite"
)

// roomyBatches is records 0..n-1 (numbered) in batches of size, each
// record's fields with room for two more, as the rewrite gives them: a
// consumer appending to them in place would not reallocate, and would
// write into the array the other consumers read.
func roomyBatches(n, size int) []record.Batch {
	var out []record.Batch
	for start := 0; start < n; start += size {
		var recs []record.Record
		for i := start; i < min(start+size, n); i++ {
			r := numbered(i)
			r.Fields = append(make([]record.Field, 0, len(r.Fields)+2), r.Fields...)
			recs = append(recs, r)
		}
		out = append(out, record.Batch{Recs: recs})
	}
	return out
}

// checkUntouched fails unless batches hold records 0..n-1 as numbered
// made them, with nothing written in their fields' spare room.
func checkUntouched(t *testing.T, n int, batches []record.Batch) {
	t.Helper()
	seen := 0
	for _, b := range batches {
		for _, r := range b.Recs {
			v, _ := r.Get("I")
			want := numbered(int(v.Int))
			if v.Int < 0 || int(v.Int) >= n || !r.Equal(&want) {
				t.Fatalf("an input record changed: %s %v, want %v", r.Describe(), r.Fields, want.Fields)
			}
			if room := r.Fields[len(r.Fields):cap(r.Fields)]; slices.ContainsFunc(room, func(f record.Field) bool { return f.Name != "" }) {
				t.Fatalf("%s: fields written past its end: %v", r.Describe(), room)
			}
			seen++
		}
	}
	if seen != n {
		t.Fatalf("%d input records, want %d", seen, n)
	}
}

// checkRewritten fails unless recs are records 0..n-1 rewritten by
// bitreverseSpec (once), with their old records when keepOld.
func checkRewritten(t *testing.T, n int, recs []record.Record, keepOld bool) {
	t.Helper()
	rk, err := bitreverseSpec.Build()
	if err != nil {
		t.Fatal(err)
	}
	byI := map[int64]int{}
	for i := range n {
		r := numbered(i)
		if err := rk.Rewrite(&r); err != nil {
			t.Fatal(err)
		}
		v, _ := r.Get("I")
		byI[v.Int] = i
	}
	if len(recs) != n {
		t.Fatalf("%d rewritten records, want %d", len(recs), n)
	}
	for _, r := range recs {
		if keepOld {
			old, err := TakeOld(&r)
			if err != nil {
				t.Fatal(err)
			}
			v, _ := old.Get("I")
			if want := numbered(int(v.Int)); !old.Equal(&want) {
				t.Fatalf("old record %v, want %v", old.Fields, want.Fields)
			}
		}
		v, _ := r.Get("I")
		i, ok := byI[v.Int]
		if !ok {
			t.Fatalf("rewritten I %d is no record's bit reversal (rewritten twice?)", v.Int)
		}
		want := numbered(i)
		_ = rk.Rewrite(&want)
		if !r.Equal(&want) {
			t.Fatalf("rewritten %v, want %v", r.Fields, want.Fields)
		}
	}
}

// A batch PCollection with several consumers hands each the same value
// in a fused stage (record.Batch): two rewrites of the same batches, one
// of which appends a field, and a consumer of the input itself each see
// the records as read. Before batches were values, each rewrite decoded a
// copy of its own and changed it in place (bit reversal sets I in the
// record's fields; RewriteKeepingOld appends OldField); on shared values
// that would make the second rewrite reverse the first one's output and
// the input consumer see rewritten records.
func TestBatchConsumersShareTheInput(t *testing.T) {
	const n = 1200
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			input, plain, kept := beamtest.NewCollector(t), beamtest.NewCollector(t), beamtest.NewCollector(t)
			beamtest.Run(t, runner, func(s beam.Scope) {
				in := beam.CreateList(s, roomyBatches(n, BatchSize))
				withOld, _ := RewriteKeepingOld(s, bitreverseSpec, in)
				rewritten, _ := Rewrite(s, bitreverseSpec, in)
				input.Collect(s, in)
				kept.Collect(s, withOld)
				plain.Collect(s, rewritten)
			})
			var ins []record.Batch
			for _, e := range input.Elements() {
				ins = append(ins, e.(record.Batch))
			}
			checkUntouched(t, n, ins)
			checkRewritten(t, n, plain.Records(), false)
			checkRewritten(t, n, kept.Records(), true)
		})
	}
}

// The same without a runner: the rewrite DoFn called on one batch value
// again and again leaves it as it was and rewrites it the same each time.
func TestRewriteLeavesItsInput(t *testing.T) {
	const n = 700
	in := roomyBatches(n, n)
	for _, keepOld := range []bool{true, false, true} {
		f := &rewriteFn{Spec: bitreverseSpec.Text(), KeepOld: keepOld}
		if err := f.Setup(); err != nil {
			t.Fatal(err)
		}
		var out []record.Record
		err := f.ProcessElement(t.Context(), in[0], func(b record.Batch) { out = append(out, b.Recs...) }, func(d string) { t.Fatalf("dead letter %s", d) })
		if err != nil {
			t.Fatal(err)
		}
		checkUntouched(t, n, in)
		checkRewritten(t, n, out, keepOld)
	}
}

// RewriteOwning rewrites in place the records that have room for what the
// rewrite adds, and copies the others as Rewrite does: shard appends
// ShardId, so records with room keep their fields' arrays (the rewritten
// record's first field is the input's) and the others get new ones,
// leaving the input as it was. Either way the output is Rewrite's, on
// prism and on direct as well as called directly.
func TestRewriteOwningRewritesInPlace(t *testing.T) {
	spec := bitreverseSpec
	spec.Strategy = keyrewrite.StepConfig{Strategy: "shard", Params: map[string]any{"n": 8, "mode": "abs"}}
	spec.Key = "I INT64"
	rk, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	if rk.Adds() != 1 {
		t.Fatalf("shard adds %d fields, the test wants 1", rk.Adds())
	}
	const n = 1100
	want := map[int64]record.Record{}
	for i := range n {
		r := numbered(i)
		if err := rk.Rewrite(&r); err != nil {
			t.Fatal(err)
		}
		want[int64(i)] = r
	}
	check := func(t *testing.T, out []record.Record) {
		t.Helper()
		if len(out) != n {
			t.Fatalf("%d records out, want %d", len(out), n)
		}
		for _, r := range out {
			v, _ := r.Get("I")
			if w := want[v.Int]; !r.Equal(&w) {
				t.Fatalf("rewritten %v, want %v", r.Fields, w.Fields)
			}
		}
	}
	t.Run("called", func(t *testing.T) {
		roomy := roomyBatches(n/2, BatchSize)
		var exact []record.Batch
		for _, b := range numberedFrom(n/2, n-n/2, BatchSize) {
			exact = append(exact, b.(record.Batch))
		}
		f := &rewriteFn{Spec: spec.Text(), Owned: true}
		if err := f.Setup(); err != nil {
			t.Fatal(err)
		}
		var out []record.Record
		inPlace, copied := 0, 0
		for _, b := range append(slices.Clone(roomy), exact...) {
			firsts := map[int64]*record.Field{}
			for i := range b.Recs {
				v, _ := b.Recs[i].Get("I")
				firsts[v.Int] = &b.Recs[i].Fields[0]
			}
			err := f.ProcessElement(t.Context(), b, func(o record.Batch) {
				for i := range o.Recs {
					v, _ := o.Recs[i].Get("I")
					if &o.Recs[i].Fields[0] == firsts[v.Int] {
						inPlace++
					} else {
						copied++
					}
				}
				out = append(out, o.Recs...)
			}, func(d string) { t.Fatalf("dead letter %s", d) })
			if err != nil {
				t.Fatal(err)
			}
		}
		check(t, out)
		if inPlace != n/2 || copied != n-n/2 {
			t.Errorf("%d records rewritten in place and %d copied, want %d (those with room) and %d", inPlace, copied, n/2, n-n/2)
		}
		for _, b := range exact { // copied, so left as they were
			for _, r := range b.Recs {
				v, _ := r.Get("I")
				if w := numbered(int(v.Int)); !r.Equal(&w) {
					t.Fatalf("an input record without room changed: %v, want %v", r.Fields, w.Fields)
				}
			}
		}
	})
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			got := beamtest.NewCollector(t)
			beamtest.Run(t, runner, func(s beam.Scope) {
				var in []record.Batch
				in = append(in, roomyBatches(n/2, BatchSize)...)
				for _, b := range numberedFrom(n/2, n-n/2, BatchSize) {
					in = append(in, b.(record.Batch))
				}
				rewritten, _ := RewriteOwning(s, spec, beam.CreateList(s, in))
				got.Collect(s, rewritten)
			})
			check(t, got.Records())
		})
	}
}
