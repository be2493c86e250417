package cohort

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// Source says where a User spec finds the user id.
type Source uint8

// Where a User spec finds the user id.
const (
	// FromField: a Spanner column or Datastore property.
	FromField Source = iota
	// FromKey: an element of the record's own Datastore key.
	FromKey
	// FromRef: the key a key-valued property points to.
	FromRef
)

// User says where a record's user id is, as the config's cohort.user
// writes it:
//
//	UserId          the column or property UserId
//	key:User        the record's Datastore key: its element of kind User
//	ref:owner       the key in property owner: its last element
//	ref:owner:User  the key in property owner: its element of kind User
//
// The user id's text, which Of hashes, is a STRING value as it is, an
// INT64 value (or a key element's id) in decimal, a BYTES value in
// standard base64 with padding (TO_BASE64 in Spanner, as rekey's record
// and key notations write bytes), and a key element's name as it is; so
// id 42 and name "42" are the same user. Values of other kinds are
// refused. Where a key holds several elements of the kind, the first from
// the root counts.
//
// A user id that is part of a key being rewritten must be read from the
// record as the source holds it, before the rewrite.
type User struct {
	From Source
	// Name is the column or property (FromField), or the key-valued
	// property (FromRef).
	Name string
	// Kind is the key element's kind (FromKey; FromRef when given: empty
	// means the key's last element).
	Kind string
}

// ErrNoUser is wrapped by the errors of a record that lacks the user id:
// no such column or property, a NULL, no key, no element of the kind.
var ErrNoUser = errors.New("no user id")

// ParseUser reads a cohort.user spec (see User).
func ParseUser(spec string) (User, error) {
	s := strings.TrimSpace(spec)
	bad := func(why string) (User, error) {
		return User{}, fmt.Errorf("%q: %s (want COLUMN, key:KIND, ref:PROPERTY or ref:PROPERTY:KIND)", spec, why)
	}
	if s == "" {
		return bad("empty")
	}
	form, rest, ok := strings.Cut(s, ":")
	if !ok {
		return User{From: FromField, Name: s}, nil
	}
	parts := strings.Split(rest, ":")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	switch strings.TrimSpace(form) {
	case "key":
		switch {
		case len(parts) != 1:
			return bad("key: takes one kind")
		case parts[0] == "":
			return bad("key: needs the kind of the key element, e.g. key:User")
		}
		return User{From: FromKey, Kind: parts[0]}, nil
	case "ref":
		switch {
		case len(parts) > 2:
			return bad("ref: takes a property and at most one kind")
		case parts[0] == "":
			return bad("ref: needs the key-valued property, e.g. ref:owner")
		case len(parts) == 2 && parts[1] == "":
			return bad("ref:" + parts[0] + ": needs the kind after the colon, e.g. ref:" + parts[0] + ":User")
		}
		u := User{From: FromRef, Name: parts[0]}
		if len(parts) == 2 {
			u.Kind = parts[1]
		}
		return u, nil
	}
	return bad(fmt.Sprintf("unknown form %q", strings.TrimSpace(form)+":"))
}

// String writes u as ParseUser reads it.
func (u User) String() string {
	switch u.From {
	case FromKey:
		return "key:" + u.Kind
	case FromRef:
		if u.Kind != "" {
			return "ref:" + u.Name + ":" + u.Kind
		}
		return "ref:" + u.Name
	}
	return u.Name
}

// ID returns the text of r's user id (see User). Its errors name the
// record and the spec; a record that lacks the user id gives one wrapping
// ErrNoUser.
func (u User) ID(r *record.Record) (string, error) {
	fail := func(noUser bool, format string, args ...any) (string, error) {
		err := fmt.Errorf(format, args...)
		if noUser {
			err = fmt.Errorf("%w: %w", ErrNoUser, err)
		}
		return "", fmt.Errorf("record %s: cohort.user %q: %w", r.Describe(), u, err)
	}
	switch u.From {
	case FromField:
		v, ok := r.Get(u.Name)
		if !ok {
			return fail(true, "no column or property %s", u.Name)
		}
		switch v.Kind {
		case record.KindString:
			return v.Str, nil
		case record.KindInt:
			return strconv.FormatInt(v.Int, 10), nil
		case record.KindBytes:
			return base64.StdEncoding.EncodeToString(v.Bytes), nil
		case record.KindNull:
			return fail(true, "%s is NULL", u.Name)
		case record.KindKey:
			return fail(false, "%s holds a key; to take the user id from the key it points to, write ref:%s or ref:%s:KIND", u.Name, u.Name, u.Name)
		}
		return fail(false, "%s is a %s value; a user id must be a string, an integer or bytes", u.Name, v.Kind)
	case FromKey:
		if r.Key == nil {
			return fail(true, "the record has no Datastore key")
		}
		text, err := elementText(*r.Key, u.Kind)
		if err != nil {
			return fail(true, "the key %w", err)
		}
		return text, nil
	case FromRef:
		v, ok := r.Get(u.Name)
		switch {
		case !ok:
			return fail(true, "no property %s", u.Name)
		case v.Kind == record.KindNull:
			return fail(true, "%s is NULL", u.Name)
		case v.Kind != record.KindKey || v.Key == nil:
			return fail(false, "%s is a %s value, not a key", u.Name, v.Kind)
		case len(v.Key.Path) == 0:
			return fail(true, "%s holds a key with no path", u.Name)
		}
		text, err := elementText(*v.Key, u.Kind)
		if err != nil {
			return fail(true, "%s holds key %s, and the key %w", u.Name, v.Key, err)
		}
		return text, nil
	}
	return fail(false, "unknown source %d", u.From)
}

// Cohort returns the cohort of r's user among buckets cohorts.
func (u User) Cohort(r *record.Record, buckets int) (int, error) {
	id, err := u.ID(r)
	if err != nil {
		return 0, err
	}
	return Of(id, buckets), nil
}

// elementText is the text of k's element of kind (the first from the
// root), or of its last element when kind is empty: the name, or the id in
// decimal.
func elementText(k rewrite.DatastoreKey, kind string) (string, error) {
	e, found := k.Leaf(), len(k.Path) > 0
	if kind != "" {
		found = false
		for _, p := range k.Path {
			if p.Kind == kind {
				e, found = p, true
				break
			}
		}
	}
	switch {
	case !found:
		return "", fmt.Errorf("has no element of kind %s", kind)
	case e.IsName():
		return e.Name, nil
	case e.ID == 0:
		return "", fmt.Errorf("element %s is incomplete (no id or name)", e.Kind)
	}
	return strconv.FormatInt(e.ID, 10), nil
}

// SQLExpr returns the Spanner SQL expression of the text of the user id
// in column u.Name of type t, for SQL(SQLExpr(...), buckets) in a
// pushed-down filter: the column for STRING, CAST(col AS STRING) for
// INT64, TO_BASE64(col) for BYTES. Key and ref specs (Datastore) and other
// types have none.
func SQLExpr(u User, t rewrite.Type) (string, error) {
	if u.From != FromField {
		return "", fmt.Errorf("cohort.user %q: reads a Datastore key, which has no SQL expression", u)
	}
	col := rewrite.QuoteIdent(u.Name)
	switch t {
	case rewrite.TypeString:
		return col, nil
	case rewrite.TypeInt64:
		return "CAST(" + col + " AS STRING)", nil
	case rewrite.TypeBytes:
		return "TO_BASE64(" + col + ")", nil
	}
	return "", fmt.Errorf("cohort.user %q: a %s column; a user id column must be STRING, INT64 or BYTES", u, t)
}
