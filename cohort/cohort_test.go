package cohort_test

import (
	"fmt"
	"math"
	"math/big"
	"testing"

	farm "github.com/dgryski/go-farm"

	"github.com/rekeyio/rekey/cohort"
)

func TestCohortOf(t *testing.T) {
	// From testdata/vectors.tsv (Spanner's figures).
	for _, tc := range []struct {
		id      string
		buckets int
		want    int
	}{
		{"", 10000, 5647},
		{"a", 10000, 2323},
		{"a", 100, 23},
		{"a", 7, 3},
		{"A", 2, 0},
		{"a", 1, 0},
	} {
		if got := cohort.Of(tc.id, tc.buckets); got != tc.want {
			t.Errorf("Of(%q, %d) = %d, want %d", tc.id, tc.buckets, got, tc.want)
		}
	}
	// Bucket counts too large for MOD(x, B) + B to fit an INT64 still
	// give the non-negative remainder.
	for _, b := range []int64{math.MaxInt64, math.MaxInt64 - 1, 1<<62 + 1, 1 << 62} {
		if int64(int(b)) != b {
			break // int is 32 bits
		}
		for _, id := range []string{"", "a", " ", "-", "bob", "日"} { // negative and positive fingerprints
			fp := big.NewInt(int64(farm.Fingerprint64([]byte(id))))
			want := new(big.Int).Mod(fp, big.NewInt(b)) // Euclidean: 0 <= want < b
			if got := cohort.Of(id, int(b)); int64(got) != want.Int64() {
				t.Errorf("Of(%q, %d) = %d, want %s", id, b, got, want)
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Of(id, 0) did not panic")
		}
	}()
	cohort.Of("a", 0)
}

func TestCohortSQL(t *testing.T) {
	if got, want := cohort.SQL("UserId", 10000), "MOD(MOD(FARM_FINGERPRINT(UserId), 10000) + 10000, 10000)"; got != want {
		t.Errorf("SQL = %s, want %s", got, want)
	}
	if got, want := cohort.SQL("CAST(Id AS STRING)", 7), "MOD(MOD(FARM_FINGERPRINT(CAST(Id AS STRING)), 7) + 7, 7)"; got != want {
		t.Errorf("SQL = %s, want %s", got, want)
	}
}

func TestCohortParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		buckets int
		want    []cohort.Range
		format  string
	}{
		{"0", 10000, []cohort.Range{{0, 0}}, "0"},
		{"9999", 10000, []cohort.Range{{9999, 9999}}, "9999"},
		{"0-99", 10000, []cohort.Range{{0, 99}}, "0-99"},
		{"0-99,500,1000-1999", 10000, []cohort.Range{{0, 99}, {500, 500}, {1000, 1999}}, "0-99,500,1000-1999"},
		{" 1000-1999 , 0 - 99 ,, 500 ", 10000, []cohort.Range{{0, 99}, {500, 500}, {1000, 1999}}, "0-99,500,1000-1999"},
		{"0-9,10-19,5,20", 100, []cohort.Range{{0, 20}}, "0-20"},
		{"3-3", 7, []cohort.Range{{3, 3}}, "3"},
		{"0-6", 7, []cohort.Range{{0, 6}}, "0-6"},
		{"50-60,40-55", 100, []cohort.Range{{40, 60}}, "40-60"},
	} {
		got, err := cohort.Parse(tc.in, tc.buckets)
		if err != nil {
			t.Errorf("Parse(%q, %d): %v", tc.in, tc.buckets, err)
			continue
		}
		if !equalRanges(got, tc.want) {
			t.Errorf("Parse(%q, %d) = %v, want %v", tc.in, tc.buckets, got, tc.want)
		}
		if f := cohort.Format(got); f != tc.format {
			t.Errorf("Format(Parse(%q)) = %q, want %q", tc.in, f, tc.format)
		}
		if back, err := cohort.Parse(cohort.Format(got), tc.buckets); err != nil || !equalRanges(back, got) {
			t.Errorf("Parse(Format(%v)) = %v, %v", got, back, err)
		}
	}
}

func TestCohortParseErrorsNameTheBadPart(t *testing.T) {
	for _, tc := range []struct {
		in      string
		buckets int
		want    string
	}{
		{"", 10000, `cohorts "": no cohort given`},
		{" , ,", 10000, `cohorts " , ,": no cohort given`},
		{"0-99,x", 10000, `cohorts "0-99,x": "x" is not a cohort number`},
		{"0-99,-5", 10000, `cohorts "0-99,-5": "-5" is not a cohort number`},
		{"1.5", 10000, `cohorts "1.5": "1.5" is not a cohort number`},
		{"0-", 10000, `cohorts "0-": "0-" is not a range FIRST-LAST`},
		{"0-1-2", 10000, `cohorts "0-1-2": "0-1-2" is not a range FIRST-LAST`},
		{"0-ten", 10000, `cohorts "0-ten": "0-ten" is not a range FIRST-LAST`},
		{"5,10000", 10000, `cohorts "5,10000": 10000 is outside 0-9999`},
		{"0-10000", 10000, `cohorts "0-10000": 0-10000 is outside 0-9999`},
		{"7", 7, `cohorts "7": 7 is outside 0-6`},
		{"1,9-3", 10000, `cohorts "1,9-3": 9-3 ends before it starts`},
	} {
		_, err := cohort.Parse(tc.in, tc.buckets)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%q, %d): %v, want %s", tc.in, tc.buckets, err, tc.want)
		}
	}
}

func TestCohortMergeCountFormat(t *testing.T) {
	for _, tc := range []struct {
		in     []cohort.Range
		merged []cohort.Range
		count  int
		format string
	}{
		{nil, nil, 0, ""},
		{[]cohort.Range{{5, 5}}, []cohort.Range{{5, 5}}, 1, "5"},
		{[]cohort.Range{{10, 19}, {0, 9}}, []cohort.Range{{0, 19}}, 20, "0-19"},               // adjacent
		{[]cohort.Range{{0, 10}, {5, 7}}, []cohort.Range{{0, 10}}, 11, "0-10"},                // contained
		{[]cohort.Range{{0, 10}, {5, 20}}, []cohort.Range{{0, 20}}, 21, "0-20"},               // overlapping
		{[]cohort.Range{{0, 9}, {11, 20}}, []cohort.Range{{0, 9}, {11, 20}}, 20, "0-9,11-20"}, // a gap
		{[]cohort.Range{{500, 500}, {0, 99}, {0, 99}, {100, 100}}, []cohort.Range{{0, 100}, {500, 500}}, 102, "0-100,500"},
	} {
		in := append([]cohort.Range(nil), tc.in...)
		if got := cohort.Merge(tc.in); !equalRanges(got, tc.merged) {
			t.Errorf("Merge(%v) = %v, want %v", tc.in, got, tc.merged)
		}
		if !equalRanges(tc.in, in) {
			t.Errorf("Merge changed its argument: %v, was %v", tc.in, in)
		}
		if got := cohort.Count(tc.in); got != tc.count {
			t.Errorf("Count(%v) = %d, want %d", tc.in, got, tc.count)
		}
		if got := cohort.Format(tc.in); got != tc.format {
			t.Errorf("Format(%v) = %q, want %q", tc.in, got, tc.format)
		}
	}
	r := cohort.Range{First: 10, Last: 19}
	if r.Len() != 10 || !r.Contains(10) || !r.Contains(19) || r.Contains(9) || r.Contains(20) || r.String() != "10-19" {
		t.Errorf("Range %v: Len %d, String %q", r, r.Len(), r.String())
	}
}

func equalRanges(a, b []cohort.Range) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The cohorts of many ids spread evenly: no cohort of 100 gets less than
// half or more than twice its share of 100,000 sequential ids.
func TestCohortSpread(t *testing.T) {
	counts := make([]int, 100)
	for i := range 100_000 {
		counts[cohort.Of(fmt.Sprintf("user-%06d", i), 100)]++
	}
	for c, n := range counts {
		if n < 500 || n > 2000 {
			t.Errorf("cohort %d of 100 has %d of 100,000 sequential ids", c, n)
		}
	}
}
