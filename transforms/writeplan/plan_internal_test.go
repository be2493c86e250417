package writeplan

import (
	"bytes"
	"slices"
	"testing"

	"github.com/rekeyio/rekey/internal/hotspot"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/internal/write/writeorder"
	"github.com/rekeyio/rekey/record"
)

// simulate runs the two DoFns of Writes without a runner: n records with
// keys 0..n-1 arrive sorted in batches of 500; shards are processed one
// after the other. It returns the planned batches' keys in write order.
func simulate(t *testing.T, o writeorder.Options, n int) [][][]byte {
	t.Helper()
	o = o.WithDefaults()
	o.Store, o.Key = record.Spanner, "Id INT64"
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	sf := &shardFn{Opts: o}
	if err := sf.Setup(); err != nil {
		t.Fatal(err)
	}
	groups := map[int][][]byte{}
	collect := func(k int, b []byte) { groups[k] = append(groups[k], b) }
	once := func() func(*int64) bool {
		done := false
		return func(v *int64) bool {
			if done {
				return false
			}
			done, *v = true, int64(n)
			return true
		}
	}
	sf.StartBundle(once(), collect)
	for start := 0; start < n; start += 500 {
		var recs []record.Record
		for id := start; id < min(start+500, n); id++ {
			recs = append(recs, record.Record{Table: "T", Fields: []record.Field{{Name: "Id", Value: record.Int(int64(id))}}})
		}
		if err := sf.ProcessElement(record.EncodeBatch(recs), once(), collect); err != nil {
			t.Fatal(err)
		}
	}
	if err := sf.FinishBundle(once(), collect); err != nil {
		t.Fatal(err)
	}
	if got, want := len(groups), o.ShardKeys(int64(n)); got > want || got < want*9/10 {
		t.Errorf("%d shard keys used, want %d", got, want)
	}
	pf := &planFn{Opts: o}
	if err := pf.Setup(); err != nil {
		t.Fatal(err)
	}
	keyer, _ := writeorder.NewKeyer(o)
	var out [][][]byte
	for _, k := range slices.Sorted(func(yield func(int) bool) {
		for k := range groups {
			if !yield(k) {
				return
			}
		}
	}) {
		vals := groups[k]
		next := func(b *[]byte) bool {
			if len(vals) == 0 {
				return false
			}
			*b, vals = vals[0], vals[1:]
			return true
		}
		if shard, keys := splitShardKey(k); keys != o.ShardKeys(int64(n)) || shard >= keys {
			t.Fatalf("key %d: shard %d of %d keys, want one of %d", k, shard, keys, o.ShardKeys(int64(n)))
		}
		err := pf.ProcessElement(t.Context(), k, next, func(b record.Batch) {
			recs := b.Recs
			var keys [][]byte
			for i := range recs {
				keys = append(keys, keyer.Append(nil, &recs[i]))
			}
			out = append(out, keys)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestSimulatedWritesSpreadSortedInput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       writeorder.Options
		n       int
		busiest float64
	}{
		// The integration test's settings: 20,000 records, 10 per commit.
		{"20k rows, 10 per commit", writeorder.Options{Shards: 2, BatchRows: 10, Seed: 1}, 20_000, 1.25},
		// Shards far larger than a buffer: without enough shard keys,
		// every shard would be sorted in chunks in arrival order.
		{"small buffer", writeorder.Options{Shards: 4, Buffer: 1000, BatchRows: 10, Seed: 2}, 40_000, 1.25},
		// Default knobs, 500 rows per commit: a million rows make 100
		// commits per window, as many as 20,000 rows in commits of 10.
		{"defaults", writeorder.Options{Seed: 3}, 1_000_000, 1.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && tc.n > 100_000 {
				t.Skip("-short: many records")
			}
			batches := simulate(t, tc.o, tc.n)
			f := committap.Measure(batches, hotspot.Options{})
			t.Logf("%v", f)
			if f.Writes != tc.n {
				t.Errorf("%d records written, want %d", f.Writes, tc.n)
			}
			if f.Busiest > tc.busiest || f.RangesPerCommit > 2 {
				t.Errorf("busiest %.2f (want at most %.2f), %.1f ranges per commit (want at most 2)", f.Busiest, tc.busiest, f.RangesPerCommit)
			}
			for _, b := range batches {
				if len(b) > tc.o.WithDefaults().BatchRows {
					t.Fatalf("batch of %d records", len(b))
				}
				for i := 1; i < len(b); i++ {
					if bytes.Compare(b[i-1], b[i]) > 0 {
						t.Fatal("batch not sorted")
					}
				}
			}
		})
	}
}

func TestBatchLen(t *testing.T) {
	for _, n := range []int{0, 1, 500, 70000} {
		recs := make([]record.Record, n)
		if got := batchLen(record.EncodeBatch(recs)); got != int64(n) {
			t.Errorf("batchLen of %d records = %d", n, got)
		}
	}
}
