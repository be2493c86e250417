package rewrite

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
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
func ParseKey(text string, schema *KeySchema) (ParsedKey, error) {
	text = strings.TrimSpace(text)
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return ParsedKey{}, fmt.Errorf("not JSON: %v", err)
	}
	if dec.More() {
		return ParsedKey{}, fmt.Errorf("unexpected text after the key")
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
			id, err := strconv.ParseInt(v.String(), 10, 64)
			if err != nil {
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
		if n, err := strconv.ParseInt(v.String(), 10, 64); err == nil {
			return Int64(n), nil
		}
		f, err := v.Float64()
		if err != nil {
			return Value{}, fmt.Errorf("number %s is out of range", v)
		}
		return Float64(f), nil
	case string:
		return String(v), nil
	case bool:
		return Bool(v), nil
	case nil:
		return Value{}, fmt.Errorf("null needs a key schema (--key) to know its type")
	}
	return Value{}, fmt.Errorf("nested %T is not a key value", it)
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
			if n, err := strconv.ParseInt(txt, 10, 64); err == nil {
				return Int64(n), nil
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
			f, err := num.Float64()
			if err == nil {
				return Float64(f), nil
			}
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
