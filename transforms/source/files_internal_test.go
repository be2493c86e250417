package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/internal/hotspot"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/internal/write/writeorder"
	"github.com/rekeyio/rekey/record"
)

// TestInterleavedReadsEveryLineOnce reads JSON Lines files as an
// interleaved read does (interleavedRanges, grouped as listFilesFn
// groups them, readInterleaved per group): every line comes out once,
// a bad line is a dead letter, and the records of every round are drawn
// from all over the input.
func TestInterleavedReadsEveryLineOnce(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, from, n int, bad bool) string {
		var b strings.Builder
		for i := from; i < from+n; i++ {
			fmt.Fprintf(&b, `{"i":%d,"pad":%q}`+"\n", i, strings.Repeat("x", (i*37)%50))
			if i%500 == 7 {
				b.WriteString("\n") // blank lines are skipped
			}
			if bad && i == from+n/2 {
				b.WriteString("{not json\n")
			}
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		name  string
		files []string
		n     int   // lines in all
		step  int64 // SplitBytes
		round int   // Interleave
		bad   int
	}{
		{"one file", []string{write("a.jsonl", 0, 6400, false)}, 6400, DefaultSplitBytes, 1280, 0},
		{"one file, small ranges", []string{write("b.jsonl", 0, 6400, true)}, 6400, 1000, 700, 1},
		{"three files and an empty one", []string{write("c1.jsonl", 0, 3000, false), write("c2.jsonl", 3000, 100, false),
			write("c3.jsonl", 3100, 3300, false), write("c4.jsonl", 0, 0, false)}, 6400, DefaultSplitBytes, 10000, 0},
		{"tiny file", []string{write("d.jsonl", 0, 3, false)}, 3, DefaultSplitBytes, 10000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ranges []fileRange
			var total int64
			sizes := map[string]int64{}
			for _, f := range tc.files {
				st, err := os.Stat(f)
				if err != nil {
					t.Fatal(err)
				}
				sizes[f] = st.Size()
				total += st.Size()
			}
			for _, f := range tc.files {
				ranges = append(ranges, interleavedRanges(f, sizes[f], total, tc.step)...)
			}
			if tc.n >= 10*InterleavedRanges && len(ranges) < InterleavedRanges {
				t.Errorf("%d ranges, want at least %d", len(ranges), InterleavedRanges)
			}
			groups := (len(ranges) + InterleavedRanges - 1) / InterleavedRanges
			f := &readFilesFn{Cfg: FilesConfig{Format: "jsonl", Interleave: tc.round, Table: "T"}}
			seen := make([]int, tc.n)
			var order []int
			dead := 0
			for g := range groups {
				var mine []fileRange
				for i := len(ranges) - 1; i >= 0; i-- { // any order: readInterleaved sorts them
					if i%groups == g {
						mine = append(mine, ranges[i])
					}
				}
				err := f.readInterleaved(context.Background(), mine, func(b record.Batch) {
					recs := b.Recs
					for _, r := range recs {
						v, _ := r.Get("i")
						seen[v.Int]++
						order = append(order, int(v.Int))
						if r.Table != "T" {
							t.Errorf("table %q, want the default T", r.Table)
						}
					}
				}, func(string) { dead++ })
				if err != nil {
					t.Fatal(err)
				}
			}
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("line %d read %d times", i, c)
				}
			}
			if dead != tc.bad {
				t.Errorf("%d dead letters, want %d", dead, tc.bad)
			}
			if len(ranges) < InterleavedRanges || groups > 1 || tc.round > tc.n {
				return
			}
			// The first round: a piece of each range, so from each of
			// the 64 equal parts of the (sorted) input.
			parts := map[int]bool{}
			for _, i := range order[:tc.round] {
				parts[i*64/tc.n] = true
			}
			if len(parts) < 60 {
				t.Errorf("the first round drew from %d of 64 parts of the input, want about all", len(parts))
			}
		})
	}
}

// TestInterleavedWriteOrder plans the writes of an interleaved read of
// sorted keys as write planning does without the shuffle (sorted buffers
// of a round each, writeorder.Plan) and measures them as bench/writeorder
// does: at its two settings (10 and, scaled down from a million rows of
// 500, 100 records a commit; 100 commits a window either way), the
// busiest of 16 ranges gets at most 1.25 times its share, and the median
// commit touches at most 2 of them.
func TestInterleavedWriteOrder(t *testing.T) {
	for _, tc := range []struct{ n, rows int }{{20_000, 10}, {200_000, 100}} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			var b strings.Builder
			for i := range tc.n {
				// Ids of growing length: byte ranges hold unequal numbers
				// of lines.
				fmt.Fprintf(&b, `{"__key__": {"path": ["Item", %d]}, "N": %d}`+"\n", i+1, i)
			}
			path := filepath.Join(t.TempDir(), "in.jsonl")
			if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			size := int64(b.Len())
			opts := writeorder.Options{Store: record.Datastore}.WithDefaults()
			k, err := writeorder.NewKeyer(opts)
			if err != nil {
				t.Fatal(err)
			}
			var items []writeorder.Item
			var commits [][][]byte
			flush := func() {
				for _, bt := range writeorder.Plan(items, tc.rows, 0.3) {
					var c [][]byte
					for _, r := range bt {
						c = append(c, k.Append(nil, &r))
					}
					commits = append(commits, c)
				}
				items = items[:0]
			}
			f := &readFilesFn{Cfg: FilesConfig{Format: "jsonl", Interleave: opts.Buffer}}
			err = f.readInterleaved(context.Background(), interleavedRanges(path, size, size, DefaultSplitBytes), func(bb record.Batch) {
				recs := bb.Recs
				for _, r := range recs {
					items = append(items, writeorder.Item{Key: k.Append(nil, &r), Rec: r})
					if len(items) >= opts.Buffer {
						flush()
					}
				}
			}, func(string) {})
			if err != nil {
				t.Fatal(err)
			}
			flush()
			fig := committap.Measure(commits, hotspot.Options{})
			if fig.Writes != tc.n || fig.Busiest > 1.25 || fig.RangesPerCommit > 2 {
				t.Errorf("%v; want %d writes, busiest at most 1.25, at most 2 ranges per commit", fig, tc.n)
			}
		})
	}
}
