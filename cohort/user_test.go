package cohort_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

func TestCohortParseUser(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want cohort.User
		text string
	}{
		{"UserId", cohort.User{From: cohort.FromField, Name: "UserId"}, "UserId"},
		{"  user_id ", cohort.User{From: cohort.FromField, Name: "user_id"}, "user_id"},
		{"key:User", cohort.User{From: cohort.FromKey, Kind: "User"}, "key:User"},
		{"key: User ", cohort.User{From: cohort.FromKey, Kind: "User"}, "key:User"},
		{"ref:owner", cohort.User{From: cohort.FromRef, Name: "owner"}, "ref:owner"},
		{"ref:owner:User", cohort.User{From: cohort.FromRef, Name: "owner", Kind: "User"}, "ref:owner:User"},
	} {
		got, err := cohort.ParseUser(tc.in)
		if err != nil {
			t.Errorf("ParseUser(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want || got.String() != tc.text {
			t.Errorf("ParseUser(%q) = %+v (%s), want %+v (%s)", tc.in, got, got, tc.want, tc.text)
		}
		if back, err := cohort.ParseUser(got.String()); err != nil || back != got {
			t.Errorf("ParseUser(%q) = %+v, %v; want %+v", got.String(), back, err, got)
		}
	}
	const forms = " (want COLUMN, key:KIND, ref:PROPERTY or ref:PROPERTY:KIND)"
	for _, tc := range []struct{ in, want string }{
		{"", `"": empty`},
		{"  ", `"  ": empty`},
		{"key:", `"key:": key: needs the kind of the key element, e.g. key:User`},
		{"key:User:Order", `"key:User:Order": key: takes one kind`},
		{"ref:", `"ref:": ref: needs the key-valued property, e.g. ref:owner`},
		{"ref::User", `"ref::User": ref: needs the key-valued property, e.g. ref:owner`},
		{"ref:owner:", `"ref:owner:": ref:owner: needs the kind after the colon, e.g. ref:owner:User`},
		{"ref:owner:User:x", `"ref:owner:User:x": ref: takes a property and at most one kind`},
		{"col:UserId", `"col:UserId": unknown form "col:"`},
		{"Key:User", `"Key:User": unknown form "Key:"`},
	} {
		_, err := cohort.ParseUser(tc.in)
		if err == nil || err.Error() != tc.want+forms {
			t.Errorf("ParseUser(%q): %v\nwant %s", tc.in, err, tc.want+forms)
		}
	}
}

func dsKey(path ...any) *rewrite.DatastoreKey {
	k := &rewrite.DatastoreKey{}
	for i := 0; i < len(path); i += 2 {
		e := rewrite.PathElement{Kind: path[i].(string)}
		switch v := path[i+1].(type) {
		case int:
			e.ID = int64(v)
		case string:
			e.Name = v
		}
		k.Path = append(k.Path, e)
	}
	return k
}

func TestCohortUserID(t *testing.T) {
	row := &record.Record{Table: "Orders", Fields: []record.Field{
		{Name: "OrderId", Value: record.Int(7)},
		{Name: "UserId", Value: record.String("alice")},
		{Name: "UserNum", Value: record.Int(-42)},
		{Name: "UserBytes", Value: record.Bytes([]byte{0xfb, 0xff, 0x00})},
		{Name: "Empty", Value: record.String("")},
	}}
	order := &record.Record{Table: "Order", Key: dsKey("User", "alice", "Order", 5), Fields: []record.Field{
		{Name: "owner", Value: record.Key(*dsKey("Tenant", "t1", "User", 42))},
		{Name: "buyer", Value: record.Key(*dsKey("Account", 9, "User", "bob", "Cart", 3))},
	}}
	byID := &record.Record{Table: "User", Key: dsKey("User", math.MaxInt64)}
	for _, tc := range []struct {
		spec string
		r    *record.Record
		want string
	}{
		{"UserId", row, "alice"},
		{"userid", row, "alice"}, // Spanner columns are case-insensitive
		{"UserNum", row, "-42"},
		{"UserBytes", row, "+/8A"},
		{"Empty", row, ""},
		{"key:User", order, "alice"},
		{"key:Order", order, "5"},
		{"key:User", byID, "9223372036854775807"},
		{"ref:owner", order, "42"},
		{"ref:owner:Tenant", order, "t1"},
		{"ref:owner:User", order, "42"},
		{"ref:buyer", order, "3"},
		{"ref:buyer:User", order, "bob"},
		{"ref:buyer:Account", order, "9"},
		{"key:User", &record.Record{Key: dsKey("User", "root", "User", "child")}, "root"}, // the first from the root
	} {
		u, err := cohort.ParseUser(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := u.ID(tc.r)
		if err != nil || got != tc.want {
			t.Errorf("%s of %s: %q, %v; want %q", tc.spec, tc.r.Describe(), got, err, tc.want)
			continue
		}
		c, err := u.Cohort(tc.r, 10000)
		if err != nil || c != cohort.Of(tc.want, 10000) {
			t.Errorf("%s of %s: cohort %d, %v; want %d", tc.spec, tc.r.Describe(), c, err, cohort.Of(tc.want, 10000))
		}
	}
	// An id and a name with the same text are the same user.
	a, _ := cohort.User{From: cohort.FromKey, Kind: "User"}.ID(&record.Record{Key: dsKey("User", 42)})
	b, _ := cohort.User{From: cohort.FromKey, Kind: "User"}.ID(&record.Record{Key: dsKey("User", "42")})
	if a != "42" || b != "42" {
		t.Errorf("id 42 gives %q, name \"42\" gives %q; want both \"42\"", a, b)
	}
}

func TestCohortUserIDErrors(t *testing.T) {
	row := &record.Record{Table: "Orders", Fields: []record.Field{
		{Name: "OrderId", Value: record.Int(7)},
		{Name: "UserId", Value: record.Value{}},
		{Name: "Score", Value: record.Float(1.5)},
		{Name: "At", Value: record.Time(time.Date(2024, 1, 31, 12, 0, 0, 0, time.UTC))},
		{Name: "Ok", Value: record.Bool(true)},
		{Name: "Parent", Value: record.Key(*dsKey("User", "alice"))},
	}}
	order := &record.Record{Table: "Order", Key: dsKey("Tenant", "t1", "Order", 5), Fields: []record.Field{
		{Name: "owner", Value: record.Key(*dsKey("Tenant", "t1"))},
		{Name: "none", Value: record.Value{}},
		{Name: "name", Value: record.String("alice")},
		{Name: "empty", Value: record.Key(rewrite.DatastoreKey{})},
		{Name: "partial", Value: record.Key(rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "User"}}})},
	}}
	const rowName = `Orders(OrderId=7, UserId=NULL, Score=1.5, ...)`
	for _, tc := range []struct {
		spec   string
		r      *record.Record
		want   string
		noUser bool
	}{
		{"Nope", row, `record ` + rowName + `: cohort.user "Nope": no user id: no column or property Nope`, true},
		{"UserId", row, `record ` + rowName + `: cohort.user "UserId": no user id: UserId is NULL`, true},
		{"Score", row, `record ` + rowName + `: cohort.user "Score": Score is a float value; a user id must be a string, an integer or bytes`, false},
		{"At", row, `record ` + rowName + `: cohort.user "At": At is a timestamp value; a user id must be a string, an integer or bytes`, false},
		{"Ok", row, `record ` + rowName + `: cohort.user "Ok": Ok is a bool value; a user id must be a string, an integer or bytes`, false},
		{"Parent", row, `record ` + rowName + `: cohort.user "Parent": Parent holds a key; to take the user id from the key it points to, write ref:Parent or ref:Parent:KIND`, false},
		{"key:User", row, `record ` + rowName + `: cohort.user "key:User": no user id: the record has no Datastore key`, true},
		{"key:User", order, `record Tenant:"t1"/Order:5: cohort.user "key:User": no user id: the key has no element of kind User`, true},
		{"key:User", &record.Record{Key: dsKey("User", 0)}, `record User:0: cohort.user "key:User": no user id: the key element User is incomplete (no id or name)`, true},
		{"ref:owner:User", order, `record Tenant:"t1"/Order:5: cohort.user "ref:owner:User": no user id: owner holds key Tenant:"t1", and the key has no element of kind User`, true},
		{"ref:missing", order, `record Tenant:"t1"/Order:5: cohort.user "ref:missing": no user id: no property missing`, true},
		{"ref:none", order, `record Tenant:"t1"/Order:5: cohort.user "ref:none": no user id: none is NULL`, true},
		{"ref:name", order, `record Tenant:"t1"/Order:5: cohort.user "ref:name": name is a string value, not a key`, false},
		{"ref:empty", order, `record Tenant:"t1"/Order:5: cohort.user "ref:empty": no user id: empty holds a key with no path`, true},
		{"ref:partial", order, `record Tenant:"t1"/Order:5: cohort.user "ref:partial": no user id: partial holds key User:0, and the key element User is incomplete (no id or name)`, true},
	} {
		u, err := cohort.ParseUser(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		id, err := u.ID(tc.r)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %q, %v\nwant error %s", tc.spec, id, err, tc.want)
			continue
		}
		if errors.Is(err, cohort.ErrNoUser) != tc.noUser {
			t.Errorf("%s: errors.Is(%v, ErrNoUser) = %t", tc.spec, err, !tc.noUser)
		}
		if _, err := u.Cohort(tc.r, 100); err == nil {
			t.Errorf("%s: Cohort gave no error", tc.spec)
		}
	}
}

func TestCohortSQLExpr(t *testing.T) {
	for _, tc := range []struct {
		spec string
		typ  rewrite.Type
		want string
	}{
		{"UserId", rewrite.TypeString, "UserId"},
		{"UserId", rewrite.TypeInt64, "CAST(UserId AS STRING)"},
		{"UserId", rewrite.TypeBytes, "TO_BASE64(UserId)"},
		{"Order", rewrite.TypeString, "`Order`"}, // a reserved word
	} {
		u, err := cohort.ParseUser(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := cohort.SQLExpr(u, tc.typ)
		if err != nil || got != tc.want {
			t.Errorf("SQLExpr(%s, %s) = %q, %v; want %q", tc.spec, tc.typ, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		spec string
		typ  rewrite.Type
		want string
	}{
		{"UserId", rewrite.TypeFloat64, `cohort.user "UserId": a FLOAT64 column; a user id column must be STRING, INT64 or BYTES`},
		{"UserId", rewrite.TypeTimestamp, `cohort.user "UserId": a TIMESTAMP column; a user id column must be STRING, INT64 or BYTES`},
		{"key:User", rewrite.TypeString, `cohort.user "key:User": reads a Datastore key, which has no SQL expression`},
		{"ref:owner", rewrite.TypeString, `cohort.user "ref:owner": reads a Datastore key, which has no SQL expression`},
	} {
		u, err := cohort.ParseUser(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := cohort.SQLExpr(u, tc.typ); err == nil || err.Error() != tc.want {
			t.Errorf("SQLExpr(%s, %s) = %q, %v; want error %s", tc.spec, tc.typ, got, err, tc.want)
		}
	}
}
