package committap

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rekeyio/rekey/internal/hotspot"
)

// Keys returns, for every successful commit in arrival order, the keys it
// wrote to table (a Spanner table or a Datastore kind, any case; "" for
// all), leaving out commits that wrote none there and keys the tap could
// not decode.
func Keys(commits []Commit, table string) [][][]byte {
	var out [][][]byte
	for _, c := range commits {
		if !c.Done || c.Err != nil {
			continue
		}
		var keys [][]byte
		for _, m := range c.Mutations {
			if m.Key != nil && (table == "" || strings.EqualFold(m.Table, table)) {
				keys = append(keys, m.Key)
			}
		}
		if len(keys) > 0 {
			out = append(out, keys)
		}
	}
	return out
}

// Figures describe the write order of a series of commits.
type Figures struct {
	Commits int
	Writes  int
	// Busiest, Worst and Touched are hotspot.Measure's figures over every
	// written key in arrival order: the busiest of the key ranges per
	// window as a multiple of its fair share (mean over windows, and the
	// worst window), and the ranges written per window.
	Busiest, Worst, Touched float64
	// RangesPerCommit is the median number of the key ranges one commit
	// writes to, and MaxRangesPerCommit the most.
	RangesPerCommit    float64
	MaxRangesPerCommit int
	// RowsPerCommit is the mean number of keys per commit.
	RowsPerCommit float64
}

func (f Figures) String() string {
	return fmt.Sprintf("%d writes in %d commits (%.1f per commit): busiest range %.2fx its fair share per window (worst %.2fx), %.1f ranges per window; a commit touches %.1f ranges (median, max %d)",
		f.Writes, f.Commits, f.RowsPerCommit, f.Busiest, f.Worst, f.Touched, f.RangesPerCommit, f.MaxRangesPerCommit)
}

// Measure computes the figures of commits (each a list of keys, in arrival
// order) with o's ranges and window (hotspot.Options defaults: 16 ranges
// of equal count, windows of 5% of all writes).
func Measure(commits [][][]byte, o hotspot.Options) Figures {
	if o.Ranges <= 0 {
		o.Ranges = 16
	}
	var all [][]byte
	for _, c := range commits {
		all = append(all, c...)
	}
	rep := hotspot.Measure(all, o)
	f := Figures{Commits: len(commits), Writes: len(all), Busiest: rep.Busiest, Worst: rep.Worst, Touched: rep.Touched}
	if len(commits) == 0 {
		return f
	}
	f.RowsPerCommit = float64(len(all)) / float64(len(commits))
	bounds := hotspot.Boundaries(all, o.Ranges)
	touched := make([]int, len(commits))
	seen := make([]bool, o.Ranges)
	for i, c := range commits {
		clear(seen)
		for _, k := range c {
			if r := hotspot.RangeOf(bounds, k); !seen[r] {
				seen[r] = true
				touched[i]++
			}
		}
		f.MaxRangesPerCommit = max(f.MaxRangesPerCommit, touched[i])
	}
	f.RangesPerCommit = median(touched)
	return f
}

func median(xs []int) float64 {
	s := append([]int(nil), xs...)
	sort.Ints(s)
	n := len(s)
	if n%2 == 1 {
		return float64(s[n/2])
	}
	return float64(s[n/2-1]+s[n/2]) / 2
}
