// Package cohort assigns users to cohorts: a deterministic hash of the
// user id's text, the unit a staged cutover moves (see package cutover).
//
//	cohort = MOD(MOD(FARM_FINGERPRINT(id), B) + B, B)
//
// FARM_FINGERPRINT is farmhash's Fingerprint64 of the id's UTF-8 bytes,
// read as a signed 64-bit integer (Spanner's and BigQuery's
// FARM_FINGERPRINT); the outer MOD makes the result non-negative. The
// same function runs in Go (Of), in Spanner SQL (SQL, for a pushed-down
// filter on one cohort's rows), in BigQuery, and in any language with
// farmhash. B is DefaultBuckets (10,000: 0.01% of the users each) unless
// configured.
//
// User says where a record's user id is (the config's cohort.user: a
// column or property, an element of the record's Datastore key, or of the
// key a property points to) and gives its text.
package cohort

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	farm "github.com/dgryski/go-farm"
)

// DefaultBuckets is the number of cohorts unless configured.
const DefaultBuckets = 10_000

// MaxBuckets is the most cohorts a config or the CLI takes: 0.0001% of
// the users each.
const MaxBuckets = 1_000_000

// Of returns the cohort of user id among buckets cohorts (0 ≤ cohort <
// buckets). It panics if buckets < 1.
func Of(id string, buckets int) int {
	if buckets < 1 {
		panic(fmt.Sprintf("cohort: %d buckets", buckets))
	}
	b := int64(buckets)
	c := int64(farm.Fingerprint64([]byte(id))) % b
	if c < 0 {
		c += b // as MOD(c + b, b), without overflowing for b above 2^62
	}
	return int(c)
}

// SQL returns the Spanner (and BigQuery) expression of the cohort of the
// STRING expression expr, e.g. SQL("UserId", 10000) is
// MOD(MOD(FARM_FINGERPRINT(UserId), 10000) + 10000, 10000).
func SQL(expr string, buckets int) string {
	return fmt.Sprintf("MOD(MOD(FARM_FINGERPRINT(%s), %d) + %d, %d)", expr, buckets, buckets, buckets)
}

// Range is the cohorts First..Last, both included.
type Range struct {
	First, Last int
}

// Len is the number of cohorts in r.
func (r Range) Len() int { return r.Last - r.First + 1 }

// Contains reports whether c is in r.
func (r Range) Contains(c int) bool { return c >= r.First && c <= r.Last }

func (r Range) String() string {
	if r.First == r.Last {
		return strconv.Itoa(r.First)
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// Merge sorts rs and merges overlapping and adjacent ranges.
func Merge(rs []Range) []Range {
	out := append([]Range(nil), rs...)
	sort.Slice(out, func(i, j int) bool { return out[i].First < out[j].First })
	merged := out[:0]
	for _, r := range out {
		if n := len(merged); n > 0 && r.First <= merged[n-1].Last+1 {
			merged[n-1].Last = max(merged[n-1].Last, r.Last)
			continue
		}
		merged = append(merged, r)
	}
	return merged
}

// Count is the number of cohorts in rs (merged first).
func Count(rs []Range) int {
	n := 0
	for _, r := range Merge(rs) {
		n += r.Len()
	}
	return n
}

// Format writes rs merged, as Parse reads them: "0-99,500".
func Format(rs []Range) string {
	parts := make([]string, 0, len(rs))
	for _, r := range Merge(rs) {
		parts = append(parts, r.String())
	}
	return strings.Join(parts, ",")
}

// Parse reads a list of cohorts and ranges, "0-99,500,1000-1999", each
// within 0..buckets-1; the result is merged.
func Parse(s string, buckets int) ([]Range, error) {
	var rs []Range
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil {
			return nil, fmt.Errorf("cohorts %q: %q is not a cohort number", s, part)
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil {
				return nil, fmt.Errorf("cohorts %q: %q is not a range FIRST-LAST", s, part)
			}
		}
		switch {
		case first < 0 || last >= buckets:
			return nil, fmt.Errorf("cohorts %q: %s is outside 0-%d", s, part, buckets-1)
		case last < first:
			return nil, fmt.Errorf("cohorts %q: %s ends before it starts", s, part)
		}
		rs = append(rs, Range{first, last})
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("cohorts %q: no cohort given", s)
	}
	return Merge(rs), nil
}
