package splits

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/rekeyio/rekey/rewrite"
)

func numeric(t *testing.T, s string) rewrite.Value {
	t.Helper()
	v, err := rewrite.Numeric(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// formatCases are key parts with their splits-file form.
func formatCases(t *testing.T) []struct {
	v    rewrite.Value
	want string
} {
	return []struct {
		v    rewrite.Value
		want string
	}{
		{rewrite.String("plain"), `'plain'`},
		{rewrite.String(""), `''`},
		{rewrite.String("ab,c"), `'ab\,c'`},
		{rewrite.String(`back\slash`), `'back\\slash'`},
		{rewrite.String(`a\,b`), `'a\\\,b'`},
		{rewrite.String("it's"), `'it's'`},
		{rewrite.String(" padded "), `' padded '`},
		{rewrite.String("(x)"), `'(x)'`},
		{rewrite.String("日本語"), `'日本語'`},
		{rewrite.Int64(123), `'123'`},
		{rewrite.Int64(math.MinInt64), `'-9223372036854775808'`},
		{numeric(t, "99.990"), `'99.99'`},
		{rewrite.Timestamp(time.Date(2020, 6, 18, 17, 24, 53, 0, time.UTC)), `'2020-06-18T17:24:53Z'`},
		{rewrite.Timestamp(time.Date(2020, 6, 18, 19, 24, 53, 500, time.FixedZone("CEST", 2*3600))), `'2020-06-18T17:24:53.0000005Z'`},
		{rewrite.Date(2024, 1, 31), `'2024-01-31'`},
		{rewrite.Bytes([]byte{0xfb, 0xff, 0x00, ','}), `'+/8ALA=='`},
		{rewrite.Float64(1.287), `1.287`},
		{rewrite.Float64(-2e21), `-2e+21`},
		{rewrite.Bool(true), `true`},
		{rewrite.Bool(false), `false`},
		{rewrite.Null(rewrite.TypeString), `NULL`},
		{rewrite.Null(rewrite.TypeInt64), `NULL`},
	}
}

func TestFormatValues(t *testing.T) {
	for _, c := range formatCases(t) {
		got, err := Format(Point{Table: "T", Key: []rewrite.Value{c.v}})
		if want := "TABLE T (" + c.want + ")"; err != nil || got != want {
			t.Errorf("%s %v: %q, %v; want %q", c.v.Type, c.v, got, err, want)
		}
	}
}

func TestFormatLines(t *testing.T) {
	pts := []Point{
		{Table: "TableD", Key: []rewrite.Value{rewrite.Int64(0), rewrite.String("7ef9db22-d0e5-6041-8937-4bc6a7ef9db2")}},
		{Table: "Singers", Index: "IndexABC", Key: []rewrite.Value{rewrite.Int64(0), rewrite.Timestamp(time.Date(2020, 6, 18, 17, 24, 53, 0, time.UTC)), rewrite.Null(rewrite.TypeTimestamp)}},
	}
	var b bytes.Buffer
	if err := Write(&b, pts); err != nil {
		t.Fatal(err)
	}
	want := "TABLE TableD ('0', '7ef9db22-d0e5-6041-8937-4bc6a7ef9db2')\n" +
		"INDEX IndexABC ('0', '2020-06-18T17:24:53Z', NULL)\n"
	if b.String() != want {
		t.Errorf("splits file:\n%s\nwant\n%s", b.String(), want)
	}
}

func TestFormatRefuses(t *testing.T) {
	for _, c := range []struct {
		v    rewrite.Value
		want string
	}{
		{rewrite.String("'quoted"), "starts or ends with a single quote"},
		{rewrite.String("quoted'"), "starts or ends with a single quote"},
		{rewrite.String("two\nlines"), "line break"},
		{rewrite.String("cr\r"), "line break"},
		{rewrite.String("sep\u2028"), "U+2028"},
		{rewrite.String("nul\x00"), "NUL"},
		{rewrite.String("a) TABLE T (b"), `holds ") TABLE "`},
		{rewrite.String("a) TableKey (b"), `holds ") TableKey "`},
		{rewrite.Float64(math.NaN()), "FLOAT64 NaN cannot be a split point"},
		{rewrite.Float64(math.Inf(-1)), "FLOAT64 -Inf cannot be a split point"},
	} {
		_, err := Format(Point{Table: "Users", Key: []rewrite.Value{rewrite.Int64(1), c.v}})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "of table Users, key part 2") {
			t.Errorf("%q: %v; want an error naming the point and saying %q", c.v.Str, err, c.want)
		}
	}
	if _, err := Format(Point{Table: "Users"}); err == nil {
		t.Error("a point without key parts: no error")
	}
	var b bytes.Buffer
	if err := Write(&b, []Point{{Table: "T", Key: []rewrite.Value{rewrite.String("'")}}}); err == nil {
		t.Error("Write of a point Format refuses: no error")
	}
}

// gcloudParse reads a splits-file line as gcloud's split_file_parser.py
// does (see format.go), returning each key's parts as the API gets them.
func gcloudParse(t *testing.T, line string) (object, name string, keys []*structpb.ListValue) {
	t.Helper()
	m := regexp.MustCompile(`^(\S+)\s+(\S+)\s+(.+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("gcloud: %q is not TYPE NAME (VALUES)", line)
	}
	value := strings.TrimSpace(m[3])
	for _, bad := range []string{`^\((.*?)\) TABLE (\S+)\s+\((.*?)\)$`, `^\((.*?)\) INDEX (\S+)\s+\((.*?)\)$`} {
		if regexp.MustCompile(bad).MatchString(value) {
			t.Fatalf("gcloud: %q holds two points", line)
		}
	}
	var groups []string
	if g := regexp.MustCompile(`^\((.*?)\) TableKey \((.*?)\)$`).FindStringSubmatch(value); g != nil {
		groups = g[1:]
	} else if g := regexp.MustCompile(`^\((.*?)\)$`).FindStringSubmatch(value); g != nil {
		groups = g[1:]
	} else {
		t.Fatalf("gcloud: %q: the split value must be surrounded by parenthesis", line)
	}
	for _, g := range groups {
		g = strings.Trim(strings.TrimSpace(g), "()")
		lv := &structpb.ListValue{}
		for _, tok := range csvTokens(g) {
			var v *structpb.Value
			switch {
			case tok == "NULL":
				v = structpb.NewNullValue()
			case tok == "true" || tok == "false" || tok == "TRUE" || tok == "FALSE":
				v = structpb.NewBoolValue(true) // bool(token.lower()): true for any non-empty string
			case !strings.Contains(tok, "'"):
				f, err := strconv.ParseFloat(tok, 64)
				if err != nil {
					t.Fatalf("gcloud: %q: float(%q): %v", line, tok, err)
				}
				v = structpb.NewNumberValue(f)
			default:
				v = structpb.NewStringValue(strings.Trim(tok, "'"))
			}
			lv.Values = append(lv.Values, v)
		}
		keys = append(keys, lv)
	}
	return m[1], m[2], keys
}

// csvTokens splits like Python's csv.reader(quoting=QUOTE_NONE,
// escapechar='\\', skipinitialspace=True): commas separate, a backslash
// takes the next character as it is, spaces after a comma are skipped.
func csvTokens(s string) []string {
	var toks []string
	var cur strings.Builder
	start, escaped := true, false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\':
			escaped, start = true, false
		case r == ',':
			toks = append(toks, cur.String())
			cur.Reset()
			start = true
		case r == ' ' && start:
		default:
			cur.WriteRune(r)
			start = false
		}
	}
	return append(toks, cur.String())
}

// trickyPoints are points with every kind of key part and strings that
// need escaping or come close to gcloud's line patterns.
func trickyPoints(t *testing.T) []Point {
	var key []rewrite.Value
	for _, c := range formatCases(t) {
		key = append(key, c.v)
	}
	pts := []Point{{Table: "Wide", Key: key}}
	for _, c := range formatCases(t) {
		pts = append(pts, Point{Table: "T", Index: "ByValue", Key: []rewrite.Value{c.v}})
	}
	for _, s := range []string{"a,,b", `\\`, `\`, ",", " ,x", "x, ", "TABLE", "((", "))", "a) (b", "a'b'c"} {
		pts = append(pts, Point{Table: "T", Key: []rewrite.Value{rewrite.String(s), rewrite.String(s)}})
	}
	return pts
}

// TestGcloudReadsWhatTheAPIGets checks that each line, read as gcloud
// reads it, gives the key parts Requests sends for the point: the file
// and --apply add the same points (but for BOOL false, see HasFalse).
func TestGcloudReadsWhatTheAPIGets(t *testing.T) {
	pts := trickyPoints(t)
	for _, p := range pts {
		line, err := Format(p)
		if err != nil {
			t.Fatalf("%v: %v", p.Key, err)
		}
		object, name, keys := gcloudParse(t, line)
		if wantObj, wantName := strings.ToUpper(object), p.Table; p.Index != "" {
			if wantObj != "INDEX" || name != p.Index {
				t.Errorf("%q: gcloud reads %s %s, want INDEX %s", line, object, name, p.Index)
			}
		} else if wantObj != "TABLE" || name != wantName {
			t.Errorf("%q: gcloud reads %s %s, want TABLE %s", line, object, name, wantName)
		}
		want, err := KeyParts(p.Key)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 1 {
			t.Fatalf("%q: gcloud reads %d keys", line, len(keys))
		}
		// They differ exactly where a BOOL false is (HasFalse).
		if same, hasFalse := proto.Equal(keys[0], want), len(HasFalse([]Point{p})) > 0; same == hasFalse {
			t.Errorf("%q (BOOL false: %t): gcloud reads\n%v\nthe API gets\n%v", line, hasFalse, keys[0], want)
		}
	}
}

// TestRealGcloud reads the splits file of trickyPoints with the parser of
// the installed gcloud (testdata/gcloud_parse.py; skipped without one) and
// checks that it gets the key parts Requests sends, except where HasFalse
// says it cannot.
func TestRealGcloud(t *testing.T) {
	sdk := os.Getenv("CLOUDSDK_ROOT_DIR")
	if sdk == "" {
		sdk = "/usr/lib/google-cloud-sdk"
	}
	if _, err := os.Stat(filepath.Join(sdk, "lib/googlecloudsdk/command_lib/spanner/split_file_parser.py")); err != nil {
		t.Skipf("no gcloud with a splits-file parser under %s (set CLOUDSDK_ROOT_DIR)", sdk)
	}
	pts := trickyPoints(t)
	file := filepath.Join(t.TempDir(), "splits.txt")
	var b bytes.Buffer
	if err := Write(&b, pts); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("python3", "testdata/gcloud_parse.py", sdk, file).Output()
	if err != nil {
		t.Fatalf("gcloud's parser: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(pts) {
		t.Fatalf("gcloud read %d points from %d lines:\n%s", len(lines), len(pts), out)
	}
	for i, p := range pts {
		var got struct {
			Table, Index string
			Keys         []struct{ KeyParts []any }
		}
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatal(err)
		}
		parts, _ := KeyParts(p.Key)
		var want []any
		raw, _ := protojson.Marshal(parts)
		_ = json.Unmarshal(raw, &want)
		wantTable, wantIndex := p.Table, ""
		if p.Index != "" {
			wantTable, wantIndex = "", p.Index // gcloud names only the index
		}
		if got.Table != wantTable || got.Index != wantIndex || len(got.Keys) != 1 {
			t.Errorf("line %d: gcloud read %s", i+1, lines[i])
			continue
		}
		same := reflect.DeepEqual(got.Keys[0].KeyParts, want)
		if hasFalse := len(HasFalse([]Point{p})) > 0; same == hasFalse {
			t.Errorf("line %d (BOOL false: %t): gcloud read\n%v\nthe API gets\n%v", i+1, hasFalse, got.Keys[0].KeyParts, want)
		}
	}
}

func TestHasFalse(t *testing.T) {
	pts := []Point{
		{Table: "T", Key: []rewrite.Value{rewrite.Bool(true)}},
		{Table: "T", Key: []rewrite.Value{rewrite.Int64(0), rewrite.Bool(false)}},
		{Table: "T", Key: []rewrite.Value{rewrite.Null(rewrite.TypeBool)}},
		{Table: "T", Key: []rewrite.Value{rewrite.Int64(0)}},
	}
	if got := HasFalse(pts); len(got) != 1 || got[0].Key[1].Type != rewrite.TypeBool {
		t.Errorf("HasFalse: %v, want the second point only", got)
	}
}

func TestRequests(t *testing.T) {
	const db = "projects/p/instances/i/databases/d"
	exp := time.Date(2025, 3, 11, 9, 30, 0, 0, time.UTC)
	var pts []Point
	for i := range 230 {
		p := Point{Table: "Users", Key: []rewrite.Value{rewrite.Int64(int64(i - 100))}}
		if i >= 150 {
			p = Point{Table: "Users", Index: "UsersByEmail", Key: []rewrite.Value{rewrite.String(fmt.Sprintf("e%03d", i))}}
		}
		pts = append(pts, p)
	}
	reqs, err := Requests(db, pts, exp)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []string
	next := 0
	for _, r := range reqs {
		if r.Database != db || r.Initiator != "rekey" {
			t.Errorf("request for %q by %q", r.Database, r.Initiator)
		}
		var groups []string
		n := 0
		for _, sp := range r.SplitPoints {
			if !sp.ExpireTime.AsTime().Equal(exp) {
				t.Errorf("expire time %v, want %v", sp.ExpireTime.AsTime(), exp)
			}
			groups = append(groups, fmt.Sprintf("%s/%s:%d", sp.Table, sp.Index, len(sp.Keys)))
			for _, k := range sp.Keys {
				want, _ := KeyParts(pts[next].Key)
				if !proto.Equal(k.KeyParts, want) {
					t.Errorf("point %d: sent %v, want %v", next, k.KeyParts, want)
				}
				next++
				n++
			}
		}
		sizes = append(sizes, fmt.Sprintf("%d %v", n, groups))
	}
	if want := "[100 [Users/:100] 100 [Users/:50 Users/UsersByEmail:50] 30 [Users/UsersByEmail:30]]"; fmt.Sprint(sizes) != want {
		t.Errorf("requests: %v, want %s", sizes, want)
	}
	// INT64 parts go as strings, the others in Spanner's JSON encoding.
	lv, err := KeyParts([]rewrite.Value{rewrite.Int64(-5), rewrite.Bool(false), rewrite.Float64(1.5), rewrite.Null(rewrite.TypeInt64), rewrite.Bytes([]byte("hi"))})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := structpb.NewList([]any{"-5", false, 1.5, nil, "aGk="})
	if !proto.Equal(lv, want) {
		t.Errorf("key parts %v, want %v", lv, want)
	}
	if _, err := Requests(db, []Point{{Table: "T", Key: []rewrite.Value{rewrite.Float64(math.NaN())}}}, exp); err == nil || !strings.Contains(err.Error(), "of table T: key part 1: FLOAT64 NaN") {
		t.Errorf("NaN point: %v", err)
	}
}
