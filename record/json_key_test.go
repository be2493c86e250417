package record

import (
	"testing"

	"github.com/rekeyio/rekey/rewrite"
)

// TestKeyFastPathAgreesWithParseKey: __key__ parsed by the record
// parser's fast path equals rewrite.ParseKey's result, and a key either
// refuses is refused by both.
func TestKeyFastPathAgreesWithParseKey(t *testing.T) {
	for _, key := range []string{
		`{"path": ["K", 1]}`,
		`{"path": ["K", -9223372036854775808]}`,
		`{"path": ["K", 9223372036854775807]}`,
		`{"path": ["K", "name"]}`,
		`{"path": ["K", "a\"b\\c\u00e9🙂"]}`,
		`{"path": [ "Customer" , "c1" , "Order" , 7 ]}`,
		`{"namespace": "ns", "path": ["K", 1], "database": "db"}`,
		`{"path": ["K", 1], "namespace": ""}`,
		`{"path": ["K", "0"]}`,
		// Refused, or unusual: both must agree.
		`{"path": ["K", 9223372036854775808]}`,
		`{"path": ["K", 007]}`,
		`{"path": ["K", 1.0]}`,
		`{"path": ["K", 1e3]}`,
		`{"path": ["K", -]}`,
		`{"path": ["K"]}`,
		`{"path": []}`,
		`{"path": ["K", 1, "L"]}`,
		`{"path": [1, 1]}`,
		`{"path": ["K", true]}`,
		`{"path": ["K", null]}`,
		`{"path": "K"}`,
		`{"path": ["K", 1], "extra": 1}`,
		`{"namespace": 5, "path": ["K", 1]}`,
		`{"path": ["K", 1], "path": ["L", 2]}`,
		`{}`,
		`["K", 1]`,
		`{"path": ["K", 1],}`,
	} {
		var want rewrite.DatastoreKey
		pk, werr := rewrite.ParseKey(key, nil)
		if werr == nil && !pk.IsDatastore {
			werr = errSlowKey
		}
		if werr == nil {
			want = pk.Datastore
		}
		r, err := ParseJSON([]byte(`{"__key__": ` + key + `, "x": 1}`))
		switch {
		case (err == nil) != (werr == nil):
			t.Errorf("%s: ParseJSON error %v, ParseKey error %v", key, err, werr)
		case err == nil && r.Key.String() != want.String():
			t.Errorf("%s: ParseJSON key %s, ParseKey %s", key, r.Key, want)
		case err == nil && (r.Key.Namespace != want.Namespace || r.Key.Database != want.Database):
			t.Errorf("%s: namespace/database %q/%q, want %q/%q", key, r.Key.Namespace, r.Key.Database, want.Namespace, want.Database)
		}
	}
}
