// Package rewrite is rekey's key model and its library of key-rewrite
// strategies. It is pure: it imports no Beam and no cloud client, so the
// migration pipeline, the planner and the application-side cutover library
// all compute exactly the same new keys.
//
// Two key shapes are modelled:
//
//   - a Spanner primary key: a KeySchema (table, ordered typed columns, each
//     ASC or DESC) and a []Value holding one value per column;
//   - a Datastore key: DatastoreKey (database, namespace and a path of
//     kind + id-or-name elements, ancestors first).
//
// Strategies (see Lookup and Strategies) turn an old key into a new one.
// Each documents its exact rule, whether it is deterministic and whether it
// can be inverted (verification and rollback need new→old).
package rewrite

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Type is a Spanner key column type.
type Type uint8

// The Spanner types a key column can have.
const (
	TypeInvalid Type = iota
	TypeInt64
	TypeString
	TypeBytes
	TypeTimestamp
	TypeDate
	TypeBool
	TypeFloat64
	TypeNumeric
)

var typeNames = [...]string{
	TypeInvalid:   "INVALID",
	TypeInt64:     "INT64",
	TypeString:    "STRING",
	TypeBytes:     "BYTES",
	TypeTimestamp: "TIMESTAMP",
	TypeDate:      "DATE",
	TypeBool:      "BOOL",
	TypeFloat64:   "FLOAT64",
	TypeNumeric:   "NUMERIC",
}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// ParseType parses a GoogleSQL type name such as "INT64" (case-insensitive).
func ParseType(s string) (Type, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	for i, n := range typeNames {
		if i != 0 && n == u {
			return Type(i), nil
		}
	}
	return TypeInvalid, fmt.Errorf("unknown Spanner type %q (want one of INT64, STRING, BYTES, TIMESTAMP, DATE, BOOL, FLOAT64, NUMERIC)", s)
}

// Value is one typed Spanner key value. The field used depends on Type:
//
//	INT64      Int
//	BOOL       Int (0 or 1)
//	DATE       Int (days since 1970-01-01)
//	FLOAT64    Float
//	STRING     Str
//	NUMERIC    Str (canonical decimal text, see Numeric)
//	BYTES      Bytes
//	TIMESTAMP  Time (UTC)
//
// Null marks a SQL NULL of the given type.
type Value struct {
	Type  Type
	Null  bool
	Int   int64
	Float float64
	Str   string
	Bytes []byte
	Time  time.Time
}

// Int64 returns an INT64 value.
func Int64(v int64) Value { return Value{Type: TypeInt64, Int: v} }

// String returns a STRING value.
func String(s string) Value { return Value{Type: TypeString, Str: s} }

// Bytes returns a BYTES value.
func Bytes(b []byte) Value { return Value{Type: TypeBytes, Bytes: b} }

// Bool returns a BOOL value.
func Bool(b bool) Value {
	v := Value{Type: TypeBool}
	if b {
		v.Int = 1
	}
	return v
}

// Float64 returns a FLOAT64 value.
func Float64(f float64) Value { return Value{Type: TypeFloat64, Float: f} }

// Timestamp returns a TIMESTAMP value (stored in UTC).
func Timestamp(t time.Time) Value { return Value{Type: TypeTimestamp, Time: t.UTC()} }

// Date returns a DATE value for the given calendar day.
func Date(year int, month time.Month, day int) Value {
	t := time.Date(year, month, day, 0, 0, 0, 0, time.UTC)
	return Value{Type: TypeDate, Int: floorDiv(t.Unix(), 86400)}
}

// Null returns a NULL of type t.
func Null(t Type) Value { return Value{Type: t, Null: true} }

// numericScale is Spanner's NUMERIC scale: 9 digits after the point.
const numericScale = 9

// maxNumeric is 10^38 (exclusive bound of NUMERIC's unscaled magnitude is
// 10^29 integer digits × 10^9).
var maxNumeric = new(big.Int).Exp(big.NewInt(10), big.NewInt(38), nil)

// Numeric parses a NUMERIC value (precision 38, scale 9) and stores it in
// canonical form: no exponent, no leading '+' or zeros, no trailing
// fractional zeros, "-0" written as "0".
func Numeric(s string) (Value, error) {
	u, err := parseNumeric(s)
	if err != nil {
		return Value{}, err
	}
	return Value{Type: TypeNumeric, Str: formatNumeric(u)}, nil
}

// parseNumeric returns the value scaled by 10^9 as an integer.
func parseNumeric(s string) (*big.Int, error) {
	r, ok := new(big.Rat).SetString(strings.TrimSpace(s))
	if !ok || strings.ContainsAny(s, "/") {
		return nil, fmt.Errorf("NUMERIC %q: not a decimal number", s)
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(numericScale), nil)))
	if !r.IsInt() {
		return nil, fmt.Errorf("NUMERIC %q: more than %d digits after the decimal point", s, numericScale)
	}
	u := new(big.Int).Set(r.Num())
	if new(big.Int).Abs(u).Cmp(maxNumeric) >= 0 {
		return nil, fmt.Errorf("NUMERIC %q: more than 29 digits before the decimal point", s)
	}
	return u, nil
}

func formatNumeric(u *big.Int) string {
	neg := u.Sign() < 0
	digits := new(big.Int).Abs(u).String()
	for len(digits) <= numericScale {
		digits = "0" + digits
	}
	ip, fp := digits[:len(digits)-numericScale], strings.TrimRight(digits[len(digits)-numericScale:], "0")
	out := ip
	if fp != "" {
		out += "." + fp
	}
	if neg {
		out = "-" + out
	}
	return out
}

// DateString renders a DATE value's day number as YYYY-MM-DD.
func DateString(days int64) string {
	return time.Unix(days*86400, 0).UTC().Format("2006-01-02")
}

// ParseDate parses YYYY-MM-DD into a DATE value.
func ParseDate(s string) (Value, error) {
	t, err := time.Parse("2006-01-02", s)
	if err != nil {
		return Value{}, fmt.Errorf("DATE %q: want YYYY-MM-DD", s)
	}
	return Date(t.Year(), t.Month(), t.Day()), nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// Equal reports whether a and b are the same typed value (NaN equals NaN,
// as in Spanner key comparison).
func (v Value) Equal(w Value) bool {
	if v.Type != w.Type || v.Null != w.Null {
		return false
	}
	if v.Null {
		return true
	}
	return compareValue(v, w) == 0
}

// String renders the value for messages and the CLI.
func (v Value) String() string {
	if v.Null {
		return "NULL"
	}
	switch v.Type {
	case TypeInt64:
		return strconv.FormatInt(v.Int, 10)
	case TypeBool:
		return strconv.FormatBool(v.Int != 0)
	case TypeDate:
		return DateString(v.Int)
	case TypeFloat64:
		return strconv.FormatFloat(v.Float, 'g', -1, 64)
	case TypeString, TypeNumeric:
		return v.Str
	case TypeBytes:
		return fmt.Sprintf("b%q", v.Bytes)
	case TypeTimestamp:
		return v.Time.Format(time.RFC3339Nano)
	}
	return "<invalid>"
}

// check reports a value whose fields contradict its type.
func (v *Value) check() error {
	if v.Type == TypeInvalid || int(v.Type) >= len(typeNames) {
		return fmt.Errorf("value has no valid type")
	}
	if v.Null {
		return nil
	}
	switch v.Type {
	case TypeBool:
		if v.Int != 0 && v.Int != 1 {
			return fmt.Errorf("BOOL value %d is not 0 or 1", v.Int)
		}
	case TypeString:
		if !utf8.ValidString(v.Str) {
			return fmt.Errorf("STRING value %q is not valid UTF-8", v.Str)
		}
	case TypeNumeric:
		if _, err := parseNumeric(v.Str); err != nil {
			return err
		}
	}
	return nil
}
