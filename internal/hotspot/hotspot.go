// Package hotspot measures how a stream of writes spreads over a key space,
// the way a range-partitioned store (Spanner, Datastore, Bigtable) sees it.
//
// Keys are given as order-preserving encodings (rewrite.AppendSpannerKey or
// AppendDatastoreKey) in the order they are written. The key space is cut
// into Ranges ranges holding an equal number of the written keys (what the
// store's splits converge to); the stream is cut into windows of Window of
// all writes. For each window the busiest range's share of the window's
// writes is divided by the fair share 1/Ranges. The score is the mean over
// windows of that ratio: 1.0 is a perfectly even write order, Ranges (16 by
// default) is a sorted copy that writes one range at a time.
package hotspot

import (
	"bytes"
	"fmt"
	"sort"
)

// Options tune the measurement.
type Options struct {
	Ranges int     // key ranges of equal count (default 16)
	Window float64 // window size as a fraction of all writes (default 0.05)
}

func (o Options) withDefaults() Options {
	if o.Ranges <= 0 {
		o.Ranges = 16
	}
	if o.Window <= 0 || o.Window > 1 {
		o.Window = 0.05
	}
	return o
}

// Report is the measurement of one write stream.
type Report struct {
	Writes int
	Ranges int
	// Busiest is the mean, over windows, of the busiest range's share of the
	// window divided by the fair share 1/Ranges (1.0 = even, Ranges = sorted).
	Busiest float64
	// Worst is the largest such ratio of any window.
	Worst float64
	// Touched is the mean number of distinct ranges written per window.
	Touched float64
	// PerRange counts all writes per range.
	PerRange []int
}

func (r Report) String() string {
	return fmt.Sprintf("%d writes over %d ranges: busiest range %.2fx its fair share per window (worst %.2fx), %.1f ranges touched per window",
		r.Writes, r.Ranges, r.Busiest, r.Worst, r.Touched)
}

// Boundaries returns the Ranges-1 split keys that cut keys (in any order)
// into ranges of equal count: range i holds keys k with
// bounds[i-1] <= k < bounds[i].
func Boundaries(keys [][]byte, ranges int) [][]byte {
	sorted := make([][]byte, len(keys))
	copy(sorted, keys)
	sort.Slice(sorted, func(i, j int) bool { return bytes.Compare(sorted[i], sorted[j]) < 0 })
	var bounds [][]byte
	for i := 1; i < ranges; i++ {
		idx := i * len(sorted) / ranges
		if idx < len(sorted) {
			bounds = append(bounds, sorted[idx])
		}
	}
	return bounds
}

// RangeOf returns the range a key falls in, given Boundaries.
func RangeOf(bounds [][]byte, key []byte) int {
	return sort.Search(len(bounds), func(i int) bool { return bytes.Compare(key, bounds[i]) < 0 })
}

// Measure scores a write stream: keys in the order they were written.
func Measure(keys [][]byte, o Options) Report {
	o = o.withDefaults()
	rep := Report{Writes: len(keys), Ranges: o.Ranges, PerRange: make([]int, o.Ranges)}
	if len(keys) == 0 {
		return rep
	}
	bounds := Boundaries(keys, o.Ranges)
	win := int(float64(len(keys)) * o.Window)
	if win < 1 {
		win = 1
	}
	counts := make([]int, o.Ranges)
	windows := 0
	for start := 0; start < len(keys); start += win {
		end := min(start+win, len(keys))
		clear(counts)
		for _, k := range keys[start:end] {
			r := RangeOf(bounds, k)
			counts[r]++
			rep.PerRange[r]++
		}
		busiest, touched := 0, 0
		for _, c := range counts {
			busiest = max(busiest, c)
			if c > 0 {
				touched++
			}
		}
		ratio := float64(busiest) / float64(end-start) * float64(o.Ranges)
		if end-start < win/2 && windows > 0 {
			continue // a short tail window says little; its writes still count in PerRange
		}
		rep.Busiest += ratio
		rep.Worst = max(rep.Worst, ratio)
		rep.Touched += float64(touched)
		windows++
	}
	rep.Busiest /= float64(windows)
	rep.Touched /= float64(windows)
	return rep
}
