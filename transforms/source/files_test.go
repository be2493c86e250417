package source

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/record"
)

// TestRangesReadEveryLineOnce cuts a JSON Lines file into byte ranges of
// many sizes and checks that reading every range returns each line exactly
// once, with and without a seekable reader.
func TestRangesReadEveryLineOnce(t *testing.T) {
	var b strings.Builder
	const n = 300
	for i := range n {
		fmt.Fprintf(&b, `{"i":%d,"pad":%q}`+"\n", i, strings.Repeat("x", (i*37)%90))
		if i%50 == 7 {
			b.WriteString("\n") // blank lines are skipped
		}
	}
	data := b.String()
	path := filepath.Join(t.TempDir(), "in.jsonl")
	os.WriteFile(path, []byte(data), 0o644)
	for _, step := range []int64{13, 64, 100, 1000, int64(len(data) - 1), int64(len(data)), 1 << 30} {
		for _, seekable := range []bool{true, false} {
			seen := make([]int, n)
			for _, fr := range splitFile(path, int64(len(data)), step) {
				var r io.Reader
				var f *os.File
				if seekable {
					var err error
					if f, err = os.Open(path); err != nil {
						t.Fatal(err)
					}
					r = f
				} else {
					r = io.MultiReader(bytes.NewReader([]byte(data)))
				}
				rr, err := seekRange(r, fr)
				if err != nil {
					t.Fatal(err)
				}
				err = readJSONL(rr, 0, func(rec record.Record) {
					v, _ := rec.Get("i")
					seen[v.Int]++
				}, func(line int, raw string, err error) {
					t.Errorf("step %d range %v: bad line %q: %v", step, fr, raw, err)
				})
				if f != nil {
					f.Close()
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("step %d seekable=%v: line %d read %d times", step, seekable, i, c)
				}
			}
		}
	}
}
