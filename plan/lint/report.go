// Package lint checks a schema before any data moves: Spanner DDL (a
// file, or a database's, read with GetDatabaseDdl) and a sample of a
// Datastore kind, against the rules of key design in package rules.
//
// The Spanner checks read only the schema, so they find what a schema
// shows: a first primary-key column that grows with time (a TIMESTAMP or
// DATE, a commit timestamp, or an INT64 or STRING named like a time or a
// sequence), a non-interleaved index led by such a column, timestamp key
// columns without DESC, a shard column whose count is far above the node
// count, more than MaxKeyColumns key columns, and keys longer than
// MaxKeyBytes. A column that Spanner fills spread over the key space is
// not monotonic whatever its name: a STORED MOD(FARM_FINGERPRINT(...), N)
// shard, DEFAULT (GENERATE_UUID()) (version 4), and sequences and
// identity columns (Spanner's only sequence kind is bit_reversed_positive).
// What the values are — whether an INT64 named Id is handed out by a
// counter — is for `rekey plan`, which samples them.
//
// The Datastore checks read a sample of entities, so they see the values:
// ids ≤ 0, '/' in kinds or names, names like Customer1, Customer2, …,
// ids that are a dense sequence, version 1 UUID names, and indexed
// properties that grow (timestamps, counted integers, or a time-like name
// with values in order), which cap a kind at about 500 writes/s.
//
// A Report holds the findings and a summary, written as text (WriteText)
// or as one JSON document (WriteJSON).
package lint

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/rekeyio/rekey/plan/rules"
)

// Report is the result of a lint run.
type Report struct {
	Findings []rules.Finding `json:"findings"`
	Summary  Summary         `json:"summary"`
}

// Summary says what was linted and what was found.
type Summary struct {
	// Inputs describe each schema or sample linted, e.g. "DDL file x.sql:
	// 3 tables, 2 indexes".
	Inputs []string `json:"inputs"`
	// Findings counts the findings by severity ("error", "warning",
	// "info"; every severity is present).
	Findings map[string]int `json:"findings"`
	// Worst is the highest severity found, "" if none.
	Worst string `json:"worst,omitempty"`
	// FailOn is the --fail-on severity, "" if not given, and Failed
	// whether a finding is at or above it.
	FailOn string `json:"fail_on,omitempty"`
	Failed bool   `json:"failed"`
}

// NewReport sorts the findings and summarises them; failOn is the
// severity at or above which the run fails, nil for none.
func NewReport(inputs []string, findings []rules.Finding, failOn *rules.Severity) Report {
	fs := append([]rules.Finding{}, findings...)
	rules.Sort(fs)
	s := Summary{Inputs: append([]string{}, inputs...), Findings: map[string]int{}}
	for _, sev := range []rules.Severity{rules.Error, rules.Warning, rules.Info} {
		s.Findings[sev.String()] = 0
	}
	for _, f := range fs {
		s.Findings[f.Severity.String()]++
	}
	if w, ok := rules.Worst(fs); ok {
		s.Worst = w.String()
		s.Failed = failOn != nil && w >= *failOn
	}
	if failOn != nil {
		s.FailOn = failOn.String()
	}
	return Report{Findings: fs, Summary: s}
}

// WriteJSON writes the report as one indented JSON document.
func WriteJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// WriteText writes the report for a person: each finding as a block
// headed by its severity, subject and rule, then a summary line per input
// and the counts.
func WriteText(w io.Writer, r Report) error {
	var b strings.Builder
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "%-7s %s  [%s]\n", f.Severity, f.Subject, f.Rule)
		field(&b, "evidence", f.Evidence)
		field(&b, "rule", f.Text)
		fix := f.Fix
		if len(f.Strategies) > 0 {
			fix += " (rekey strategies: " + strings.Join(f.Strategies, ", ") + ")"
		}
		field(&b, "fix", fix)
		field(&b, "source", f.Source)
		b.WriteByte('\n')
	}
	for _, in := range r.Summary.Inputs {
		fmt.Fprintf(&b, "linted %s\n", in)
	}
	b.WriteString(countLine(r.Summary))
	if r.Summary.FailOn != "" {
		verdict := "passes"
		if r.Summary.Failed {
			verdict = "fails"
		}
		fmt.Fprintf(&b, "; %s --fail-on %s", verdict, r.Summary.FailOn)
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

func field(b *strings.Builder, name, text string) {
	fmt.Fprintf(b, "  %-9s %s\n", name+":", text)
}

func countLine(s Summary) string {
	total := s.Findings["error"] + s.Findings["warning"] + s.Findings["info"]
	if total == 0 {
		return "no findings"
	}
	noun := "findings"
	if total == 1 {
		noun = "finding"
	}
	return fmt.Sprintf("%d %s: %d error, %d warning, %d info", total, noun,
		s.Findings["error"], s.Findings["warning"], s.Findings["info"])
}
