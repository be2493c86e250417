package datastoredb

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/rekeyio/rekey/rewrite"
)

// splitUniverse returns keys of one kind the way a kind query sees them:
// integer ids over many magnitudes, names, and entities under parents and
// grandparents of other kinds and of the same kind.
func splitUniverse() []rewrite.DatastoreKey {
	var keys []rewrite.DatastoreKey
	add := func(path ...rewrite.PathElement) {
		keys = append(keys, rewrite.DatastoreKey{Namespace: "ns", Path: path})
	}
	for i := int64(1); i <= 2000; i++ {
		add(rewrite.PathElement{Kind: "K", ID: i})
	}
	for i := int64(0); i < 60; i++ {
		add(rewrite.PathElement{Kind: "K", ID: 1<<40 + i*977})
		add(rewrite.PathElement{Kind: "K", ID: 1<<63 - 1 - i})
		add(rewrite.PathElement{Kind: "K", Name: fmt.Sprint(i)})
		add(rewrite.PathElement{Kind: "K", Name: fmt.Sprintf("name-%03d", i)})
	}
	for p := int64(1); p <= 10; p++ {
		parent := rewrite.PathElement{Kind: "P", ID: p}
		named := rewrite.PathElement{Kind: "A", Name: fmt.Sprint("p", p)}
		for c := int64(1); c <= 10; c++ {
			child := rewrite.PathElement{Kind: "K", ID: c * 1000}
			add(parent, child)
			add(named, rewrite.PathElement{Kind: "K", Name: fmt.Sprint("c", c)})
			add(parent, child, rewrite.PathElement{Kind: "K", ID: c})
			add(parent, rewrite.PathElement{Kind: "Q", ID: c}, rewrite.PathElement{Kind: "K", ID: 1})
		}
	}
	return keys
}

func TestSplitPointsRangesCoverEachKeyOnce(t *testing.T) {
	universe := splitUniverse()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 4, 16, 100} {
		for _, sampleSize := range []int{0, 1, 3, 32 * n, len(universe)} {
			t.Run(fmt.Sprintf("n=%d/sample=%d", n, sampleSize), func(t *testing.T) {
				sample := make([]rewrite.DatastoreKey, sampleSize)
				for i := range sample {
					// with replacement: repeats must not make empty ranges
					sample[i] = universe[rng.IntN(len(universe))]
				}
				points := SplitPoints(sample, n)
				if len(points) > max(n-1, 0) {
					t.Fatalf("%d points for n=%d", len(points), n)
				}
				for i := 1; i < len(points); i++ {
					if rewrite.CompareDatastore(points[i-1], points[i]) >= 0 {
						t.Fatalf("points not strictly increasing: %s then %s", points[i-1], points[i])
					}
				}
				ranges := Ranges(points)
				checkRanges(t, ranges, universe)
				if n > 1 && sampleSize >= 32*n && len(ranges) != n {
					t.Errorf("%d ranges from a sample of %d, want n=%d", len(ranges), sampleSize, n)
				}
			})
		}
	}
}

// checkRanges checks that ranges are contiguous, non-empty as intervals,
// open at both ends, and contain every key exactly once.
func checkRanges(t *testing.T, ranges []KeyRange, keys []rewrite.DatastoreKey) {
	t.Helper()
	if len(ranges) == 0 {
		t.Fatal("no ranges")
	}
	if ranges[0].Start != nil {
		t.Errorf("first range %s is not open at the start", ranges[0])
	}
	if ranges[len(ranges)-1].End != nil {
		t.Errorf("last range %s is not open at the end", ranges[len(ranges)-1])
	}
	for i := 1; i < len(ranges); i++ {
		prev, cur := ranges[i-1], ranges[i]
		if prev.End == nil || cur.Start == nil || !prev.End.Equal(*cur.Start) {
			t.Errorf("range %d %s does not start where range %d %s ends", i, cur, i-1, prev)
		}
		if cur.End != nil && rewrite.CompareDatastore(*cur.Start, *cur.End) >= 0 {
			t.Errorf("range %d %s is empty or reversed", i, cur)
		}
	}
	for _, k := range keys {
		n := 0
		for _, r := range ranges {
			if r.Contains(k) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("key %s is in %d ranges, want 1", k, n)
		}
	}
}

func TestSplitPointsOrderIdsNumerically(t *testing.T) {
	id := func(i int64) rewrite.DatastoreKey {
		return rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "K", ID: i}}}
	}
	name := func(s string) rewrite.DatastoreKey {
		return rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "K", Name: s}}}
	}
	// Sorted by Datastore: 2, 9, 10, 100, 1000, "1", "a". Ordered as
	// strings (or by name only, as Beam Go does) the ids would be 10, 100,
	// 1000, 2, 9 (or all equal).
	sample := []rewrite.DatastoreKey{name("a"), id(1000), id(9), name("1"), id(100), id(2), id(10)}
	points := SplitPoints(sample, 7)
	want := []rewrite.DatastoreKey{id(9), id(10), id(100), id(1000), name("1"), name("a")}
	if len(points) != len(want) {
		t.Fatalf("points = %v, want %v", points, want)
	}
	for i := range want {
		if !points[i].Equal(want[i]) {
			t.Errorf("point %d = %s, want %s", i, points[i], want[i])
		}
	}
	ranges := Ranges(points)
	if !ranges[0].Contains(id(2)) || ranges[0].Contains(id(9)) || !ranges[1].Contains(id(9)) {
		t.Errorf("ranges %v misplace ids 2 and 9", ranges)
	}
}
