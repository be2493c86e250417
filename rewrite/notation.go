package rewrite

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The JSON key notation used by `rekey rewrite`, golden files and dead-letter
// records:
//
//	42, "Customer1"             a one-column Spanner key (bare value)
//	[1700000000, "u1"]          a composite Spanner key, one value per column
//	{"path": ["Customer", "Customer1", "Order", 5],
//	 "namespace": "ns", "database": "db"}
//	                            a Datastore key: kind, then id (number) or
//	                            name (string), from the root ancestor down
//
// Spanner values by type: INT64 as a number (or a string of digits), STRING
// as a string, BYTES as base64, TIMESTAMP as RFC 3339, DATE as YYYY-MM-DD,
// BOOL as true/false, FLOAT64 as a number or "NaN", "Infinity",
// "-Infinity", NUMERIC as a string; null is NULL.

// ParsedKey is one key read from the notation: a Spanner key (Values, with
// Bare set for a bare one-column value) or a Datastore key (IsDatastore).
type ParsedKey struct {
	IsDatastore bool
	Datastore   DatastoreKey
	Values      []Value
	Bare        bool
}

// ParseKey parses one key in the JSON notation. With a schema, Spanner
// values are read as its column types; without one (nil), types are
// inferred: integral numbers are INT64, other numbers FLOAT64, strings
// STRING, booleans BOOL.
//
// The text must be exactly one JSON value: text after it is refused, as
// are bytes that are not valid UTF-8 (with the message the JSON Lines
// reader gives, not silently replaced by U+FFFD), integers beyond INT64
// (never read as a FLOAT64 approximation) and unquoted words, with a hint
// to quote them.
func ParseKey(text string, schema *KeySchema) (ParsedKey, error) {
	if col, inString := invalidUTF8(text); col > 0 {
		if inString {
			return ParsedKey{}, fmt.Errorf("column %d: string is not valid UTF-8", col)
		}
		return ParsedKey{}, fmt.Errorf("column %d: not valid UTF-8", col)
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return ParsedKey{}, fmt.Errorf("no key (an empty line)")
	}
	if unquoted(text) {
		return ParsedKey{}, fmt.Errorf("not a JSON value; a string key is written in double quotes: %s", quoteHint(text))
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return ParsedKey{}, fmt.Errorf("not JSON: %v", err)
	}
	if rest := strings.TrimSpace(text[dec.InputOffset():]); rest != "" {
		return ParsedKey{}, fmt.Errorf("unexpected text after the key: %s", shorten(rest, 40))
	}
	switch t := raw.(type) {
	case map[string]any:
		k, err := parseDatastoreJSON(t)
		return ParsedKey{IsDatastore: true, Datastore: k}, err
	case []any:
		vals, err := parseSpannerJSON(t, schema)
		return ParsedKey{Values: vals}, err
	default:
		vals, err := parseSpannerJSON([]any{t}, schema)
		return ParsedKey{Values: vals, Bare: true}, err
	}
}

// invalidUTF8 returns the column (1-based byte offset) of the first byte
// of text that is not valid UTF-8, 0 if there is none, and whether that
// byte lies inside a JSON string.
func invalidUTF8(text string) (col int, inString bool) {
	if utf8.ValidString(text) {
		return 0, false
	}
	escaped := false
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			switch {
			case escaped:
				escaped = false
			case inString && c == '\\':
				escaped = true
			case c == '"':
				inString = !inString
			}
			i++
			continue
		}
		escaped = false
		r, n := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && n == 1 {
			return i + 1, inString
		}
		i += n
	}
	return 0, false
}

// unquoted reports whether text looks like a string someone forgot to
// quote: not JSON, and not starting like a string, array, object or
// number (whose own errors say more).
func unquoted(text string) bool {
	return !strings.ContainsRune(`"[{-0123456789`, rune(text[0])) && !json.Valid([]byte(text))
}

// quoteHint is text as a JSON string, for the hint to quote it; single
// quotes around it are taken for an attempt at quoting.
func quoteHint(text string) string {
	if len(text) >= 2 && text[0] == '\'' && text[len(text)-1] == '\'' {
		text = text[1 : len(text)-1]
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(text)
	return strings.TrimSuffix(b.String(), "\n")
}

// shorten cuts s to at most n characters, marking the cut.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "..."
}

// parseInt64 reads an integer in decimal. ok is false when s is not an
// integer; an integer beyond INT64's range is an error naming it, so it
// is never read as an approximate FLOAT64.
func parseInt64(s string) (n int64, ok bool, err error) {
	n, err = strconv.ParseInt(s, 10, 64)
	switch {
	case err == nil:
		return n, true, nil
	case errors.Is(err, strconv.ErrRange):
		return 0, true, fmt.Errorf("integer %s overflows INT64 (%d to %d)", s, int64(math.MinInt64), int64(math.MaxInt64))
	}
	return 0, false, nil
}

// parseFloat64 reads a JSON number as FLOAT64; a number beyond its range
// is an error naming it.
func parseFloat64(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("number %s overflows FLOAT64", s)
	}
	return f, nil
}

func parseDatastoreJSON(m map[string]any) (DatastoreKey, error) {
	var k DatastoreKey
	for field, v := range m {
		switch field {
		case "namespace", "database":
			s, ok := v.(string)
			if !ok {
				return k, fmt.Errorf("%s must be a string", field)
			}
			if field == "namespace" {
				k.Namespace = s
			} else {
				k.Database = s
			}
		case "path":
		default:
			return k, fmt.Errorf("unknown field %q in a Datastore key (want path, namespace, database)", field)
		}
	}
	path, ok := m["path"].([]any)
	if !ok || len(path) == 0 || len(path)%2 != 0 {
		return k, fmt.Errorf(`a Datastore key needs "path": [kind, id or name, ...] with an even number of items`)
	}
	for i := 0; i < len(path); i += 2 {
		kind, ok := path[i].(string)
		if !ok {
			return k, fmt.Errorf("path item %d: kind must be a string, got %v", i+1, path[i])
		}
		e := PathElement{Kind: kind}
		switch v := path[i+1].(type) {
		case string:
			e.Name = v
		case json.Number:
			id, ok, err := parseInt64(v.String())
			if err != nil {
				return k, fmt.Errorf("path item %d: id: %w", i+2, err)
			}
			if !ok {
				return k, fmt.Errorf("path item %d: id %s is not an INT64", i+2, v)
			}
			e.ID = id
		default:
			return k, fmt.Errorf("path item %d: want an id (number) or a name (string), got %v", i+2, v)
		}
		k.Path = append(k.Path, e)
	}
	return k, nil
}

func parseSpannerJSON(items []any, schema *KeySchema) ([]Value, error) {
	if schema != nil && len(items) != len(schema.Columns) {
		return nil, fmt.Errorf("key has %d values, the key schema %s has %d columns", len(items), schema, len(schema.Columns))
	}
	vals := make([]Value, len(items))
	for i, it := range items {
		var err error
		if schema != nil {
			vals[i], err = valueFromJSON(it, schema.Columns[i].Type)
			if err != nil {
				err = fmt.Errorf("column %s: %w", schema.Columns[i].Name, err)
			}
		} else {
			vals[i], err = inferValue(it)
			if err != nil {
				err = fmt.Errorf("value %d: %w", i+1, err)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return vals, nil
}

func inferValue(it any) (Value, error) {
	switch v := it.(type) {
	case json.Number:
		if n, ok, err := parseInt64(v.String()); ok || err != nil {
			return Int64(n), err
		}
		f, err := parseFloat64(v.String())
		return Float64(f), err
	case string:
		return String(v), nil
	case bool:
		return Bool(v), nil
	case nil:
		return Value{}, fmt.Errorf("null needs a key schema (--key) to know its type")
	}
	return Value{}, fmt.Errorf("%s is not a key value (a key is one value, or one flat array of values)", jsonKind(it))
}

// jsonKind names the kind of a decoded JSON value that is not a scalar.
func jsonKind(it any) string {
	switch it.(type) {
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", it)
}

func valueFromJSON(it any, t Type) (Value, error) {
	if it == nil {
		return Null(t), nil
	}
	s, isStr := it.(string)
	num, isNum := it.(json.Number)
	switch t {
	case TypeInt64:
		txt := s
		if isNum {
			txt = num.String()
		}
		if isStr || isNum {
			if n, ok, err := parseInt64(txt); ok || err != nil {
				return Int64(n), err
			}
		}
	case TypeString:
		if isStr {
			return String(s), nil
		}
	case TypeBytes:
		if isStr {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return Value{}, fmt.Errorf("BYTES must be base64: %v", err)
			}
			return Bytes(b), nil
		}
	case TypeTimestamp:
		if isStr {
			ts, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return Value{}, fmt.Errorf("TIMESTAMP must be RFC 3339 (2024-01-31T12:00:00Z): %v", err)
			}
			return Timestamp(ts), nil
		}
	case TypeDate:
		if isStr {
			return ParseDate(s)
		}
	case TypeBool:
		if b, ok := it.(bool); ok {
			return Bool(b), nil
		}
	case TypeFloat64:
		if isNum {
			f, err := parseFloat64(num.String())
			return Float64(f), err
		}
		switch s {
		case "NaN":
			return Float64(math.NaN()), nil
		case "Infinity":
			return Float64(math.Inf(1)), nil
		case "-Infinity":
			return Float64(math.Inf(-1)), nil
		}
	case TypeNumeric:
		if isNum {
			s, isStr = num.String(), true
		}
		if isStr {
			return Numeric(s)
		}
	}
	return Value{}, fmt.Errorf("want a %s value, got %v", t, it)
}

// FormatKey renders a key in the JSON notation: a bare value when bare is
// set and the key has one value, a JSON array otherwise.
func FormatKey(vals []Value, bare bool) string {
	var b bytes.Buffer
	if bare && len(vals) == 1 {
		appendValueJSON(&b, vals[0])
		return b.String()
	}
	b.WriteByte('[')
	for i, v := range vals {
		if i > 0 {
			b.WriteByte(',')
		}
		appendValueJSON(&b, v)
	}
	b.WriteByte(']')
	return b.String()
}

func appendValueJSON(b *bytes.Buffer, v Value) {
	if v.Null {
		b.WriteString("null")
		return
	}
	switch v.Type {
	case TypeInt64:
		b.WriteString(strconv.FormatInt(v.Int, 10))
	case TypeBool:
		b.WriteString(strconv.FormatBool(v.Int != 0))
	case TypeFloat64:
		switch {
		case math.IsNaN(v.Float):
			b.WriteString(`"NaN"`)
		case math.IsInf(v.Float, 1):
			b.WriteString(`"Infinity"`)
		case math.IsInf(v.Float, -1):
			b.WriteString(`"-Infinity"`)
		default:
			b.WriteString(strconv.FormatFloat(v.Float, 'g', -1, 64))
		}
	case TypeBytes:
		writeJSONString(b, base64.StdEncoding.EncodeToString(v.Bytes))
	case TypeTimestamp:
		writeJSONString(b, v.Time.UTC().Format(time.RFC3339Nano))
	case TypeDate:
		writeJSONString(b, DateString(v.Int))
	default:
		writeJSONString(b, v.Str)
	}
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s)
	b.Write(enc)
}

// FormatDatastoreKey renders a Datastore key in the JSON notation.
func FormatDatastoreKey(k DatastoreKey) string {
	var b bytes.Buffer
	b.WriteString(`{"path":[`)
	for i, e := range k.Path {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSONString(&b, e.Kind)
		b.WriteByte(',')
		if e.IsName() {
			writeJSONString(&b, e.Name)
		} else {
			b.WriteString(strconv.FormatInt(e.ID, 10))
		}
	}
	b.WriteByte(']')
	if k.Namespace != "" {
		b.WriteString(`,"namespace":`)
		writeJSONString(&b, k.Namespace)
	}
	if k.Database != "" {
		b.WriteString(`,"database":`)
		writeJSONString(&b, k.Database)
	}
	b.WriteByte('}')
	return b.String()
}

// InferSchema returns the schema ParseKey infers for vals: columns named
// Key (one value) or K1, K2, … of the values' types.
func InferSchema(table string, vals []Value) KeySchema {
	s := KeySchema{Table: table}
	for i, v := range vals {
		name := "Key"
		if len(vals) > 1 {
			name = "K" + strconv.Itoa(i+1)
		}
		s.Columns = append(s.Columns, Column{Name: name, Type: v.Type})
	}
	return s
}
