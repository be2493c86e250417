package rewrite

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits of the stores, from their published quotas. A key that breaks one
// is refused with a *KeyError naming the key and the rule.
const (
	// MaxSpannerKeyBytes is Spanner's maximum size of a primary key (8 KiB),
	// counted with Spanner's storage sizes per column type.
	MaxSpannerKeyBytes = 8 << 10
	// MaxDatastoreNameBytes bounds kinds, key names and property names.
	MaxDatastoreNameBytes = 1500
	// MaxDatastoreKeyBytes is Datastore's maximum size of a composite key.
	MaxDatastoreKeyBytes = 6 << 10
	// MaxDatastorePathDepth is the maximum number of elements in a key path
	// (the entity plus 99 ancestors... Datastore documents 100 ancestors;
	// rekey refuses more than 100 elements).
	MaxDatastorePathDepth = 100
	// MaxDatastoreNamespaceBytes bounds a namespace name.
	MaxDatastoreNamespaceBytes = 100
)

// ErrInvalidKey is the sentinel every *KeyError matches with errors.Is.
var ErrInvalidKey = errors.New("invalid key")

// KeyError says which key broke which rule.
type KeyError struct {
	Key  string // the key, rendered
	Rule string // what is wrong, e.g. `name contains "/"`
}

func (e *KeyError) Error() string { return fmt.Sprintf("key %s: %s", shortKey(e.Key), e.Rule) }

// maxKeyText bounds a key as an error shows it: a key too long to be one
// is shown by its start and its size, not echoed whole (a 4 MB name
// filled stderr twice over).
const maxKeyText = 256

func shortKey(k string) string {
	if len(k) <= maxKeyText {
		return k
	}
	cut := maxKeyText
	for cut > 0 && !utf8.RuneStart(k[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", k[:cut], len(k))
}

// Is makes errors.Is(err, ErrInvalidKey) true.
func (e *KeyError) Is(target error) bool { return target == ErrInvalidKey }

func reserved(s string) bool {
	return len(s) >= 4 && strings.HasPrefix(s, "__") && strings.HasSuffix(s, "__")
}

// ValidateDatastoreKey checks k against Datastore's rules: a non-empty path
// of at most 100 elements; kinds non-empty, valid UTF-8, without "/", not
// reserved (__x__) and at most 1500 bytes; ids > 0 (0 means "allocate one",
// negatives are refused); names valid UTF-8, without "/", not reserved and at
// most 1500 bytes; namespace of [0-9A-Za-z._-] at most 100 bytes; the whole
// key at most 6 KiB.
func ValidateDatastoreKey(k DatastoreKey) error {
	bad := func(format string, args ...any) error {
		return &KeyError{Key: k.String(), Rule: fmt.Sprintf(format, args...)}
	}
	if len(k.Path) == 0 {
		return bad("empty path")
	}
	if len(k.Path) > MaxDatastorePathDepth {
		return bad("path has %d elements, more than %d", len(k.Path), MaxDatastorePathDepth)
	}
	if len(k.Namespace) > MaxDatastoreNamespaceBytes {
		return bad("namespace is %d bytes, more than %d", len(k.Namespace), MaxDatastoreNamespaceBytes)
	}
	for _, r := range k.Namespace {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' || r == '_' || r == '-') {
			return bad("namespace %q has %q; allowed are [0-9A-Za-z._-]", k.Namespace, r)
		}
	}
	if reserved(k.Namespace) {
		return bad("namespace %q is reserved (__name__)", k.Namespace)
	}
	size := len(k.Namespace)
	for i, e := range k.Path {
		if err := validateElement(e); err != "" {
			return bad("path element %d (%s): %s", i+1, shortKey(e.String()), err)
		}
		size += len(e.Kind) + len(e.Name) + 8
	}
	if size > MaxDatastoreKeyBytes {
		return bad("key is about %d bytes, more than %d", size, MaxDatastoreKeyBytes)
	}
	return nil
}

func validateElement(e PathElement) string {
	switch {
	case e.Kind == "":
		return "empty kind"
	case !utf8.ValidString(e.Kind):
		return "kind is not valid UTF-8"
	case strings.Contains(e.Kind, "/"):
		return `kind contains "/"`
	case reserved(e.Kind):
		return "kind is reserved (__name__)"
	case len(e.Kind) > MaxDatastoreNameBytes:
		return fmt.Sprintf("kind is %d bytes, more than %d", len(e.Kind), MaxDatastoreNameBytes)
	case e.IsName() && e.ID != 0:
		return "has both an id and a name"
	case e.IsName():
		switch {
		case !utf8.ValidString(e.Name):
			return "name is not valid UTF-8"
		case strings.Contains(e.Name, "/"):
			return `name contains "/"`
		case reserved(e.Name):
			return "name is reserved (__name__)"
		case len(e.Name) > MaxDatastoreNameBytes:
			return fmt.Sprintf("name is %d bytes, more than %d", len(e.Name), MaxDatastoreNameBytes)
		}
	case e.ID == 0:
		return "id is 0 (incomplete key; ids must be > 0)"
	case e.ID < 0:
		return fmt.Sprintf("id %d is negative (ids must be > 0)", e.ID)
	}
	return ""
}

// ValidatePropertyName checks a Datastore property name: non-empty, valid
// UTF-8, no ".", not reserved, at most 1500 bytes.
func ValidatePropertyName(name string) error {
	bad := func(rule string) error { return fmt.Errorf("property %q: %s", name, rule) }
	switch {
	case name == "":
		return bad("empty name")
	case !utf8.ValidString(name):
		return bad("name is not valid UTF-8")
	case strings.Contains(name, "."):
		return bad(`name contains "."`)
	case reserved(name):
		return bad("name is reserved (__name__)")
	case len(name) > MaxDatastoreNameBytes:
		return bad(fmt.Sprintf("name is %d bytes, more than %d", len(name), MaxDatastoreNameBytes))
	}
	return nil
}

// SpannerKeySize returns the size Spanner counts for a key: 1 byte for BOOL,
// 4 for DATE, 8 for INT64 and FLOAT64, 12 for TIMESTAMP, 22 for NUMERIC, the
// byte length for STRING and BYTES, and 0 for NULL.
func SpannerKeySize(vals []Value) int {
	n := 0
	for i := range vals {
		v := &vals[i]
		if v.Null {
			continue
		}
		switch v.Type {
		case TypeBool:
			n++
		case TypeDate:
			n += 4
		case TypeInt64, TypeFloat64:
			n += 8
		case TypeTimestamp:
			n += 12
		case TypeNumeric:
			n += 22
		case TypeString:
			n += len(v.Str)
		case TypeBytes:
			n += len(v.Bytes)
		}
	}
	return n
}

// ValidateSpannerKey checks vals against schema s: one value per column, of
// the column's type; STRING valid UTF-8 and at most N characters for
// STRING(N); BYTES at most N bytes for BYTES(N); the whole key at most 8 KiB.
func ValidateSpannerKey(s KeySchema, vals []Value) error {
	bad := func(format string, args ...any) error {
		return &KeyError{Key: FormatSpannerKey(s, vals), Rule: fmt.Sprintf(format, args...)}
	}
	if len(vals) != len(s.Columns) {
		return bad("has %d values, table %s has %d key columns", len(vals), s.Table, len(s.Columns))
	}
	for i := range s.Columns {
		c, v := &s.Columns[i], &vals[i]
		if v.Type != c.Type {
			return bad("column %s is %s, got a %s value", c.Name, c.SQLType(), v.Type)
		}
		if err := v.check(); err != nil {
			return bad("column %s: %v", c.Name, err)
		}
		if v.Null || c.MaxLen == 0 {
			continue
		}
		switch c.Type {
		case TypeString:
			if n := utf8.RuneCountInString(v.Str); n > c.MaxLen {
				return bad("column %s is %s, value has %d characters", c.Name, c.SQLType(), n)
			}
		case TypeBytes:
			if len(v.Bytes) > c.MaxLen {
				return bad("column %s is %s, value has %d bytes", c.Name, c.SQLType(), len(v.Bytes))
			}
		}
	}
	if n := SpannerKeySize(vals); n > MaxSpannerKeyBytes {
		return bad("key is %d bytes, more than Spanner's %d", n, MaxSpannerKeyBytes)
	}
	return nil
}

// FormatSpannerKey renders a key for messages: Table(a, b).
func FormatSpannerKey(s KeySchema, vals []Value) string {
	var b strings.Builder
	b.WriteString(s.Table)
	b.WriteByte('(')
	for i, v := range vals {
		if i > 0 {
			b.WriteString(", ")
		}
		str := v.String()
		if len(str) > 64 {
			// Cut at a character boundary, not inside a UTF-8 sequence.
			cut := 61
			for cut > 0 && !utf8.RuneStart(str[cut]) {
				cut--
			}
			str = str[:cut] + "..."
		}
		if v.Type == TypeString && !v.Null {
			str = fmt.Sprintf("%q", str)
		}
		b.WriteString(str)
	}
	b.WriteByte(')')
	return b.String()
}
