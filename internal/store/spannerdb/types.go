package spannerdb

import (
	"fmt"
	"strconv"
	"strings"
)

// The scalar Spanner (GoogleSQL) types rekey reads and writes.
const (
	TypeInt64     = "INT64"
	TypeFloat64   = "FLOAT64"
	TypeFloat32   = "FLOAT32"
	TypeString    = "STRING"
	TypeBool      = "BOOL"
	TypeBytes     = "BYTES"
	TypeTimestamp = "TIMESTAMP"
	TypeDate      = "DATE"
	TypeNumeric   = "NUMERIC"
	TypeJSON      = "JSON"
)

var supportedTypes = map[string]bool{
	TypeInt64: true, TypeFloat64: true, TypeFloat32: true, TypeString: true, TypeBool: true,
	TypeBytes: true, TypeTimestamp: true, TypeDate: true, TypeNumeric: true, TypeJSON: true,
}

// ColumnType is a parsed Spanner column type such as STRING(36) or
// ARRAY<BYTES(MAX)>.
type ColumnType struct {
	// Base is the scalar type (of the elements, for an array), e.g. STRING.
	Base string
	// Array marks ARRAY<Base>.
	Array bool
	// MaxLen is N of STRING(N) (characters) or BYTES(N) (bytes); 0 is MAX.
	MaxLen int
}

// ParseColumnType parses a column type as INFORMATION_SCHEMA.COLUMNS
// (SPANNER_TYPE) or DDL writes it, case-insensitively. Types rekey cannot
// convert (STRUCT, PROTO, ENUM, UUID, TOKENLIST, INTERVAL, ...) are errors.
func ParseColumnType(s string) (ColumnType, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	var ct ColumnType
	if strings.HasPrefix(u, "ARRAY<") {
		end, depth := -1, 0
		for i := len("ARRAY"); i < len(u) && end < 0; i++ {
			switch u[i] {
			case '<':
				depth++
			case '>':
				if depth--; depth == 0 {
					end = i
				}
			}
		}
		if end < 0 {
			return ct, fmt.Errorf("Spanner type %q: unterminated ARRAY<", s)
		}
		// ARRAY<FLOAT32>(vector_length=>N) and the like: options after the
		// closing '>' do not change the values.
		ct.Array = true
		u = strings.TrimSpace(u[len("ARRAY<"):end])
	}
	base := u
	if open := strings.IndexByte(u, '('); open >= 0 {
		if !strings.HasSuffix(u, ")") {
			return ct, fmt.Errorf("Spanner type %q: bad length", s)
		}
		base = strings.TrimSpace(u[:open])
		n := strings.TrimSpace(u[open+1 : len(u)-1])
		if base != TypeString && base != TypeBytes {
			return ct, fmt.Errorf("Spanner type %q: only STRING and BYTES take a length", s)
		}
		if n != "MAX" {
			v, err := strconv.Atoi(n)
			if err != nil || v < 1 {
				return ct, fmt.Errorf("Spanner type %q: bad length %q", s, n)
			}
			ct.MaxLen = v
		}
	}
	if !supportedTypes[base] {
		return ct, fmt.Errorf("Spanner type %q is not supported (rekey converts INT64, FLOAT64, FLOAT32, STRING, BOOL, BYTES, TIMESTAMP, DATE, NUMERIC, JSON and ARRAYs of them)", s)
	}
	ct.Base = base
	return ct, nil
}

// String renders the type as DDL: STRING(MAX), ARRAY<INT64>.
func (ct ColumnType) String() string {
	s := ct.Base
	if ct.Base == TypeString || ct.Base == TypeBytes {
		if ct.MaxLen > 0 {
			s += "(" + strconv.Itoa(ct.MaxLen) + ")"
		} else {
			s += "(MAX)"
		}
	}
	if ct.Array {
		return "ARRAY<" + s + ">"
	}
	return s
}
