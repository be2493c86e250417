package rewrite

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Column is one Spanner primary-key column.
type Column struct {
	Name string
	Type Type
	// Desc marks a DESC key column.
	Desc bool
	// MaxLen is N of STRING(N) (characters) or BYTES(N) (bytes); 0 means MAX.
	MaxLen int
}

// SQLType renders the column type as DDL, e.g. STRING(36) or BYTES(MAX).
func (c Column) SQLType() string {
	switch c.Type {
	case TypeString, TypeBytes:
		if c.MaxLen > 0 {
			return fmt.Sprintf("%s(%d)", c.Type, c.MaxLen)
		}
		return c.Type.String() + "(MAX)"
	}
	return c.Type.String()
}

// KeySchema is the primary key of a Spanner table.
type KeySchema struct {
	Table   string
	Columns []Column
}

// Index returns the position of the named column (case-insensitive, as
// Spanner identifiers are), or -1.
func (s KeySchema) Index(name string) int {
	for i, c := range s.Columns {
		if strings.EqualFold(c.Name, name) {
			return i
		}
	}
	return -1
}

// String renders the key as DDL: "PRIMARY KEY (A, B DESC)".
func (s KeySchema) String() string {
	var b strings.Builder
	b.WriteString("PRIMARY KEY (")
	for i, c := range s.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.Name)
		if c.Desc {
			b.WriteString(" DESC")
		}
	}
	b.WriteString(")")
	return b.String()
}

// Text renders the columns in the form ParseKeySchema reads:
// "LastAccess TIMESTAMP, UserId STRING(36) DESC".
func (s KeySchema) Text() string {
	var b strings.Builder
	for i, c := range s.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.Name)
		b.WriteString(" ")
		b.WriteString(c.SQLType())
		if c.Desc {
			b.WriteString(" DESC")
		}
	}
	return b.String()
}

// Clone returns a deep copy of s.
func (s KeySchema) Clone() KeySchema {
	return KeySchema{Table: s.Table, Columns: append([]Column(nil), s.Columns...)}
}

// ParseKeySchema parses a column list such as
// "LastAccess TIMESTAMP, UserId STRING(36) DESC" into a KeySchema.
func ParseKeySchema(table, spec string) (KeySchema, error) {
	s := KeySchema{Table: table}
	for i, part := range strings.Split(spec, ",") {
		f := strings.Fields(part)
		if len(f) < 2 || len(f) > 3 {
			return s, fmt.Errorf("key column %d %q: want \"Name TYPE [ASC|DESC]\"", i+1, strings.TrimSpace(part))
		}
		c := Column{Name: f[0]}
		t := f[1]
		if open := strings.IndexByte(t, '('); open >= 0 && strings.HasSuffix(t, ")") {
			n := t[open+1 : len(t)-1]
			t = t[:open]
			if !strings.EqualFold(n, "MAX") {
				v, err := strconv.Atoi(n)
				if err != nil || v < 1 {
					return s, fmt.Errorf("key column %q: bad length %q", c.Name, n)
				}
				c.MaxLen = v
			}
		}
		typ, err := ParseType(t)
		if err != nil {
			return s, fmt.Errorf("key column %q: %w", c.Name, err)
		}
		c.Type = typ
		if len(f) == 3 {
			switch strings.ToUpper(f[2]) {
			case "DESC":
				c.Desc = true
			case "ASC":
			default:
				return s, fmt.Errorf("key column %q: want ASC or DESC, got %q", c.Name, f[2])
			}
		}
		if s.Index(c.Name) >= 0 {
			return s, fmt.Errorf("key column %q appears twice", c.Name)
		}
		s.Columns = append(s.Columns, c)
	}
	return s, nil
}

// CompareSpanner compares two keys of schema s in Spanner's order: column by
// column, NULL first in an ASC column, each DESC column reversed.
func CompareSpanner(s KeySchema, a, b []Value) int {
	for i := range min(len(a), len(b)) {
		c := compareNullable(a[i], b[i])
		if i < len(s.Columns) && s.Columns[i].Desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return cmpInt(int64(len(a)), int64(len(b)))
}

func compareNullable(a, b Value) int {
	switch {
	case a.Null && b.Null:
		return 0
	case a.Null:
		return -1
	case b.Null:
		return 1
	}
	return compareValue(a, b)
}

// compareValue compares two non-null values of the same type.
func compareValue(a, b Value) int {
	switch a.Type {
	case TypeInt64, TypeBool, TypeDate:
		return cmpInt(a.Int, b.Int)
	case TypeString:
		return strings.Compare(a.Str, b.Str)
	case TypeBytes:
		return bytes.Compare(a.Bytes, b.Bytes)
	case TypeTimestamp:
		return a.Time.Compare(b.Time)
	case TypeFloat64:
		an, bn := math.IsNaN(a.Float), math.IsNaN(b.Float)
		switch {
		case an && bn:
			return 0
		case an:
			return -1
		case bn:
			return 1
		case a.Float < b.Float:
			return -1
		case a.Float > b.Float:
			return 1
		}
		return 0
	case TypeNumeric:
		x, errx := parseNumeric(a.Str)
		y, erry := parseNumeric(b.Str)
		if errx != nil || erry != nil {
			return strings.Compare(a.Str, b.Str)
		}
		return x.Cmp(y)
	}
	return 0
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// PathElement is one element of a Datastore key path. Exactly one of ID and
// Name identifies it; an element with neither is incomplete.
type PathElement struct {
	Kind string
	ID   int64
	Name string
}

// IsName reports whether the element is identified by a name.
func (e PathElement) IsName() bool { return e.Name != "" }

func (e PathElement) String() string {
	if e.IsName() {
		return fmt.Sprintf("%s:%q", e.Kind, e.Name)
	}
	return fmt.Sprintf("%s:%d", e.Kind, e.ID)
}

// DatastoreKey is a Datastore (Firestore in Datastore mode) key: database,
// namespace, and the path from the root ancestor to the entity itself.
type DatastoreKey struct {
	Database  string
	Namespace string
	Path      []PathElement
}

// Leaf returns the entity's own path element.
func (k DatastoreKey) Leaf() PathElement {
	if len(k.Path) == 0 {
		return PathElement{}
	}
	return k.Path[len(k.Path)-1]
}

// Clone returns a deep copy of k.
func (k DatastoreKey) Clone() DatastoreKey {
	k.Path = append([]PathElement(nil), k.Path...)
	return k
}

// Equal reports whether a and b are the same key.
func (k DatastoreKey) Equal(o DatastoreKey) bool { return CompareDatastore(k, o) == 0 }

func (k DatastoreKey) String() string {
	var b strings.Builder
	if k.Database != "" {
		fmt.Fprintf(&b, "db=%q,", k.Database)
	}
	if k.Namespace != "" {
		fmt.Fprintf(&b, "ns=%q,", k.Namespace)
	}
	for i, e := range k.Path {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(e.String())
	}
	return b.String()
}

// CompareDatastore compares keys in Datastore's order: database, then
// namespace, then path element by element; within an element the kind, then
// ids before names, ids numerically and names bytewise; an ancestor sorts
// before its descendants.
func CompareDatastore(a, b DatastoreKey) int {
	if c := strings.Compare(a.Database, b.Database); c != 0 {
		return c
	}
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	for i := range min(len(a.Path), len(b.Path)) {
		if c := ComparePathElement(a.Path[i], b.Path[i]); c != 0 {
			return c
		}
	}
	return cmpInt(int64(len(a.Path)), int64(len(b.Path)))
}

// ComparePathElement compares two path elements: kind, then ids (numerically)
// before names (bytewise).
func ComparePathElement(a, b PathElement) int {
	if c := strings.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	an, bn := a.IsName(), b.IsName()
	switch {
	case !an && !bn:
		return cmpInt(a.ID, b.ID)
	case !an:
		return -1
	case !bn:
		return 1
	}
	return strings.Compare(a.Name, b.Name)
}

// ParseDatastoreKeyText reads a key in the form String writes
// (db="d",ns="n",Kind:"name"/Child:42), as the cutover's repair log
// names keys. A kind is read up to its last ':' before the element's id
// or quoted name.
func ParseDatastoreKeyText(text string) (DatastoreKey, error) {
	var k DatastoreKey
	rest := text
	for _, p := range []struct {
		prefix string
		to     *string
	}{{"db=", &k.Database}, {"ns=", &k.Namespace}} {
		if !strings.HasPrefix(rest, p.prefix) {
			continue
		}
		q, err := strconv.QuotedPrefix(rest[len(p.prefix):])
		if err != nil {
			return DatastoreKey{}, fmt.Errorf("key %q: %s: %w", text, p.prefix, err)
		}
		if *p.to, err = strconv.Unquote(q); err != nil {
			return DatastoreKey{}, fmt.Errorf("key %q: %s: %w", text, p.prefix, err)
		}
		rest = rest[len(p.prefix)+len(q):]
		if !strings.HasPrefix(rest, ",") {
			return DatastoreKey{}, fmt.Errorf("key %q: want ',' after %s%s", text, p.prefix, q)
		}
		rest = rest[1:]
	}
	for rest != "" {
		// The kind ends at the ':' that starts a quoted name or an id.
		i := -1
		for j := 0; j < len(rest)-1; j++ {
			if rest[j] == ':' && (rest[j+1] == '"' || rest[j+1] == '-' || rest[j+1] >= '0' && rest[j+1] <= '9') {
				i = j
				break
			}
		}
		if i <= 0 {
			return DatastoreKey{}, fmt.Errorf("key %q: want Kind:\"name\" or Kind:id at %q", text, rest)
		}
		e := PathElement{Kind: rest[:i]}
		rest = rest[i+1:]
		if rest[0] == '"' {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return DatastoreKey{}, fmt.Errorf("key %q: the name of %s: %w", text, e.Kind, err)
			}
			if e.Name, err = strconv.Unquote(q); err != nil {
				return DatastoreKey{}, fmt.Errorf("key %q: the name of %s: %w", text, e.Kind, err)
			}
			rest = rest[len(q):]
		} else {
			n := strings.IndexByte(rest, '/')
			if n < 0 {
				n = len(rest)
			}
			id, err := strconv.ParseInt(rest[:n], 10, 64)
			if err != nil {
				return DatastoreKey{}, fmt.Errorf("key %q: the id of %s: %w", text, e.Kind, err)
			}
			e.ID, rest = id, rest[n:]
		}
		k.Path = append(k.Path, e)
		if rest != "" {
			if rest[0] != '/' {
				return DatastoreKey{}, fmt.Errorf("key %q: want '/' between path elements at %q", text, rest)
			}
			rest = rest[1:]
		}
	}
	if len(k.Path) == 0 {
		return DatastoreKey{}, fmt.Errorf("key %q: no path", text)
	}
	return k, nil
}
