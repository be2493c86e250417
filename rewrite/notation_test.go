package rewrite_test

import (
	"strings"
	"testing"

	"github.com/rekeyio/rekey/rewrite"
)

// TestParseKeyRefuses: what the notation refuses, and the reason it gives.
func TestParseKeyRefuses(t *testing.T) {
	for _, tc := range []struct {
		text, key, want string // key: the schema, "" to infer
	}{
		// Invalid UTF-8 is refused, with the JSON Lines reader's message,
		// not replaced by U+FFFD.
		{"\"\xff\"", "", "column 2: string is not valid UTF-8"},
		{"\"\xfe\"", "", "column 2: string is not valid UTF-8"},
		{"[1, \"ab\xc3\"]", "", "column 8: string is not valid UTF-8"},
		{"\"\xed\xa0\x80\"", "", "column 2: string is not valid UTF-8"}, // an encoded surrogate
		{`{"path":["K","a` + "\xff" + `"]}`, "", "column 16: string is not valid UTF-8"},
		{`"\"` + "\xff\"", "", "column 4: string is not valid UTF-8"}, // after an escaped quote, still in the string
		{"\xff", "", "column 1: not valid UTF-8"},
		// Integers beyond INT64 are an overflow naming the value, never an
		// approximate FLOAT64.
		{"100000000000000000000000000000", "", "value 1: integer 100000000000000000000000000000 overflows INT64 (-9223372036854775808 to 9223372036854775807)"},
		{"[1, -9223372036854775809]", "", "value 2: integer -9223372036854775809 overflows INT64"},
		{"9223372036854775808", "Id INT64", "column Id: integer 9223372036854775808 overflows INT64"},
		{`"9223372036854775808"`, "Id INT64", "column Id: integer 9223372036854775808 overflows INT64"},
		{`{"path":["K",9223372036854775808]}`, "", "path item 2: id: integer 9223372036854775808 overflows INT64"},
		{"1e400", "", "value 1: number 1e400 overflows FLOAT64"},
		{"1e400", "F FLOAT64", "column F: number 1e400 overflows FLOAT64"},
		// Exactly one JSON value: text after it is refused, whatever it is.
		{`"a" "b"`, "", `unexpected text after the key: "b"`},
		{`1 2`, "", "unexpected text after the key: 2"},
		{`[1] x`, "", "unexpected text after the key: x"},
		{`[1] ]`, "", "unexpected text after the key: ]"},
		{`1}`, "", "unexpected text after the key: }"},
		{`12ab`, "", "unexpected text after the key: ab"},
		{`{"path":["K",1]} {}`, "", "unexpected text after the key: {}"},
		{`[1] x`, "Id INT64", "unexpected text after the key: x"},
		{`"a" ` + strings.Repeat("b", 60), "", "unexpected text after the key: " + strings.Repeat("b", 40) + "..."},
		// An unquoted string gets a hint to quote it.
		{`Customer1`, "", `not a JSON value; a string key is written in double quotes: "Customer1"`},
		{`  Customer 1 `, "", `not a JSON value; a string key is written in double quotes: "Customer 1"`},
		{`'Customer1'`, "", `not a JSON value; a string key is written in double quotes: "Customer1"`},
		{`a"b<c`, "", `not a JSON value; a string key is written in double quotes: "a\"b<c"`},
		{`true love`, "", `not a JSON value; a string key is written in double quotes: "true love"`},
		// Other syntax errors say what JSON says.
		{`[1,`, "", "not JSON: unexpected EOF"},
		{`   `, "", "no key"},
	} {
		var schema *rewrite.KeySchema
		if tc.key != "" {
			s := mustSchema(t, tc.key)
			schema = &s
		}
		_, err := rewrite.ParseKey(tc.text, schema)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseKey(%q, %q): %v, want %q", tc.text, tc.key, err, tc.want)
		}
	}
}

// TestParseKeyAccepts: the edges of what is refused above.
func TestParseKeyAccepts(t *testing.T) {
	for _, tc := range []struct{ text, key, want string }{
		{"\"\xef\xbf\xbd\"", "", "\"\ufffd\""}, // U+FFFD itself is valid UTF-8
		{`"日本語"`, "", `"日本語"`},
		{"9223372036854775807", "", "9223372036854775807"},
		{"-9223372036854775808", "", "-9223372036854775808"},
		{"1e29", "", "1e+29"}, // written as a float, read as one
		{"100000000000000000000000000000", "F FLOAT64", "1e+29"},
		{`"9223372036854775807"`, "Id INT64", "9223372036854775807"},
		{" [1, \"x\"] \r", "", `[1,"x"]`},
		{`{"path":["K",9223372036854775807]}`, "", `{"path":["K",9223372036854775807]}`},
	} {
		var schema *rewrite.KeySchema
		if tc.key != "" {
			s := mustSchema(t, tc.key)
			schema = &s
		}
		pk, err := rewrite.ParseKey(tc.text, schema)
		if err != nil {
			t.Errorf("ParseKey(%q, %q): %v", tc.text, tc.key, err)
			continue
		}
		got := rewrite.FormatKey(pk.Values, pk.Bare)
		if pk.IsDatastore {
			got = rewrite.FormatDatastoreKey(pk.Datastore)
		}
		if got != tc.want {
			t.Errorf("ParseKey(%q, %q) = %s, want %s", tc.text, tc.key, got, tc.want)
		}
	}
}
