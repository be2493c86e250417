// Package record is the neutral form of a row or entity on its way through
// a migration: a Spanner row (table and columns, the key columns among
// them) or a Datastore entity (key and properties). Sources produce records,
// the rewrite stage changes their keys, sinks write them. Records travel
// between pipeline stages in batches (Batch), encoded with EncodeBatch
// only where the runner materializes them.
package record

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rekeyio/rekey/rewrite"
)

// Kind is the type of a Value.
type Kind uint8

// Value kinds. Spanner columns use Null..JSON and Array; Datastore
// properties use Null..Bytes, Timestamp, Key, GeoPoint, Array and Entity.
const (
	KindNull Kind = iota
	KindInt
	KindFloat
	KindString
	KindBool
	KindBytes
	KindTimestamp
	KindDate    // Int holds days since 1970-01-01
	KindNumeric // Str holds the canonical decimal text
	KindJSON    // Str holds the JSON text
	KindKey     // Key holds a Datastore key
	KindGeoPoint
	KindArray
	KindEntity // Entity holds embedded properties
)

var kindNames = [...]string{"null", "int", "float", "string", "bool", "bytes", "timestamp", "date", "numeric", "json", "key", "geopoint", "array", "entity"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is one column or property value.
type Value struct {
	Kind   Kind
	Int    int64 // Int, Bool (0/1), Date
	Float  float64
	Str    string // String, Numeric, JSON
	Bytes  []byte
	Time   time.Time // Timestamp (UTC)
	Key    *rewrite.DatastoreKey
	Lat    float64 // GeoPoint
	Lng    float64
	Array  []Value
	Entity []Field
}

// Field is a named value: a Spanner column or a Datastore property.
type Field struct {
	Name  string
	Value Value
	// NoIndex marks a Datastore property excluded from indexes.
	NoIndex bool
}

// The stores a record is shaped for: a Spanner row (Table, Fields) or a
// Datastore entity (Key, Fields). Every package that names a store uses
// these.
const (
	Spanner   = "spanner"
	Datastore = "datastore"
)

// Record is one row or entity.
type Record struct {
	// Table is the Spanner table, or the Datastore kind of the entity.
	Table string
	// Key is the Datastore key; nil for a Spanner row, whose key is the
	// values of its key columns among Fields.
	Key *rewrite.DatastoreKey
	// Fields are the row's columns (key columns included) or the entity's
	// properties.
	Fields []Field
}

// Constructors.
func Int(v int64) Value      { return Value{Kind: KindInt, Int: v} }
func Float(v float64) Value  { return Value{Kind: KindFloat, Float: v} }
func String(s string) Value  { return Value{Kind: KindString, Str: s} }
func Bytes(b []byte) Value   { return Value{Kind: KindBytes, Bytes: b} }
func Time(t time.Time) Value { return Value{Kind: KindTimestamp, Time: t.UTC()} }
func Key(k rewrite.DatastoreKey) Value {
	return Value{Kind: KindKey, Key: &k}
}
func Bool(b bool) Value {
	if b {
		return Value{Kind: KindBool, Int: 1}
	}
	return Value{Kind: KindBool}
}

// Get returns the field named name (case-insensitive, as Spanner columns
// are) and whether it exists.
func (r *Record) Get(name string) (Value, bool) {
	if i := r.Index(name); i >= 0 {
		return r.Fields[i].Value, true
	}
	return Value{}, false
}

// Index returns the position of the named field, or -1.
func (r *Record) Index(name string) int {
	for i := range r.Fields {
		if r.Fields[i].Name == name {
			return i
		}
	}
	for i := range r.Fields {
		if strings.EqualFold(r.Fields[i].Name, name) {
			return i
		}
	}
	return -1
}

// Set sets the named field, adding it at the end if it is new.
func (r *Record) Set(name string, v Value) {
	if i := r.Index(name); i >= 0 {
		r.Fields[i].Value = v
		return
	}
	r.Fields = append(r.Fields, Field{Name: name, Value: v})
}

// Describe names the record for messages: its Datastore key or its table
// and first fields.
func (r *Record) Describe() string {
	if r.Key != nil {
		return r.Key.String()
	}
	var b strings.Builder
	b.WriteString(r.Table)
	b.WriteByte('(')
	for i, f := range r.Fields {
		if i == 3 {
			b.WriteString(", ...")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		s := f.Value.String()
		if len(s) > 40 {
			s = s[:37] + "..."
		}
		b.WriteString(f.Name + "=" + s)
	}
	b.WriteByte(')')
	return b.String()
}

// String renders a value for messages.
func (v Value) String() string {
	switch v.Kind {
	case KindNull:
		return "NULL"
	case KindInt:
		return strconv.FormatInt(v.Int, 10)
	case KindFloat:
		return strconv.FormatFloat(v.Float, 'g', -1, 64)
	case KindString, KindNumeric, KindJSON:
		return strconv.Quote(v.Str)
	case KindBool:
		return strconv.FormatBool(v.Int != 0)
	case KindBytes:
		return fmt.Sprintf("b%q", v.Bytes)
	case KindTimestamp:
		return v.Time.Format(time.RFC3339Nano)
	case KindDate:
		return rewrite.DateString(v.Int)
	case KindKey:
		if v.Key == nil {
			return "KEY(nil)"
		}
		return "KEY(" + v.Key.String() + ")"
	case KindGeoPoint:
		return fmt.Sprintf("GEO(%g,%g)", v.Lat, v.Lng)
	case KindArray:
		parts := make([]string, len(v.Array))
		for i, e := range v.Array {
			parts[i] = e.String()
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case KindEntity:
		parts := make([]string, len(v.Entity))
		for i, f := range v.Entity {
			parts[i] = f.Name + ": " + f.Value.String()
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return "?"
}

// Equal reports whether two values are identical (floats bit for bit, so
// NaN equals NaN and -0 differs from +0).
func (v Value) Equal(w Value) bool {
	if v.Kind != w.Kind {
		return false
	}
	switch v.Kind {
	case KindNull:
		return true
	case KindInt, KindBool, KindDate:
		return v.Int == w.Int
	case KindFloat:
		return math.Float64bits(v.Float) == math.Float64bits(w.Float)
	case KindString, KindNumeric, KindJSON:
		return v.Str == w.Str
	case KindBytes:
		return string(v.Bytes) == string(w.Bytes)
	case KindTimestamp:
		return v.Time.Equal(w.Time)
	case KindKey:
		return (v.Key == nil) == (w.Key == nil) && (v.Key == nil || v.Key.Equal(*w.Key))
	case KindGeoPoint:
		return v.Lat == w.Lat && v.Lng == w.Lng
	case KindArray:
		if len(v.Array) != len(w.Array) {
			return false
		}
		for i := range v.Array {
			if !v.Array[i].Equal(w.Array[i]) {
				return false
			}
		}
		return true
	case KindEntity:
		return fieldsEqual(v.Entity, w.Entity)
	}
	return false
}

func fieldsEqual(a, b []Field) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].NoIndex != b[i].NoIndex || !a[i].Value.Equal(b[i].Value) {
			return false
		}
	}
	return true
}

// Equal reports whether two records are identical, fields in order.
func (r *Record) Equal(o *Record) bool {
	if r.Table != o.Table || (r.Key == nil) != (o.Key == nil) {
		return false
	}
	if r.Key != nil && !r.Key.Equal(*o.Key) {
		return false
	}
	return fieldsEqual(r.Fields, o.Fields)
}

// KeyValue converts a record value to a rewrite key value of type t,
// converting where the source's JSON could not know the type: a string to
// TIMESTAMP (RFC 3339), DATE, BYTES (base64) or NUMERIC, an integer to
// FLOAT64 or NUMERIC.
func KeyValue(v Value, t rewrite.Type) (rewrite.Value, error) {
	cv, err := Coerce(v, t)
	if err != nil {
		return rewrite.Value{}, err
	}
	switch cv.Kind {
	case KindNull:
		return rewrite.Null(t), nil
	case KindInt:
		return rewrite.Int64(cv.Int), nil
	case KindFloat:
		return rewrite.Float64(cv.Float), nil
	case KindString:
		return rewrite.String(cv.Str), nil
	case KindBool:
		return rewrite.Bool(cv.Int != 0), nil
	case KindBytes:
		return rewrite.Bytes(cv.Bytes), nil
	case KindTimestamp:
		return rewrite.Timestamp(cv.Time), nil
	case KindDate:
		return rewrite.Value{Type: rewrite.TypeDate, Int: cv.Int}, nil
	case KindNumeric:
		return rewrite.Value{Type: rewrite.TypeNumeric, Str: cv.Str}, nil
	}
	return rewrite.Value{}, fmt.Errorf("a %s value cannot be a %s key column", cv.Kind, t)
}

// FromKeyValue converts a rewrite key value back to a record value.
func FromKeyValue(v rewrite.Value) Value {
	if v.Null {
		return Value{}
	}
	switch v.Type {
	case rewrite.TypeInt64:
		return Int(v.Int)
	case rewrite.TypeFloat64:
		return Float(v.Float)
	case rewrite.TypeString:
		return String(v.Str)
	case rewrite.TypeBool:
		return Bool(v.Int != 0)
	case rewrite.TypeBytes:
		return Bytes(v.Bytes)
	case rewrite.TypeTimestamp:
		return Time(v.Time)
	case rewrite.TypeDate:
		return Value{Kind: KindDate, Int: v.Int}
	case rewrite.TypeNumeric:
		return Value{Kind: KindNumeric, Str: v.Str}
	}
	return Value{}
}

// Coerce converts v to the kind a Spanner column of type t holds. It
// accepts the value's own kind, and the conversions a typeless source
// (JSON, CSV) needs: strings to TIMESTAMP (RFC 3339 with any zone, stored
// in UTC), DATE (YYYY-MM-DD), BYTES (standard base64), NUMERIC, INT64,
// FLOAT64 and BOOL; integers to FLOAT64 and NUMERIC; integral floats to
// INT64. Anything else is an error naming both types.
func Coerce(v Value, t rewrite.Type) (Value, error) {
	if v.Kind == KindNull {
		return v, nil
	}
	bad := func() (Value, error) {
		return Value{}, fmt.Errorf("cannot convert %s %s to %s", v.Kind, v.String(), t)
	}
	switch t {
	case rewrite.TypeInt64:
		switch v.Kind {
		case KindInt:
			return v, nil
		case KindFloat:
			if v.Float == math.Trunc(v.Float) && math.Abs(v.Float) < 1<<53 {
				return Int(int64(v.Float)), nil
			}
		case KindString:
			if n, err := strconv.ParseInt(v.Str, 10, 64); err == nil {
				return Int(n), nil
			}
		}
	case rewrite.TypeFloat64:
		switch v.Kind {
		case KindFloat:
			return v, nil
		case KindInt:
			return Float(float64(v.Int)), nil
		case KindString:
			switch v.Str {
			case "NaN":
				return Float(math.NaN()), nil
			case "Infinity":
				return Float(math.Inf(1)), nil
			case "-Infinity":
				return Float(math.Inf(-1)), nil
			}
			if f, err := strconv.ParseFloat(v.Str, 64); err == nil {
				return Float(f), nil
			}
		}
	case rewrite.TypeString:
		if v.Kind == KindString {
			return v, nil
		}
	case rewrite.TypeBool:
		switch v.Kind {
		case KindBool:
			return v, nil
		case KindString:
			if b, err := strconv.ParseBool(v.Str); err == nil {
				return Bool(b), nil
			}
		}
	case rewrite.TypeBytes:
		switch v.Kind {
		case KindBytes:
			return v, nil
		case KindString:
			if b, err := decodeBase64(v.Str); err == nil {
				return Bytes(b), nil
			}
		}
	case rewrite.TypeTimestamp:
		switch v.Kind {
		case KindTimestamp:
			return v, nil
		case KindString:
			if ts, err := time.Parse(time.RFC3339Nano, v.Str); err == nil {
				return Time(ts), nil
			}
		}
	case rewrite.TypeDate:
		switch v.Kind {
		case KindDate:
			return v, nil
		case KindString:
			if d, err := rewrite.ParseDate(v.Str); err == nil {
				return Value{Kind: KindDate, Int: d.Int}, nil
			}
		}
	case rewrite.TypeNumeric:
		var s string
		switch v.Kind {
		case KindNumeric:
			return v, nil
		case KindString:
			s = v.Str
		case KindInt:
			s = strconv.FormatInt(v.Int, 10)
		case KindFloat:
			s = strconv.FormatFloat(v.Float, 'f', -1, 64)
		default:
			return bad()
		}
		n, err := rewrite.Numeric(s)
		if err != nil {
			return Value{}, err
		}
		return Value{Kind: KindNumeric, Str: n.Str}, nil
	}
	return bad()
}
