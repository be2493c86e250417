package plan

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/plan/detect"
)

// cardinality agrees with detect.Cardinality wherever the finding can
// hold, also past the values it counts in a map; where it cannot, it
// says so.
func TestCardinality(t *testing.T) {
	const n = 3 * cardinalityExact
	values := func(heavy func(i int) string) []string {
		vs := make([]string, n)
		for i := range vs {
			if vs[i] = heavy(i); vs[i] == "" {
				vs[i] = fmt.Sprintf("v%07d", (i*7919)%n)
			}
		}
		return vs
	}
	for _, c := range []struct {
		name    string
		vals    []string
		finding bool
	}{
		{"few values", values(func(i int) string { return fmt.Sprint("k", i%5) }), true},
		{"one value of 30%", values(func(i int) string {
			if i%10 < 3 {
				return "common"
			}
			return ""
		}), true},
		{"two of 25%, the lesser first in byte order", values(func(i int) string {
			switch i % 4 {
			case 0:
				return "zeta"
			case 1:
				return "alpha"
			}
			return ""
		}), true},
		{"one of 10%", values(func(i int) string {
			if i%10 == 0 {
				return "common"
			}
			return ""
		}), false},
		{"all distinct", values(func(int) string { return "" }), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, top, v := cardinality(len(c.vals), func(i int) string { return c.vals[i] })
			wd, wtop, wv := detect.Cardinality(c.vals)
			found := d <= LowCardinality || top >= TopShare
			if found != c.finding || found != (wd <= LowCardinality || wtop >= TopShare) {
				t.Fatalf("finding %v (%d distinct, top %q %.3f), detect.Cardinality %d, %q %.3f; want %v", found, d, v, top, wd, wv, wtop, c.finding)
			}
			if found && (d != wd || top != wtop || v != wv) {
				t.Errorf("cardinality = %d, %.4f, %q; detect.Cardinality = %d, %.4f, %q", d, top, v, wd, wtop, wv)
			}
		})
	}
}

// labelScope leaves out what labelTexts does, from the first text and the
// prefix all share.
func TestLabelScope(t *testing.T) {
	for _, texts := range [][]string{
		{`ns="ns-1234567",Account/"u1"`, `ns="ns-1234567",Account/"u2"`},
		{`db="d",ns="n",A/1`, `db="d",ns="n",A/2`},
		{`ns="a",A/1`, `ns="b",A/1`},
		{`db="d",A/1`, `db="d",ns="x",A/1`},
		{`db="d",ns="x",A/1`, `db="d",A/1`},
		{`(1, "x")`, `(2, "y")`},
		{`ns="q\"uote",A/1`},
	} {
		shared := texts[0]
		for _, s := range texts {
			for !strings.HasPrefix(s, shared) {
				shared = shared[:len(shared)-1]
			}
		}
		scope := labelScope(texts[0], shared)
		for i, want := range labelTexts(texts) {
			if got := texts[i][len(scope):]; got != want {
				t.Errorf("%q: label %d %q, labelTexts %q", texts, i, got, want)
			}
		}
	}
}
