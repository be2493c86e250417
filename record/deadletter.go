package record

import (
	"encoding/json"
	"fmt"
)

// Stages a record can be dead-lettered at.
const (
	StageRead    = "read"
	StageRewrite = "rewrite"
	StageWrite   = "write"
	// StageCohort: a cohort backfill could not tell the record's user
	// (no user id, or one of a kind that has none).
	StageCohort = "cohort"
)

// DeadLetter is one record rekey could not migrate, with why. Dead letters
// are written as JSON Lines, one DeadLetter a line; `rekey redrive` reads the
// same format back.
type DeadLetter struct {
	Stage  string          `json:"stage"`
	Reason string          `json:"reason"`
	Source string          `json:"source,omitempty"` // where it came from: file:line, table, kind
	Record json.RawMessage `json:"record,omitempty"` // the record in the JSON Lines record format
	Raw    string          `json:"raw,omitempty"`    // input that could not be parsed into a record
}

// NewDeadLetter returns the JSON line for a record refused at stage.
func NewDeadLetter(stage, source string, rec *Record, err error) string {
	d := DeadLetter{Stage: stage, Reason: err.Error(), Source: source}
	if rec != nil {
		d.Record = AppendJSON(nil, rec, true)
	}
	return d.Line()
}

// RawDeadLetter returns the JSON line for input that could not be read.
func RawDeadLetter(stage, source, raw string, err error) string {
	return DeadLetter{Stage: stage, Reason: err.Error(), Source: source, Raw: raw}.Line()
}

// Line encodes the dead letter as one JSON line (no newline).
func (d DeadLetter) Line() string {
	b, err := json.Marshal(d)
	if err != nil {
		// Record is produced by AppendJSON and always valid; this cannot
		// happen, but a dead letter must never be lost.
		b, _ = json.Marshal(DeadLetter{Stage: d.Stage, Reason: d.Reason + fmt.Sprintf(" (record not encodable: %v)", err), Source: d.Source, Raw: string(d.Record)})
	}
	return string(b)
}

// ParseDeadLetter reads one dead-letter line, and its record if it has one.
func ParseDeadLetter(line []byte) (DeadLetter, *Record, error) {
	var d DeadLetter
	if err := json.Unmarshal(line, &d); err != nil {
		return d, nil, fmt.Errorf("not a dead letter: %w", err)
	}
	if len(d.Record) == 0 {
		return d, nil, nil
	}
	r, err := ParseJSON(d.Record)
	if err != nil {
		return d, nil, fmt.Errorf("dead letter record: %w", err)
	}
	return d, &r, nil
}
