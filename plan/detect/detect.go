// Package detect holds the pure detectors that `rekey plan` (key analysis
// of sampled source data) and `rekey lint` (schema and Datastore sample
// lint) share: each looks at a column of values or at a name and says
// whether it shows one of the patterns that make keys hotspot (see
// package rules), with the evidence as a sentence a report can print.
//
// The detectors are statistics of a sample, so each states what it
// assumes of one:
//
//   - Spearman measures how monotonic one column is in another (key order
//     against a timestamp, or against read order).
//   - DenseSequence and SequentialNames recognise numbers handed out by a
//     counter. A counter's values are all the integers of a range; a
//     uniform sample of fraction f of them has about f·span values in the
//     span max−min+1 it covers. Random numbers of the same count cover a
//     far wider span. So a set of mostly distinct integers is a sequence
//     when its density, count/span, is at least half of f.
//   - IsUUIDv1 and UUIDv1Share recognise time-based UUIDs.
//   - CommonPrefix and Cardinality measure how concentrated values are.
//   - LooksMonotonicName recognises names of columns and properties that
//     usually hold creation or update times or sequence numbers.
//
// Nothing here reads a store; the callers sample.
package detect

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Thresholds of the detectors.
const (
	// MinValues is the fewest values DenseSequence and SequentialNames
	// judge (and the fewest names of one stem SequentialNames counts).
	MinValues = 3
	// MinDistinct is the share of distinct values a sequence has at least
	// (a counter hands out each value once; some slack for duplicates in
	// the data).
	MinDistinct = 0.9
	// MinNameShare is the share of all names that must be stem<n> names of
	// sequential stems for SequentialNames to report them.
	MinNameShare = 0.8
	// PrefixShare is the share of values CommonPrefix's prefix is shared
	// by.
	PrefixShare = 0.9
)

// Spearman is the Spearman rank correlation of x and y: the Pearson
// correlation of their ranks, where tied values get the mean of the ranks
// they span. It is 1 when y grows with x (in any way), −1 when it shrinks,
// about 0 when they are unrelated. It is NaN when x and y differ in length,
// have fewer than 3 values, either is constant, or a value is NaN.
func Spearman(x, y []float64) float64 {
	if len(x) != len(y) || len(x) < 3 {
		return math.NaN()
	}
	for i := range x {
		if math.IsNaN(x[i]) || math.IsNaN(y[i]) {
			return math.NaN()
		}
	}
	return pearson(ranks(x), ranks(y))
}

// ranks returns the 1-based rank of every value of v, ties getting the
// mean of their ranks.
func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] < v[idx[b]] })
	r := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
			j++
		}
		mean := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = mean
		}
		i = j + 1
	}
	return r
}

// pearson is the Pearson correlation of x and y, NaN if either is
// constant.
func pearson(x, y []float64) float64 {
	n := float64(len(x))
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return math.NaN()
	}
	return sxy / math.Sqrt(sxx*syy)
}

// sequence is what DenseSequence measured.
type sequence struct {
	count, distinct int
	min, max        int64
	density         float64 // distinct / (max-min+1)
}

// measure measures vals as a candidate sequence.
func measure(vals []int64) sequence {
	s := sequence{count: len(vals)}
	if len(vals) == 0 {
		return s
	}
	seen := make(map[int64]struct{}, len(vals))
	s.min, s.max = vals[0], vals[0]
	for _, v := range vals {
		seen[v] = struct{}{}
		s.min, s.max = min(s.min, v), max(s.max, v)
	}
	s.distinct = len(seen)
	// The span in float64: max−min+1 overflows int64 for extreme values.
	span := float64(s.max) - float64(s.min) + 1
	s.density = float64(s.distinct) / span
	return s
}

// dense reports whether s looks like a uniform sample of fraction f of a
// sequence (see the package comment).
func (s sequence) dense(f float64) bool {
	return s.count >= MinValues &&
		float64(s.distinct) >= MinDistinct*float64(s.count) &&
		s.density >= f/2
}

// fractionOrAll is f, taken as 1 (the values are all there are) when it
// is not in (0, 1].
func fractionOrAll(f float64) float64 {
	if f <= 0 || f > 1 || math.IsNaN(f) {
		return 1
	}
	return f
}

// DenseSequence reports whether vals look like the values of a counter:
// at least MinValues values, at least MinDistinct of them distinct, and
// dense: count/(max−min+1) at least half of sampleFraction, the fraction
// of the data vals are a uniform sample of (0 or anything outside (0, 1]
// means vals are all the data). The evidence states the count, the range
// and the density. The order of vals does not matter.
func DenseSequence(vals []int64, sampleFraction float64) (ok bool, evidence string) {
	f := fractionOrAll(sampleFraction)
	s := measure(vals)
	if !s.dense(f) {
		return false, ""
	}
	return true, fmt.Sprintf("%s distinct values of %s lie in %s..%s, %s of that range%s",
		Thousands(int64(s.distinct)), Thousands(int64(s.count)), Thousands(s.min), Thousands(s.max),
		percent(s.density), sampledNote(f))
}

func sampledNote(f float64) string {
	if f >= 1 {
		return ""
	}
	return fmt.Sprintf(" (a %s sample of a sequence would fill %s)", percent(f), percent(f))
}

// SequentialNames reports whether names are mostly stem<n> names from a
// counter, like Customer1, Customer2, …: a stem of letters (and the
// separators - _ . : # / and space, but no digits) followed by a decimal
// number, where the numbers of each stem are a DenseSequence of the whole
// data. It holds when the names of such stems are at least MinNameShare
// of all names; the evidence names the stems and their ranges, e.g.
// "93% of 10,000 names are Customer<n>, n from 1 to 10,000".
func SequentialNames(names []string) (ok bool, evidence string) {
	return SequentialNamesSampled(names, 1)
}

// SequentialNamesSampled is SequentialNames for names that are a uniform
// sample of fraction sampleFraction of all names (see DenseSequence).
func SequentialNamesSampled(names []string, sampleFraction float64) (ok bool, evidence string) {
	f := fractionOrAll(sampleFraction)
	byStem := map[string][]int64{}
	for _, n := range names {
		if stem, num, ok := splitNumbered(n); ok {
			byStem[stem] = append(byStem[stem], num)
		}
	}
	type group struct {
		stem string
		seq  sequence
	}
	var groups []group
	matched := 0
	for stem, nums := range byStem {
		if s := measure(nums); s.dense(f) {
			groups = append(groups, group{stem, s})
			matched += s.count
		}
	}
	if len(names) == 0 || float64(matched) < MinNameShare*float64(len(names)) {
		return false, ""
	}
	sort.Slice(groups, func(i, j int) bool {
		if groups[i].seq.count != groups[j].seq.count {
			return groups[i].seq.count > groups[j].seq.count
		}
		return groups[i].stem < groups[j].stem
	})
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = fmt.Sprintf("%s<n>, n from %s to %s", g.stem, Thousands(g.seq.min), Thousands(g.seq.max))
	}
	return true, fmt.Sprintf("%s of %s names are %s%s", percent(float64(matched)/float64(len(names))),
		Thousands(int64(len(names))), strings.Join(parts, "; or "), sampledNote(f))
}

// splitNumbered splits "Customer42" into "Customer" and 42; ok is false
// unless the name is a stem (see SequentialNames) and a number that fits
// an int64.
func splitNumbered(name string) (stem string, num int64, ok bool) {
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	if i == len(name) || i == 0 {
		return "", 0, false
	}
	stem = name[:i]
	letter := false
	for _, r := range stem {
		switch {
		case unicode.IsLetter(r):
			letter = true
		case strings.ContainsRune("-_.:#/ ", r):
		default:
			return "", 0, false
		}
	}
	n, err := strconv.ParseInt(name[i:], 10, 64)
	if err != nil || !letter {
		return "", 0, false
	}
	return stem, n, true
}

// IsUUIDv1 reports whether s is a UUID of version 1 (time-based) in its
// canonical text form, 8-4-4-4-12 hexadecimal digits in either case,
// optionally in braces or after "urn:uuid:", with the RFC 4122 variant.
func IsUUIDv1(s string) bool {
	switch {
	case len(s) == 38 && s[0] == '{' && s[37] == '}':
		s = s[1:37]
	case len(s) == 45 && strings.EqualFold(s[:9], "urn:uuid:"):
		s = s[9:]
	}
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
			continue
		}
		if !isHex(c) {
			return false
		}
	}
	return s[14] == '1' && strings.IndexByte("89abAB", s[19]) >= 0
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// UUIDv1Share is the share of vals that are IsUUIDv1 and their number n;
// share is 0 for no values.
func UUIDv1Share(vals []string) (share float64, n int) {
	for _, v := range vals {
		if IsUUIDv1(v) {
			n++
		}
	}
	if len(vals) == 0 {
		return 0, 0
	}
	return float64(n) / float64(len(vals)), n
}

// CommonPrefix is the longest prefix shared by at least PrefixShare (90%)
// of vals, and the share of vals that have it; the prefix is cut back to a
// whole UTF-8 character. It is "" (with share 1) when no prefix is shared
// that widely, and "", 0 for no values. A single value is its own prefix.
func CommonPrefix(vals []string) (prefix string, share float64) {
	if len(vals) == 0 {
		return "", 0
	}
	sorted := append([]string(nil), vals...)
	sort.Strings(sorted)
	// In sorted order the values sharing a prefix are contiguous, and the
	// prefix a run of m values shares is that of its first and last.
	m := int(math.Ceil(PrefixShare * float64(len(sorted))))
	for i := 0; i+m-1 < len(sorted); i++ {
		if p := lcp(sorted[i], sorted[i+m-1]); len(p) > len(prefix) {
			prefix = p
		}
	}
	n := 0
	for _, v := range vals {
		if strings.HasPrefix(v, prefix) {
			n++
		}
	}
	return prefix, float64(n) / float64(len(vals))
}

// lcp is the longest common prefix of a and b, cut to whole characters.
func lcp(a, b string) string {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	for n > 0 && n < len(a) && !utf8.RuneStart(a[n]) {
		n--
	}
	return a[:n]
}

// Cardinality counts the distinct values of vals and finds the most
// common one, top (the least in byte order among equally common ones),
// with its share of all values; 0, 0, "" for no values.
func Cardinality(vals []string) (distinct int, topShare float64, top string) {
	counts := map[string]int{}
	for _, v := range vals {
		counts[v]++
	}
	best := 0
	for v, c := range counts {
		if c > best || c == best && v < top {
			best, top = c, v
		}
	}
	if len(vals) == 0 {
		return 0, 0, ""
	}
	return len(counts), float64(best) / float64(len(vals)), top
}

// Words of column and property names (see LooksMonotonicName).
var (
	// monotonicWords name a time or a sequence number on their own.
	monotonicWords = set("created", "creation", "updated", "modified", "inserted", "timestamp",
		"ts", "time", "date", "datetime", "seq", "sequence", "serial", "epoch")
	// eventWords name an event, and qualifierWords make a time or number
	// of it: created_at, event_time_utc, seq_no.
	eventWords = set("create", "created", "update", "updated", "modify", "modified", "insert",
		"inserted", "commit", "committed", "write", "written", "received", "sent", "published",
		"posted", "logged", "recorded", "processed", "event", "last")
	qualifierWords = set("at", "on", "ms", "us", "ns", "millis", "micros", "nanos", "utc", "number",
		"no", "num", "nr", "id", "time", "date", "ts", "timestamp")
)

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// LooksMonotonicName reports whether a column or property name usually
// holds a creation or update time or a sequence number: its last word
// (words split at _ - . spaces, digits and lower-to-upper case changes,
// compared case-insensitively) is one of created, updated, modified,
// inserted, timestamp, ts, time, date, datetime, seq, sequence, serial,
// epoch, or a qualifier (at, on, ms, utc, no, number, id, …) after such a
// word or an event word (created_at, event_time_utc, seq_no, id_seq), or
// the name is one such word run together (createdat, inserttime).
func LooksMonotonicName(name string) bool {
	words := splitWords(name)
	if len(words) == 0 {
		return false
	}
	last := words[len(words)-1]
	if monotonicWords[last] {
		return true
	}
	if len(words) > 1 && qualifierWords[last] {
		prev := words[len(words)-2]
		return monotonicWords[prev] || eventWords[prev]
	}
	if len(words) == 1 {
		for q := range qualifierWords {
			if head, ok := strings.CutSuffix(last, q); ok && (eventWords[head] || monotonicWords[head]) {
				return true
			}
		}
	}
	return false
}

// splitWords splits an identifier into lower-case words: at separators
// and digits, before an upper-case letter that follows a lower-case one,
// and before the last upper-case letter of a run followed by a lower-case
// one ("HTTPServer" → http, server).
func splitWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(name)
	for i, r := range rs {
		if !unicode.IsLetter(r) {
			flush()
			continue
		}
		if i > 0 && unicode.IsUpper(r) && len(cur) > 0 {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsUpper(prev) && nextLower {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

// Thousands writes n in decimal with commas between groups of three
// digits: 1234567 → "1,234,567".
// Count is n and noun, in the plural unless n is 1 (nouns ending in x
// take -es: index, indexes), n with thousands separators: "1 finding",
// "3 nodes", "10,000,000 writes".
func Count(n int64, noun string) string {
	switch {
	case n == 1 || n == -1:
	case strings.HasSuffix(noun, "x"):
		noun += "es"
	default:
		noun += "s"
	}
	return Thousands(n) + " " + noun
}

func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return sign + b.String()
}

// percent writes a share as a whole percentage, or with one decimal below
// 10% ("93%", "2.5%", "<0.1%"); a share below 1 is never written 100%.
func percent(share float64) string {
	p := share * 100
	switch {
	case p > 0 && p < 0.05:
		return "<0.1%"
	case p < 9.95 && math.Abs(p-math.Round(p)) > 1e-9:
		return strconv.FormatFloat(p, 'f', 1, 64) + "%"
	case p < 100 && math.Round(p) == 100:
		return "99%"
	}
	return strconv.FormatFloat(math.Round(p), 'f', 0, 64) + "%"
}
