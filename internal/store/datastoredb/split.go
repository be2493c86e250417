package datastoredb

import (
	"slices"
	"strings"

	"github.com/rekeyio/rekey/rewrite"
)

// SampleKeysPerSplit is how many sampled keys a reader asks for per split
// it wants (Beam Java's Datastore reader uses the same 32): sampling more
// keys than splits evens out the ranges.
const SampleKeysPerSplit = 32

// KeyRange is the half-open key range [Start, End) in Datastore's key order
// (rewrite.CompareDatastore). A nil Start is open at the first key, a nil
// End open past the last.
type KeyRange struct {
	Start, End *rewrite.DatastoreKey
}

// Contains reports whether k falls in the range.
func (r KeyRange) Contains(k rewrite.DatastoreKey) bool {
	if r.Start != nil && rewrite.CompareDatastore(k, *r.Start) < 0 {
		return false
	}
	return r.End == nil || rewrite.CompareDatastore(k, *r.End) < 0
}

func (r KeyRange) String() string {
	var b strings.Builder
	b.WriteByte('[')
	if r.Start == nil {
		b.WriteString("first")
	} else {
		b.WriteString(r.Start.String())
	}
	b.WriteString(", ")
	if r.End == nil {
		b.WriteString("last]")
	} else {
		b.WriteString(r.End.String())
		b.WriteByte(')')
	}
	return b.String()
}

// SplitPoints chooses at most n-1 split keys from a sample of a kind's
// keys: it sorts the sample in Datastore's key order
// (rewrite.CompareDatastore: ids before names, ids numerically, an ancestor
// before its descendants), drops repeats and takes evenly spaced keys. The
// points are strictly increasing. n <= 1 or an empty sample gives none.
//
// Sorting by the real key order is what makes the ranges between the
// points disjoint: Beam Go's datastoreio compares key names only, so two
// integer-id keys compare equal and its ranges overlap or leave gaps.
func SplitPoints(sample []rewrite.DatastoreKey, n int) []rewrite.DatastoreKey {
	if n <= 1 || len(sample) == 0 {
		return nil
	}
	sorted := slices.Clone(sample)
	slices.SortFunc(sorted, rewrite.CompareDatastore)
	sorted = slices.CompactFunc(sorted, func(a, b rewrite.DatastoreKey) bool { return rewrite.CompareDatastore(a, b) == 0 })
	m := len(sorted)
	points := make([]rewrite.DatastoreKey, 0, min(n-1, m))
	for i := 1; i < n; i++ {
		p := sorted[i*m/n]
		if len(points) > 0 && rewrite.CompareDatastore(points[len(points)-1], p) == 0 {
			continue
		}
		points = append(points, p)
	}
	return points
}

// Ranges turns strictly increasing split points into len(points)+1
// contiguous ranges that cover every key once: the first open at the
// start, the last open at the end, each ending where the next starts.
func Ranges(points []rewrite.DatastoreKey) []KeyRange {
	ranges := make([]KeyRange, 0, len(points)+1)
	var start *rewrite.DatastoreKey
	for i := range points {
		end := &points[i]
		ranges = append(ranges, KeyRange{Start: start, End: end})
		start = end
	}
	return append(ranges, KeyRange{Start: start})
}
