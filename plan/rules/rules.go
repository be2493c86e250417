// Package rules is the catalogue of key-design rules that `rekey plan`
// (findings in the source data) and `rekey lint` (findings in a schema)
// check, each with where it comes from and the rewrite that fixes it.
//
// The rules restate the public guidance each cites (Spanner's schema
// design, Datastore's best practices, Cloud Storage's request-rate
// guidelines, Lindorm's primary-key design); a Finding names its Rule by ID so a report, a JSON consumer and a CI
// gate all speak of the same thing.
package rules

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Severity orders findings: Info < Warning < Error.
type Severity int

const (
	Info Severity = iota
	Warning
	Error
)

func (s Severity) String() string {
	switch s {
	case Warning:
		return "warning"
	case Error:
		return "error"
	}
	return "info"
}

// MarshalText writes the severity's name (JSON output).
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a severity's name (JSON input).
func (s *Severity) UnmarshalText(b []byte) error {
	v, err := ParseSeverity(string(b))
	*s = v
	return err
}

// ParseSeverity reads "info", "warning" or "error".
func ParseSeverity(s string) (Severity, error) {
	switch s {
	case "info":
		return Info, nil
	case "warning":
		return Warning, nil
	case "error":
		return Error, nil
	}
	return Info, fmt.Errorf("severity %q: want info, warning or error", s)
}

// Rule is one rule of key design.
type Rule struct {
	ID string
	// Rule is the rule itself, one sentence.
	Rule string
	// Source is where it is written: the public guidance it
	// restates.
	Source string
	// Fix says what to do, naming rekey's strategy where one fixes it.
	Fix string
	// Strategies are the rewrite strategies that fix it ("" if none does).
	Strategies []string
	// Severity is the rule's default severity.
	Severity Severity
}

// The rules.
const (
	MonotonicKey        = "monotonic-key"
	TimestampFirst      = "timestamp-first-key"
	SequentialNames     = "sequential-names"
	LowCardinalityFirst = "low-cardinality-first-key"
	CommonPrefix        = "common-prefix"
	LongKey             = "long-key"
	ManyKeyColumns      = "many-key-columns"
	NonPositiveID       = "datastore-id-not-positive"
	SlashInName         = "datastore-name-slash"
	UUIDv1              = "uuid-v1"
	MonotonicIndex      = "monotonic-index"
	NewestFirstAsc      = "timestamp-key-without-desc"
	ShardsAboveNodes    = "shards-far-above-nodes"
	MonotonicProperty   = "monotonic-indexed-property"
	ShardsUneven        = "shards-uneven-over-nodes"
	SignedShards        = "signed-shards"
)

var catalogue = map[string]Rule{
	MonotonicKey: {ID: MonotonicKey, Severity: Error,
		Rule:       "A key that grows or shrinks monotonically sends every new write to the end of one key range, so one server takes all the load (a hotspot); the split Spanner adds becomes the next hotspot.",
		Source:     "cloud.google.com/spanner/docs/schema-design; cloud.google.com/datastore/docs/best-practices",
		Fix:        "Spread the key: a hash prefix or shard column before it, bit reversal for sequential integers, or a UUID v4.",
		Strategies: []string{"hashprefix", "shard", "bitreverse", "uuid"}},
	TimestampFirst: {ID: TimestampFirst, Severity: Error,
		Rule:       "A timestamp or sequence as the first key column makes every insert land at the end of the table.",
		Source:     "cloud.google.com/spanner/docs/schema-design (swap the order of keys)",
		Fix:        "Move the monotonic column out of first place (after another key column), or put a shard column first.",
		Strategies: []string{"swap", "shard", "hashprefix"}},
	SequentialNames: {ID: SequentialNames, Severity: Warning,
		Rule:       "Names like Customer1, Customer2, … share a prefix and grow in order: new keys crowd into one range.",
		Source:     "cloud.google.com/datastore/docs/best-practices (keys)",
		Fix:        "Put a hash prefix before the name, or reverse it.",
		Strategies: []string{"hashprefix", "reverse"}},
	LowCardinalityFirst: {ID: LowCardinalityFirst, Severity: Warning,
		Rule:       "A first key column with few distinct values (an enum, a country, a status) puts most writes into the ranges of its most common values.",
		Source:     "cloud.google.com/spanner/docs/schema-design; Alibaba Cloud Lindorm: Design primary keys for Lindorm wide tables",
		Fix:        "Put a high-cardinality column or a shard column first.",
		Strategies: []string{"shard", "swap", "hashprefix"}},
	CommonPrefix: {ID: CommonPrefix, Severity: Warning,
		Rule:       "Keys with a long common prefix all fall in one key range; randomness after the prefix only helps inside it.",
		Source:     "cloud.google.com/storage/docs/request-rate (sequential names)",
		Fix:        "Put a hash prefix before the key.",
		Strategies: []string{"hashprefix"}},
	LongKey: {ID: LongKey, Severity: Warning,
		Rule:   "Shorter keys write faster and cost less: keep variable-length key values at or under 2 KB.",
		Source: "Alibaba Cloud Lindorm: Design primary keys for Lindorm wide tables",
		Fix:    "Use numbers or short codes instead of long names in keys."},
	ManyKeyColumns: {ID: ManyKeyColumns, Severity: Info,
		Rule:   "Keep primary keys to 1–3 columns.",
		Source: "Alibaba Cloud Lindorm: Design primary keys for Lindorm wide tables",
		Fix:    "Drop key columns that do not identify the row; keep the rest as ordinary columns."},
	NonPositiveID: {ID: NonPositiveID, Severity: Error,
		Rule:       "Datastore numeric ids must be positive: 0 means \"allocate one\" and negative ids are refused.",
		Source:     "cloud.google.com/datastore/docs/best-practices (keys)",
		Fix:        "Give these entities names, or new ids from AllocateIds; a UUID rewrite gives every entity a valid name.",
		Strategies: []string{"uuid"}},
	SlashInName: {ID: SlashInName, Severity: Error,
		Rule:   "Datastore kind names and custom key names must not contain '/'.",
		Source: "cloud.google.com/datastore/docs/best-practices (keys)",
		Fix:    "Replace '/' in names before migrating (a name rewrite, or UUID names).", Strategies: []string{"uuid"}},
	UUIDv1: {ID: UUIDv1, Severity: Warning,
		Rule:       "UUID v1 puts a timestamp in its high bits, so v1 keys are as monotonic as the clock.",
		Source:     "cloud.google.com/spanner/docs/schema-design (UUID as primary key)",
		Fix:        "Use UUID v4 keys (random bits).",
		Strategies: []string{"uuid", "hashprefix"}},
	MonotonicIndex: {ID: MonotonicIndex, Severity: Error,
		Rule:   "A non-interleaved index led by a monotonic column is a hotspot of its own: every insert updates the index's last range.",
		Source: "cloud.google.com/spanner/docs/schema-design (indexes); cloud.google.com/spanner/docs/secondary-indexes",
		Fix:    "Interleave the index under its parent, or lead it with a shard column (a STORED MOD(FARM_FINGERPRINT(...), N) column)."},
	NewestFirstAsc: {ID: NewestFirstAsc, Severity: Info,
		Rule:   "A timestamp key read newest first should be declared DESC (it does not help against hotspots, but saves the reverse scan).",
		Source: "cloud.google.com/spanner/docs/schema-design (descending order of timestamps)",
		Fix:    "Declare the key column DESC."},
	ShardsAboveNodes: {ID: ShardsAboveNodes, Severity: Warning,
		Rule:   "A shard count far above the node count buys nothing and makes every read fan out over more shards; N ≈ the expected number of nodes.",
		Source: "cloud.google.com/spanner/docs/schema-design (hash a key and spread writes across N shards)",
		Fix:    "Choose a shard count near the node count you expect (e.g. 10 for 10 nodes)."},
	ShardsUneven: {ID: ShardsUneven, Severity: Warning,
		Rule:       "Each shard is a range of the key space and its writes go to its own end while the rest of the key grows: a node takes the load of the shards it holds, so shards that do not divide evenly over the nodes leave one node with more of them.",
		Source:     "cloud.google.com/spanner/docs/schema-design (hash a key and spread writes across N shards)",
		Fix:        "Choose a shard count that is a multiple of the node count (e.g. 6 or 9 for 3 nodes; with mode signed count 2N values, shard 0 twice).",
		Strategies: []string{"shard"}},
	SignedShards: {ID: SignedShards, Severity: Warning,
		Rule:       "MOD(FARM_FINGERPRINT(x), N) keeps the sign of the hash: it takes 2N−1 values, −(N−1)..N−1, and 0 gets the rows of both signs, about twice the share of each other value.",
		Source:     "cloud.google.com/spanner/docs/reference/standard-sql/mathematical_functions (MOD)",
		Fix:        "Use the shard strategy's mode abs, ABS(MOD(FARM_FINGERPRINT(x), N)): N values 0..N−1, each with an equal share.",
		Strategies: []string{"shard"}},
	MonotonicProperty: {ID: MonotonicProperty, Severity: Warning,
		Rule:   "An indexed, monotonically increasing property caps a kind at about 500 writes/s: every write updates the index's last range.",
		Source: "cloud.google.com/datastore/docs/best-practices (indexes on monotonically increasing values)",
		Fix:    "Exclude it from indexes, or index a sharded form (userId + timestamp, or a fixed-length shard string + timestamp)."},
}

// Get returns the rule with the id; it panics on an unknown id (a
// programming error: the ids are the constants above).
func Get(id string) Rule {
	r, ok := catalogue[id]
	if !ok {
		panic("rules: no rule " + id)
	}
	return r
}

// All returns every rule, by id.
func All() []Rule {
	out := make([]Rule, 0, len(catalogue))
	for _, r := range catalogue {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Finding is one rule broken by one table, kind, column or index, with the
// evidence that shows it.
type Finding struct {
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	// Subject is what breaks it: "Table", "Table.Column", "INDEX Name",
	// "kind Kind".
	Subject string `json:"subject"`
	// Evidence is what was measured or read, e.g. "Spearman ρ = 0.998
	// between key order and read order over 100,000 sampled rows".
	Evidence string `json:"evidence"`
	// Text is the rule (Rule.Rule), Source where it comes from and Fix
	// what to do, filled by New.
	Text       string   `json:"text"`
	Source     string   `json:"source"`
	Fix        string   `json:"fix"`
	Strategies []string `json:"strategies,omitempty"`
}

// New makes a finding of rule id about subject, with the rule's default
// severity, text, source and fix.
func New(id, subject, evidence string) Finding {
	r := Get(id)
	return Finding{Rule: id, Severity: r.Severity, Subject: subject, Evidence: evidence,
		Text: r.Rule, Source: r.Source, Fix: r.Fix, Strategies: r.Strategies}
}

// NewForKey is New for a key of the given columns (first column first):
// where the rule's fix reorders the key (TimestampFirst), the fix names
// these columns, e.g. "(EventTime, EventId) → (EventId, EventTime)".
func NewForKey(id, subject, evidence string, columns []string) Finding {
	f := New(id, subject, evidence)
	if id == TimestampFirst && len(columns) > 0 {
		f.Fix = timestampFirstFix(columns)
	}
	return f
}

// timestampFirstFix is TimestampFirst's fix for a key of these columns.
func timestampFirstFix(columns []string) string {
	key := func(cs ...string) string { return "(" + strings.Join(cs, ", ") + ")" }
	sharded := key(append([]string{"ShardId"}, columns...)...)
	if len(columns) == 1 {
		return fmt.Sprintf("%s is the whole key: put a shard column before it, %s → %s, or a hash prefix.", columns[0], key(columns...), sharded)
	}
	swapped := append(slices.Clone(columns[1:]), columns[0])
	return fmt.Sprintf("Move %s out of first place, e.g. %s → %s, or put a shard column first, %s.", columns[0], key(columns...), key(swapped...), sharded)
}

// Sort orders findings by severity (worst first), then subject and rule.
func Sort(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Severity != b.Severity {
			return a.Severity > b.Severity
		}
		if a.Subject != b.Subject {
			return a.Subject < b.Subject
		}
		return a.Rule < b.Rule
	})
}

// Worst is the highest severity among fs, and false if fs is empty.
func Worst(fs []Finding) (Severity, bool) {
	if len(fs) == 0 {
		return Info, false
	}
	w := Info
	for _, f := range fs {
		if f.Severity > w {
			w = f.Severity
		}
	}
	return w, true
}
