package plan

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/rekeyio/rekey/plan/detect"
	"github.com/rekeyio/rekey/plan/keys"
	"github.com/rekeyio/rekey/plan/rules"
)

// Thresholds of the key analysis.
const (
	// MonotonicRho is the |Spearman ρ| between key order and a timestamp
	// at which keys count as monotonic.
	MonotonicRho = 0.9
	// MinPrefix is the shortest common prefix reported.
	MinPrefix = 4
	// MaxKeyBytes is the longest key the sources advise (2 KB).
	MaxKeyBytes = 2048
	// MaxKeyColumns is the most key columns the sources advise.
	MaxKeyColumns = 3
	// LowCardinality is the most distinct values of a first key column
	// that counts as low-cardinality, TopShare the share of the most
	// common value that does too.
	LowCardinality = 16
	TopShare       = 0.2
)

// Side is one side of the migration's keys, as the analysis sees it.
type Side struct {
	// Name is "source" or "target"; Subject the table or kind; Column
	// the first key column ("" for Datastore).
	Name, Subject, Column string
	Datastore             bool
	// ShardColumn is a shard column the rewrite made: few values by
	// design (about the node count, evenly used).
	ShardColumn string
	// Fraction is the share of the source's records sampled (1 for all).
	Fraction float64
	// Key names the key's columns, first first (none for Datastore), for
	// the fixes that reorder them.
	Key  []string
	keys *keys.Set
	old  bool
}

// OldSide and NewSide view sampled keys as the source's or the target's.
// They panic if the keys cannot be held (a value of 16 MB or more).
func OldSide(ks []keys.Key, subject, column string, datastore bool, fraction float64) Side {
	return sideOf(mustSet(ks), true, subject, column, datastore, fraction)
}

func NewSide(ks []keys.Key, subject, column string, datastore bool, fraction float64) Side {
	return sideOf(mustSet(ks), false, subject, column, datastore, fraction)
}

func mustSet(ks []keys.Key) *keys.Set {
	set, err := keys.FromKeys(ks)
	if err != nil {
		panic(fmt.Sprintf("plan: %v", err))
	}
	return set
}

// sideOf views the set's old (old) or new keys as a side.
func sideOf(set *keys.Set, old bool, subject, column string, datastore bool, fraction float64) Side {
	name := "target"
	if old {
		name = "source"
	}
	return Side{Name: name, Subject: subject, Column: column, Datastore: datastore, Fraction: fraction, keys: set, old: old}
}

func (s Side) len() int { return s.keys.Len() }

func (s Side) enc(i int) []byte { return s.keys.Key(s.old, i) }

func (s Side) text(i int) string { return s.keys.Text(s.old, i) }

func (s Side) first(i int) (keys.Part, bool) { return s.keys.First(s.old, i) }

func (s Side) columns(i int) int {
	if s.old || s.Datastore {
		return s.keys.Columns(i)
	}
	return s.keys.NewColumns(i)
}

// subject names what a finding is about: Table.Column, or kind K.
func (s Side) subject() string {
	if s.Datastore {
		return "kind " + s.Subject
	}
	if s.Column == "" {
		return s.Subject
	}
	return s.Subject + "." + s.Column
}

// Analyze checks the side's keys against the rules (package rules) and
// returns what they break, with the evidence.
func Analyze(s Side) []rules.Finding {
	n := s.len()
	if n == 0 {
		return nil
	}
	var out []rules.Finding
	add := func(id, subject, evidence string) { out = append(out, rules.NewForKey(id, subject, evidence, s.Key)) }
	sampled := fmt.Sprintf("%s sampled keys", detect.Thousands(int64(n)))
	// Both signs of a monotonic key (time and a counter) make one finding.
	var monotonic []string

	// Monotonic in time: key order against a timestamp of the record.
	if rho, field, m := s.timeCorrelation(); m >= 3 && math.Abs(rho) >= MonotonicRho {
		monotonic = append(monotonic, fmt.Sprintf("Spearman ρ = %.3f between key order and %s over %s sampled keys", rho, field, detect.Thousands(int64(m))))
	}
	if len(monotonic) == 0 {
		if rho, file, m := s.readCorrelation(); m >= 3 && math.Abs(rho) >= MonotonicRho {
			monotonic = append(monotonic, fmt.Sprintf("Spearman ρ = %.3f between key order and the order of the records in %s over %s sampled keys (the order they were written)", rho, file, detect.Thousands(int64(m))))
		}
	}
	ints, strs := s.firstValues()
	what := "first key column"
	if s.Datastore {
		what = "key ids"
	}
	if len(ints) == n && n >= detect.MinValues {
		if p, _ := s.first(0); p.Kind == "time" {
			add(rules.TimestampFirst, s.subject(), fmt.Sprintf("the %s is a timestamp (%s of %s)", what, spanOf(s), sampled))
		} else if ok, ev := detect.DenseSequence(ints, s.Fraction); ok {
			monotonic = append(monotonic, "the "+what+": "+ev)
		}
	}
	if len(monotonic) > 0 {
		add(rules.MonotonicKey, s.subject(), strings.Join(monotonic, "; "))
	}
	what = "values of the first key column"
	if s.Datastore {
		what = "key names"
	}
	if len(strs) >= detect.MinValues {
		if ok, ev := detect.SequentialNamesSampled(strs, s.Fraction); ok {
			add(rules.SequentialNames, s.subject(), "the "+what+": "+ev)
		}
		if share, m := detect.UUIDv1Share(strs); m > 0 && share >= 0.5 {
			add(rules.UUIDv1, s.subject(), fmt.Sprintf("%.0f%% of %s %s are version-1 UUIDs", 100*share, detect.Thousands(int64(m)), what))
		}
		if p, share := detect.CommonPrefix(strs); len(p) >= MinPrefix {
			add(rules.CommonPrefix, s.subject(), fmt.Sprintf("%.0f%% of the %s start with %q", 100*share, what, p))
		}
	}
	if !s.Datastore && s.columns(0) > 1 && n >= 100 && !strings.EqualFold(s.Column, s.ShardColumn) {
		if d, top, v := cardinality(n, func(i int) string { p, _ := s.first(i); return p.Text }); d <= LowCardinality || top >= TopShare {
			add(rules.LowCardinalityFirst, s.subject(), fmt.Sprintf("%d distinct values in %s; the most common, %q, has %.0f%%", d, sampled, v, 100*top))
		}
	}
	s.lengthFindings(add)
	if s.Datastore {
		s.datastoreFindings(add)
	}
	rules.Sort(out)
	return out
}

// lengthFindings reports long keys and many key columns.
func (s Side) lengthFindings(add func(id, subject, evidence string)) {
	longest, long, cols := 0, 0, 0
	for i := range s.len() {
		l := len(s.enc(i))
		longest = max(longest, l)
		if l > MaxKeyBytes {
			long++
		}
		cols = max(cols, s.columns(i))
	}
	if long > 0 {
		add(rules.LongKey, s.subject(), fmt.Sprintf("%d sampled keys are longer than %d bytes (longest %d)", long, MaxKeyBytes, longest))
	}
	if !s.Datastore && cols > MaxKeyColumns {
		add(rules.ManyKeyColumns, s.subject(), fmt.Sprintf("the key has %d columns", cols))
	}
}

// datastoreFindings reports ids ≤ 0 and names with '/'.
func (s Side) datastoreFindings(add func(id, subject, evidence string)) {
	bad, slash := 0, 0
	badEx, slashEx := 0, 0 // the last of each
	for i := range s.len() {
		p, ok := s.first(i)
		switch {
		case !ok:
		case p.Kind == "int" && p.Int <= 0:
			bad++
			badEx = i
		case p.Kind == "string" && strings.Contains(p.Text, "/"):
			slash++
			slashEx = i
		}
	}
	if bad > 0 {
		add(rules.NonPositiveID, s.subject(), fmt.Sprintf("%d sampled keys have an id ≤ 0, e.g. %s", bad, s.text(badEx)))
	}
	if slash > 0 {
		add(rules.SlashInName, s.subject(), fmt.Sprintf("%d sampled key names contain '/', e.g. %s", slash, s.text(slashEx)))
	}
}

// firstValues are the first key parts as integers (when all are
// integers or times) and as strings (those that are).
func (s Side) firstValues() (ints []int64, strs []string) {
	for i := range s.len() {
		p, ok := s.first(i)
		if !ok {
			continue
		}
		switch p.Kind {
		case "int", "time":
			ints = append(ints, p.Int)
		case "string":
			strs = append(strs, p.Text)
		}
	}
	return ints, strs
}

// timeCorrelation is Spearman's ρ between the keys' order and the
// records' timestamp (keys.Key.Time), over the m keys that have one.
func (s Side) timeCorrelation() (rho float64, field string, m int) {
	var idx []int32
	for i := range s.len() {
		if _, _, f, ok := s.keys.Time(i); ok {
			idx = append(idx, int32(i))
			field = f
		}
	}
	if len(idx) < 3 {
		return math.NaN(), field, len(idx)
	}
	s.sortByKey(idx)
	x := make([]float64, len(idx))
	y := make([]float64, len(idx))
	for r, i := range idx {
		sec, nsec, _, _ := s.keys.Time(int(i))
		x[r] = float64(r)
		y[r] = float64(time.Unix(sec, int64(nsec)).UnixNano())
	}
	return detect.Spearman(x, y), field, len(idx)
}

// sortByKey sorts the indexes of keys by their encoding, equal keys in
// the order of their indexes (as a stable sort of idx in increasing
// order would).
func (s Side) sortByKey(idx []int32) {
	slices.SortFunc(idx, func(a, b int32) int {
		if c := bytes.Compare(s.enc(int(a)), s.enc(int(b))); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
}

// readCorrelation is Spearman's ρ between the keys' order and their
// order in the file they were read from, when every key comes from one
// file (the order of records across files says nothing).
func (s Side) readCorrelation() (rho float64, file string, m int) {
	file = s.keys.File(0)
	for i := range s.len() {
		if f := s.keys.File(i); f == "" || f != file {
			return math.NaN(), "", 0
		}
	}
	idx := make([]int32, s.len())
	for i := range idx {
		idx[i] = int32(i)
	}
	s.sortByKey(idx)
	x := make([]float64, len(idx))
	y := make([]float64, len(idx))
	for r, i := range idx {
		x[r] = float64(r)
		y[r] = float64(s.keys.Pos(int(i)))
	}
	idx = nil
	return detect.Spearman(x, y), file, len(x)
}

// spanOf describes the range of the first key parts' times (by their
// nanoseconds: RFC 3339 text of times within a second does not sort).
func spanOf(s Side) string {
	lo, hi := keys.Part{}, keys.Part{}
	for i := range s.len() {
		p, _ := s.first(i)
		if i == 0 || p.Int < lo.Int {
			lo = p
		}
		if i == 0 || p.Int > hi.Int {
			hi = p
		}
	}
	return "from " + lo.Text + " to " + hi.Text
}

// cardinalityExact is how many distinct values cardinality counts in a
// map before it turns to a count that needs less memory.
const cardinalityExact = 1 << 16

// cardinality is detect.Cardinality of the n values value(i) wherever
// the low-cardinality finding can hold (at most LowCardinality distinct
// values, or one with a share of at least TopShare). With many distinct
// values it finds the values that can have that share (Misra–Gries
// counters) and counts them, and counts the distinct values by sorting
// only if one has: no map of every value of a sample of millions.
// Otherwise distinct is more than LowCardinality and topShare below
// TopShare.
func cardinality(n int, value func(i int) string) (distinct int, topShare float64, top string) {
	counts := map[string]int{}
	for i := range n {
		counts[value(i)]++
		if len(counts) > cardinalityExact {
			return cardinalityLarge(n, value)
		}
	}
	best := 0
	for v, c := range counts {
		if c > best || c == best && v < top {
			best, top = c, v
		}
	}
	if n == 0 {
		return 0, 0, ""
	}
	return len(counts), float64(best) / float64(n), top
}

func cardinalityLarge(n int, value func(i int) string) (distinct int, topShare float64, top string) {
	// Misra–Gries with k counters keeps every value more common than
	// n/(k+1): k = 5 keeps every one with a share of TopShare (1/5).
	const k = 5
	cand := map[string]int{}
	for i := range n {
		v := value(i)
		if _, ok := cand[v]; ok || len(cand) < k {
			cand[v]++
			continue
		}
		for c := range cand {
			if cand[c]--; cand[c] == 0 {
				delete(cand, c)
			}
		}
	}
	exact := map[string]int{}
	for v := range cand {
		exact[v] = 0
	}
	for i := range n {
		if c, ok := exact[value(i)]; ok {
			exact[value(i)] = c + 1
		}
	}
	best := 0
	for v, c := range exact {
		if c > best || c == best && v < top {
			best, top = c, v
		}
	}
	topShare = float64(best) / float64(n)
	if topShare < TopShare {
		return cardinalityExact + 1, topShare, top
	}
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int { return strings.Compare(value(int(a)), value(int(b))) })
	distinct = 0
	for i := range idx {
		if i == 0 || value(int(idx[i])) != value(int(idx[i-1])) {
			distinct++
		}
	}
	return distinct, topShare, top
}
