package plan_test

import (
	"bytes"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/internal/beamtest"
	"github.com/rekeyio/rekey/internal/committap"
	"github.com/rekeyio/rekey/internal/hotspot"
	"github.com/rekeyio/rekey/internal/record"
	"github.com/rekeyio/rekey/rewrite"
	"github.com/rekeyio/rekey/transforms/plan"
)

func TestMain(m *testing.M) { beamtest.Main(m) }

// TestWrites runs Writes on every local runner: 12,000 entities with ids
// 1..12,000, sorted, in batches of 500. Every entity comes out once, in
// batches of at most BatchRows sorted by key, each within one or two of
// 16 key ranges, spread over the key space.
func TestWrites(t *testing.T) {
	const n, rows = 12_000, 5
	var in []any
	var batch []record.Record
	for i := 1; i <= n; i++ {
		k := rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "K", ID: int64(i)}}}
		batch = append(batch, record.Record{Table: "K", Key: &k, Fields: []record.Field{{Name: "I", Value: record.Int(int64(i))}}})
		if len(batch) == 500 {
			in = append(in, record.EncodeBatch(batch))
			batch = nil
		}
	}
	opts := plan.Options{Store: plan.StoreDatastore, Shards: 2, Buffer: 5000, BatchRows: rows}
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			out := beamtest.NewCollector(t)
			beamtest.Run(t, runner, func(s beam.Scope) {
				out.Collect(s, plan.Writes(s, opts, beam.Create(s, in...)))
			})
			seen := map[int64]int{}
			var commits [][][]byte
			for _, b := range out.Bytes() {
				recs, err := record.DecodeBatch(b)
				if err != nil {
					t.Fatal(err)
				}
				if len(recs) > rows || len(recs) == 0 {
					t.Errorf("batch of %d records", len(recs))
				}
				var keys [][]byte
				for i, r := range recs {
					v, _ := r.Get("I")
					seen[v.Int]++
					if r.Key == nil || r.Key.Path[0].ID != v.Int {
						t.Fatalf("record %d lost its key: %+v", v.Int, r)
					}
					keys = append(keys, rewrite.AppendDatastoreKey(nil, *r.Key))
					if i > 0 && bytes.Compare(keys[i-1], keys[i]) > 0 {
						t.Fatalf("batch not sorted")
					}
				}
				commits = append(commits, keys)
			}
			if len(seen) != n {
				t.Errorf("%d distinct records out, want %d", len(seen), n)
			}
			for id, c := range seen {
				if c != 1 {
					t.Errorf("record %d out %d times", id, c)
				}
			}
			f := committap.Measure(commits, hotspot.Options{})
			t.Logf("%s: %v", runner, f)
			if f.RangesPerCommit > 2 || f.Busiest > 1.5 {
				t.Errorf("batches in the order collected: %v; want at most 2 ranges per batch and busiest at most 1.5", f)
			}
		})
	}
}
