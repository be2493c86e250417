package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/rekeyio/rekey/rewrite"
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
//
// A dead letter keeps what it holds exactly: JSON text is UTF-8, and
// encoding/json writes a byte that is not valid UTF-8 as U+FFFD, so a
// dead letter holding such bytes as text would hold other bytes than the
// input had, and a redrive would write them (under a key the record never
// had). Input that is not valid UTF-8 is kept in RawBase64 instead of Raw,
// a record holding such text in RecordBase64 instead of Record; a redrive
// reads the bytes back and refuses them again.
type DeadLetter struct {
	Stage  string          `json:"stage"`
	Reason string          `json:"reason"`
	Source string          `json:"source,omitempty"` // where it came from: file:line, table, kind
	Record json.RawMessage `json:"record,omitempty"` // the record in the JSON Lines record format
	// RecordBase64 is, instead of Record, a record holding text that is
	// not valid UTF-8 (which the record format cannot hold): the record
	// in rekey's batch encoding (EncodeBatch of the one record), base64.
	RecordBase64 []byte `json:"record_base64,omitempty"`
	Raw          string `json:"raw,omitempty"` // input that could not be parsed into a record, if valid UTF-8
	// RawBase64 is, instead of Raw, input that is not valid UTF-8: its
	// bytes exactly, base64 (standard, padded).
	RawBase64 []byte `json:"raw_base64,omitempty"`
}

// NewDeadLetter returns the JSON line for a record refused at stage.
func NewDeadLetter(stage, source string, rec *Record, err error) string {
	d := DeadLetter{Stage: stage, Reason: err.Error(), Source: source}
	switch {
	case rec == nil:
	case ValidUTF8(rec):
		d.Record = AppendJSON(nil, rec, true)
	default:
		d.RecordBase64 = EncodeBatch([]Record{*rec})
	}
	return d.Line()
}

// RawDeadLetter returns the JSON line for input that could not be read;
// raw's bytes are kept exactly (SetRaw).
func RawDeadLetter(stage, source, raw string, err error) string {
	d := DeadLetter{Stage: stage, Reason: err.Error(), Source: source}
	d.SetRaw([]byte(raw))
	return d.Line()
}

// SetRaw sets the dead letter's input: Raw if it is valid UTF-8, else
// RawBase64.
func (d *DeadLetter) SetRaw(raw []byte) {
	d.Raw, d.RawBase64 = "", nil
	if utf8.Valid(raw) {
		d.Raw = string(raw)
	} else {
		d.RawBase64 = append([]byte(nil), raw...)
	}
}

// RawBytes returns the dead letter's input, Raw or RawBase64 (nil if it
// holds none).
func (d DeadLetter) RawBytes() []byte {
	if d.RawBase64 != nil {
		return d.RawBase64
	}
	if d.Raw == "" {
		return nil
	}
	return []byte(d.Raw)
}

// Line encodes the dead letter as one JSON line (no newline).
func (d DeadLetter) Line() string {
	b, err := json.Marshal(d)
	if err != nil {
		// Record is produced by AppendJSON and always valid; this cannot
		// happen, but a dead letter must never be lost.
		lost := DeadLetter{Stage: d.Stage, Reason: d.Reason + fmt.Sprintf(" (record not encodable: %v)", err), Source: d.Source, RecordBase64: d.RecordBase64}
		lost.SetRaw(d.Record)
		b, _ = json.Marshal(lost)
	}
	return string(b)
}

// ErrNotDeadLetter is the error of ParseDeadLetter for a line that is not
// a dead letter at all.
var ErrNotDeadLetter = errors.New("not a dead letter")

// ParseDeadLetter reads one dead-letter line, and its record if it has one
// (Record or RecordBase64). A line that is not a dead letter is refused
// with ErrNotDeadLetter; a dead letter whose record cannot be read, or is
// not valid UTF-8, with another error, and d is the dead letter.
func ParseDeadLetter(line []byte) (DeadLetter, *Record, error) {
	var d DeadLetter
	if err := json.Unmarshal(line, &d); err != nil {
		return d, nil, fmt.Errorf("%w: %v", ErrNotDeadLetter, err)
	}
	if d.RecordBase64 != nil {
		recs, err := DecodeBatch(d.RecordBase64)
		switch {
		case err != nil:
			return d, nil, fmt.Errorf("dead letter record_base64: %w", err)
		case len(recs) != 1:
			return d, nil, fmt.Errorf("dead letter record_base64: %d records, want 1", len(recs))
		case !ValidUTF8(&recs[0]):
			return d, nil, errors.New("dead letter record: text is not valid UTF-8")
		}
		return d, &recs[0], nil
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

// ValidUTF8 reports whether all of r's text is valid UTF-8: its table,
// key, field names and string, NUMERIC and JSON values, nested ones
// too. Only then can the record format (AppendJSON) hold r exactly.
func ValidUTF8(r *Record) bool {
	return utf8.ValidString(r.Table) && validKey(r.Key) && validFields(r.Fields)
}

func validKey(k *rewrite.DatastoreKey) bool {
	if k == nil {
		return true
	}
	if !utf8.ValidString(k.Database) || !utf8.ValidString(k.Namespace) {
		return false
	}
	for _, e := range k.Path {
		if !utf8.ValidString(e.Kind) || !utf8.ValidString(e.Name) {
			return false
		}
	}
	return true
}

func validFields(fs []Field) bool {
	for i := range fs {
		if !utf8.ValidString(fs[i].Name) || !validValue(fs[i].Value) {
			return false
		}
	}
	return true
}

func validValue(v Value) bool {
	switch v.Kind {
	case KindString, KindNumeric, KindJSON:
		return utf8.ValidString(v.Str)
	case KindKey:
		return validKey(v.Key)
	case KindArray:
		for _, e := range v.Array {
			if !validValue(e) {
				return false
			}
		}
	case KindEntity:
		return validFields(v.Entity)
	}
	return true
}
