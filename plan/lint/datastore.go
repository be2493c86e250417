package lint

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/rekeyio/rekey/plan/detect"
	"github.com/rekeyio/rekey/plan/rules"
	"github.com/rekeyio/rekey/record"
)

// Thresholds of the Datastore checks.
const (
	// MinUUIDv1Share is the share of a kind's names that must look like
	// version 1 UUIDs for a finding.
	MinUUIDv1Share = 0.5
	// MinRho is the rank correlation between sample order and a property's
	// values above which a property named like a time or sequence counts
	// as monotonic.
	MinRho = 0.9
)

// Sample is a sample of one kind's entities.
type Sample struct {
	Kind      string
	Namespace string
	// Entities are records of the kind's entities (Key set, Fields the
	// properties with NoIndex), in the order read: key order, or the
	// service's __scatter__ order for a random sample.
	Entities []record.Record
	// Fraction is the share of the kind's entities the sample holds: 1
	// when all were read, 0 when unknown (then the detectors take the
	// sample as all there is).
	Fraction float64
	// How says how the sample was drawn, for the report.
	How string
}

// Datastore checks a sample of a kind against the Datastore rules (see
// the package comment): its keys (ids ≤ 0, '/' in kinds or names,
// sequential names, ids that are a dense sequence, UUID v1 names) and its
// indexed top-level properties (monotonic values cap the kind's write
// rate). The findings are sorted (rules.Sort).
func Datastore(s Sample) []rules.Finding {
	fs := checkKeys(s)
	fs = append(fs, checkProperties(s)...)
	rules.Sort(fs)
	return fs
}

// keyView is what checkKeys gathers from the sample's keys.
type keyView struct {
	names        []string
	ids          []int64
	slashNames   []string
	slashKinds   map[string]bool
	nonPositive  int
	nonPosSample string
}

func viewKeys(s Sample) keyView {
	v := keyView{slashKinds: map[string]bool{}}
	for _, rec := range s.Entities {
		if rec.Key == nil || len(rec.Key.Path) == 0 {
			continue
		}
		for _, e := range rec.Key.Path {
			if strings.Contains(e.Kind, "/") {
				v.slashKinds[e.Kind] = true
			}
			if e.Name == "" && e.ID <= 0 {
				v.nonPositive++
				if v.nonPosSample == "" {
					v.nonPosSample = rec.Key.String()
				}
			}
		}
		leaf := rec.Key.Leaf()
		switch {
		case leaf.Name != "":
			v.names = append(v.names, leaf.Name)
			if strings.Contains(leaf.Name, "/") {
				v.slashNames = append(v.slashNames, leaf.Name)
			}
		case leaf.ID > 0:
			v.ids = append(v.ids, leaf.ID)
		}
	}
	return v
}

func checkKeys(s Sample) []rules.Finding {
	v := viewKeys(s)
	subject := "kind " + s.Kind
	n := detect.Thousands(int64(len(s.Entities)))
	var fs []rules.Finding
	if v.nonPositive > 0 {
		fs = append(fs, rules.New(rules.NonPositiveID, subject, fmt.Sprintf(
			"%s key elements of %s sampled entities have an id ≤ 0 and no name, e.g. %s",
			detect.Thousands(int64(v.nonPositive)), n, v.nonPosSample)))
	}
	for _, kind := range sortedKeys(v.slashKinds) {
		fs = append(fs, rules.New(rules.SlashInName, "kind "+kind, fmt.Sprintf("kind name %q contains '/'", kind)))
	}
	if len(v.slashNames) > 0 {
		fs = append(fs, rules.New(rules.SlashInName, subject, fmt.Sprintf(
			"%s of %s key names contain '/', e.g. %q", detect.Thousands(int64(len(v.slashNames))),
			detect.Thousands(int64(len(v.names))), v.slashNames[0])))
	}
	if ok, ev := detect.SequentialNamesSampled(v.names, s.Fraction); ok {
		fs = append(fs, rules.New(rules.SequentialNames, subject, "key names: "+ev))
	}
	if ok, ev := detect.DenseSequence(v.ids, s.Fraction); ok {
		fs = append(fs, rules.New(rules.MonotonicKey, subject, "numeric ids: "+ev+
			" (ids Datastore allocates are scattered; these look counted)"))
	}
	if share, k := detect.UUIDv1Share(v.names); k > 0 && share >= MinUUIDv1Share {
		fs = append(fs, rules.New(rules.UUIDv1, subject, fmt.Sprintf(
			"%s of %s key names are version 1 (time-based) UUIDs", detect.Thousands(int64(k)), detect.Thousands(int64(len(v.names))))))
	}
	return fs
}

// property is what checkProperties gathers about one property: its
// values in sample order, by type.
type property struct {
	name    string
	count   int // entities that have it
	indexed int // entities that have it indexed
	times   []time.Time
	ints    []int64
	// order and value are the sample position and a comparable number for
	// every value that has one (numbers, times, strings by rank).
	order, value []float64
	strs         []string
	strOrder     []float64
}

func viewProperties(s Sample) []*property {
	byName := map[string]*property{}
	var names []string
	for i, rec := range s.Entities {
		for _, f := range rec.Fields {
			p := byName[f.Name]
			if p == nil {
				p = &property{name: f.Name}
				byName[f.Name] = p
				names = append(names, f.Name)
			}
			p.add(float64(i), f)
		}
	}
	sort.Strings(names)
	out := make([]*property, len(names))
	for i, n := range names {
		out[i] = byName[n]
		out[i].rankStrings()
	}
	return out
}

func (p *property) add(at float64, f record.Field) {
	p.count++
	if !f.NoIndex {
		p.indexed++
	}
	v := f.Value
	switch v.Kind {
	case record.KindTimestamp:
		p.times = append(p.times, v.Time)
		p.number(at, float64(v.Time.UnixMicro()))
	case record.KindInt:
		p.ints = append(p.ints, v.Int)
		p.number(at, float64(v.Int))
	case record.KindFloat:
		p.number(at, v.Float)
	case record.KindString:
		p.strs = append(p.strs, v.Str)
		p.strOrder = append(p.strOrder, at)
	}
}

func (p *property) number(at, v float64) {
	p.order = append(p.order, at)
	p.value = append(p.value, v)
}

// rankStrings adds the string values as numbers (their rank in byte
// order) when the property holds no other comparable values.
func (p *property) rankStrings() {
	if len(p.value) > 0 || len(p.strs) == 0 {
		return
	}
	sorted := append([]string(nil), p.strs...)
	sort.Strings(sorted)
	for i, s := range p.strs {
		p.number(p.strOrder[i], float64(sort.SearchStrings(sorted, s)))
	}
}

func checkProperties(s Sample) []rules.Finding {
	var fs []rules.Finding
	for _, p := range viewProperties(s) {
		if p.indexed == 0 {
			continue
		}
		if ev := monotonicProperty(p, s.Fraction); ev != "" {
			ev += fmt.Sprintf("; indexed in %s of the %s sampled entities that have it",
				detect.Thousands(int64(p.indexed)), detect.Thousands(int64(p.count)))
			fs = append(fs, rules.New(rules.MonotonicProperty, s.Kind+"."+p.name, ev))
		}
	}
	return fs
}

// monotonicProperty says why p's values look monotonic, "" if they do
// not: mostly timestamps; integers that are a dense sequence; or a name
// that reads as a time or a sequence with values that grow (or shrink)
// with the sample order.
func monotonicProperty(p *property, fraction float64) string {
	if len(p.times) >= detect.MinValues && 2*len(p.times) >= p.count {
		first, last := timeRange(p.times)
		return fmt.Sprintf("%s of %s values are timestamps, %s to %s: writes of the current time all land at the index's end",
			detect.Thousands(int64(len(p.times))), detect.Thousands(int64(p.count)),
			first.Format(time.RFC3339), last.Format(time.RFC3339))
	}
	if ok, ev := detect.DenseSequence(p.ints, fraction); ok && 2*len(p.ints) >= p.count {
		return "integer values: " + ev
	}
	if detect.LooksMonotonicName(p.name) {
		if rho := detect.Spearman(p.order, p.value); !math.IsNaN(rho) && math.Abs(rho) >= MinRho {
			return fmt.Sprintf("its name reads as a time or a sequence, and its values follow the sample's order (Spearman ρ = %.3f over %s values)",
				rho, detect.Thousands(int64(len(p.value))))
		}
	}
	return ""
}

func timeRange(ts []time.Time) (first, last time.Time) {
	first, last = ts[0], ts[0]
	for _, t := range ts[1:] {
		if t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return first.UTC(), last.UTC()
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
