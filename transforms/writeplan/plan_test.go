package writeplan_test

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/internal/hotspot"
	"github.com/rekeyio/rekey/internal/testkit/beamtest"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/internal/write/writeorder"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
	"github.com/rekeyio/rekey/transforms/writeplan"
)

func TestMain(m *testing.M) { beamtest.Main(m) }

// TestWrites runs Writes on every local runner: 12,000 entities with ids
// 1..12,000, sorted, in batches of 500. Every entity comes out once, in
// batches of at most BatchRows sorted by key, each within one or two of
// 16 key ranges, spread over the key space.
func TestWrites(t *testing.T) {
	opts := writeorder.Options{Store: record.Datastore, Shards: 2, Buffer: 5000, BatchRows: 5}
	in := entities(12_000, func(i int) rewrite.PathElement { return rewrite.PathElement{Kind: "K", ID: int64(i)} })
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			f := planned(t, runner, opts, in)
			if f.RangesPerCommit > 2 || f.Busiest > 1.5 {
				t.Errorf("batches in the order collected: %v; want at most 2 ranges per batch and busiest at most 1.5", f)
			}
		})
	}
}

// TestWritesSpill is TestWrites with the shuffled records kept in a
// local directory: the same figures, and the records went through files
// there.
func TestWritesSpill(t *testing.T) {
	in := entities(12_000, func(i int) rewrite.PathElement { return rewrite.PathElement{Kind: "K", ID: int64(i)} })
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			dir := t.TempDir()
			opts := writeorder.Options{Store: record.Datastore, Shards: 2, Buffer: 5000, BatchRows: 5, Spill: dir}
			f := planned(t, runner, opts, in)
			if f.RangesPerCommit > 2 || f.Busiest > 1.5 {
				t.Errorf("batches in the order collected: %v; want at most 2 ranges per batch and busiest at most 1.5", f)
			}
			files, err := filepath.Glob(filepath.Join(dir, "*.spill"))
			if err != nil || len(files) < 2 {
				t.Errorf("spill files %v (%v): want those of the records as read and as dealt", files, err)
			}
		})
	}
}

// TestWritesLocal plans without the shuffle: on scattered keys (names
// led by a hash of the id, in id order) the batches are as key-local and
// as spread as with it; on keys in sorted order, the first buffer's part
// of the key space takes all the first writes, which is why Local is
// only for rewrites that scatter.
func TestWritesLocal(t *testing.T) {
	opts := writeorder.Options{Store: record.Datastore, Buffer: 5000, BatchRows: 5, Local: true}
	scattered := entities(12_000, func(i int) rewrite.PathElement {
		return rewrite.PathElement{Kind: "K", Name: fmt.Sprintf("%x-%d", md5.Sum([]byte(fmt.Sprint(i))), i)}
	})
	sorted := entities(12_000, func(i int) rewrite.PathElement { return rewrite.PathElement{Kind: "K", ID: int64(i)} })
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			if f := planned(t, runner, opts, scattered); f.RangesPerCommit > 2 || f.Busiest > 1.5 {
				t.Errorf("scattered keys: %v; want at most 2 ranges per batch and busiest at most 1.5", f)
			}
			if f := planned(t, runner, opts, sorted); f.Busiest < 2 {
				t.Errorf("sorted keys: %v; want the first buffer's ranges to be the busiest (at least 2x)", f)
			}
		})
	}
}

// entities is n entities with ids 1..n in batches of 500, keyed by key(i),
// each with its id in property I.
func entities(n int, key func(i int) rewrite.PathElement) []any {
	var in []any
	var batch []record.Record
	for i := 1; i <= n; i++ {
		k := rewrite.DatastoreKey{Path: []rewrite.PathElement{key(i)}}
		batch = append(batch, record.Record{Table: "K", Key: &k, Fields: []record.Field{{Name: "I", Value: record.Int(int64(i))}}})
		if len(batch) == 500 {
			in = append(in, record.Batch{Recs: batch})
			batch = nil
		}
	}
	return in
}

// planned runs Writes on in and checks that every record comes out once,
// with its key, in batches of at most BatchRows records sorted by key; it
// returns the figures of the batches in the order collected.
func planned(t *testing.T, runner string, opts writeorder.Options, in []any) committap.Figures {
	t.Helper()
	out := beamtest.NewCollector(t)
	beamtest.Run(t, runner, func(s beam.Scope) {
		out.Collect(s, writeplan.Writes(s, opts, beam.Create(s, in...)))
	})
	seen := map[int64]int{}
	var commits [][][]byte
	for _, b := range out.Bytes() {
		recs, err := record.DecodeBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) > opts.BatchRows || len(recs) == 0 {
			t.Errorf("batch of %d records", len(recs))
		}
		var keys [][]byte
		for i, r := range recs {
			v, _ := r.Get("I")
			seen[v.Int]++
			if r.Key == nil || len(r.Key.Path) != 1 {
				t.Fatalf("record %d lost its key: %+v", v.Int, r)
			}
			keys = append(keys, rewrite.AppendDatastoreKey(nil, *r.Key))
			if i > 0 && bytes.Compare(keys[i-1], keys[i]) > 0 {
				t.Fatalf("batch not sorted")
			}
		}
		commits = append(commits, keys)
	}
	if want := 500 * len(in); len(seen) != want {
		t.Errorf("%d distinct records out, want %d", len(seen), want)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("record %d out %d times", id, c)
		}
	}
	f := committap.Measure(commits, hotspot.Options{})
	t.Logf("%s: %v", runner, f)
	return f
}
