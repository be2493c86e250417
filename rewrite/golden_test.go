package rewrite_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/internal/testkit/golden"
	"github.com/rekeyio/rekey/rewrite"
)

// goldenCase is one golden file: a strategy config applied to a list of
// keys in the JSON notation, with an optional Spanner key schema.
type goldenCase struct {
	file   string
	config rewrite.StepConfig
	key    string // Spanner key schema; "" for Datastore keys
	inputs []string
}

var (
	dsInputs = []string{
		`{"path":["Customer","Customer1"]}`,
		`{"path":["Customer","Customer2"]}`,
		`{"path":["Customer",1]}`,
		`{"path":["Customer",2]}`,
		`{"path":["Customer","2"]}`,
		`{"path":["Customer",120]}`,
		`{"path":["Customer","'x"]}`,
		`{"path":["Customer","日本語"]}`,
		`{"path":["Customer","Customer1","Order",1]}`,
		`{"path":["Customer","Customer1","Order","o-2"]}`,
		`{"path":["Customer",9223372036854775807],"namespace":"tenant-1"}`,
		`{"path":["Customer","a/b"]}`,
		`{"path":["Customer",0]}`,
	}
	logInputs = []string{
		`["2024-01-31T12:00:00Z","u1"]`,
		`["2024-01-31T12:00:00.000001Z","u1"]`,
		`["2024-01-31T12:00:01Z","u2"]`,
		`["1969-12-31T23:59:59.9999995Z","u3"]`,
		`["0001-01-01T00:00:00Z",""]`,
		`["9999-12-31T23:59:59.999999999Z","日本語"]`,
		`["2024-01-31T12:00:00Z",null]`,
	}
	idInputs = []string{`1`, `2`, `3`, `10`, `120`, `-1`, `0`, `9223372036854775807`, `-9223372036854775808`}
)

var goldenCases = []goldenCase{
	{"hashprefix-datastore", rewrite.StepConfig{Strategy: "hashprefix"}, "", dsInputs},
	{"hashprefix-farm-spanner", rewrite.StepConfig{Strategy: "hashprefix", Params: rewrite.Params{"hash": "farm", "n": 6, "column": "UserId"}}, "LastAccess TIMESTAMP, UserId STRING(MAX)", logInputs},
	{"hashprefix-int64", rewrite.StepConfig{Strategy: "hashprefix"}, "Id INT64", idInputs},
	{"shard-signed", rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 10}}, "LastAccess TIMESTAMP, UserId STRING(MAX)", logInputs},
	{"shard-abs-int64", rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 10, "mode": "abs"}}, "Id INT64", idInputs},
	{"bitreverse-int64", rewrite.StepConfig{Strategy: "bitreverse"}, "Id INT64", idInputs},
	{"bitreverse-datastore", rewrite.StepConfig{Strategy: "bitreverse"}, "", dsInputs},
	{"uuid5-datastore", rewrite.StepConfig{Strategy: "uuid"}, "", dsInputs},
	{"uuid5-spanner", rewrite.StepConfig{Strategy: "uuid", Params: rewrite.Params{"keep": true}}, "LastAccess TIMESTAMP, UserId STRING(MAX)", logInputs},
	{"swap", rewrite.StepConfig{Strategy: "swap", Params: rewrite.Params{"order": "UserId"}}, "LastAccess TIMESTAMP, UserId STRING(MAX)", logInputs},
	{"reverse-datastore", rewrite.StepConfig{Strategy: "reverse"}, "", dsInputs},
	{"reverse-int64", rewrite.StepConfig{Strategy: "reverse"}, "Id INT64", idInputs},
	{"bucket-ms", rewrite.StepConfig{Strategy: "bucket", Params: rewrite.Params{"n": 16}}, "LastAccess TIMESTAMP, UserId STRING(MAX)", logInputs},
	{"generation-column", rewrite.StepConfig{Strategy: "generation", Params: rewrite.Params{"g": 7}}, "Id INT64", idInputs},
	{"generation-parent", rewrite.StepConfig{Strategy: "generation", Params: rewrite.Params{"g": 7}}, "", dsInputs},
	{"chain-datastore", rewrite.StepConfig{Strategy: "chain", Steps: []rewrite.StepConfig{
		{Strategy: "hashprefix", Params: rewrite.Params{"elements": "root"}},
		{Strategy: "generation", Params: rewrite.Params{"g": 3, "as": "prefix"}},
	}}, "", dsInputs},
	{"chain-spanner", rewrite.StepConfig{Strategy: "chain", Steps: []rewrite.StepConfig{
		{Strategy: "swap", Params: rewrite.Params{"order": "UserId"}},
		{Strategy: "shard", Params: rewrite.Params{"n": 8, "columns": "UserId", "mode": "abs"}},
		{Strategy: "generation", Params: rewrite.Params{"g": 2}},
	}}, "LastAccess TIMESTAMP, UserId STRING(MAX)", logInputs},
}

// TestGolden rewrites fixed keys and compares the results, and the
// inverses, with testdata/golden/*.txt (go test -run TestGolden -update-golden
// rewrites them; review the diff).
func TestGolden(t *testing.T) {
	for _, gc := range goldenCases {
		t.Run(gc.file, func(t *testing.T) {
			got := renderGolden(t, gc)
			path := filepath.Join("testdata", "golden", gc.file+".txt")
			golden.Check(t, path, got)
		})
	}
}

func renderGolden(t *testing.T, gc goldenCase) string {
	s, err := rewrite.New(gc.config)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("# strategy: " + s.Spec().String() + "\n")
	var sr *rewrite.SpannerRewriter
	var schema *rewrite.KeySchema
	if gc.key != "" {
		ks := mustSchema(t, gc.key)
		schema = &ks
		sr = mustBind(t, s, gc.key)
		b.WriteString("# old key: " + sr.In().String() + "\n# new key: " + sr.Out().String() + "\n")
		for _, e := range sr.Explain() {
			b.WriteString("# " + e + "\n")
		}
	}
	b.WriteString("# old key => new key (=> old key again, when invertible)\n")
	for _, in := range gc.inputs {
		pk, err := rewrite.ParseKey(in, schema)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		b.WriteString(in + "\n  => ")
		if pk.IsDatastore {
			r, err := s.Datastore()
			if err != nil {
				t.Fatal(err)
			}
			if err := rewrite.ValidateDatastoreKey(pk.Datastore); err != nil {
				b.WriteString("refused: " + err.Error() + "\n")
				continue
			}
			out, err := r.Rewrite(pk.Datastore)
			if err != nil {
				b.WriteString("refused: " + err.Error() + "\n")
				continue
			}
			b.WriteString(rewrite.FormatDatastoreKey(out) + "\n")
			if r.Invertible() {
				back, err := r.Invert(out)
				if err != nil {
					t.Errorf("Invert(%s): %v", out, err)
				}
				b.WriteString("  => " + rewrite.FormatDatastoreKey(back) + "\n")
			}
			continue
		}
		out, err := sr.Rewrite(nil, pk.Values)
		if err != nil {
			b.WriteString("refused: " + err.Error() + "\n")
			continue
		}
		b.WriteString(rewrite.FormatKey(out, pk.Bare && len(out) == 1) + "\n")
		if sr.Invertible() {
			back, err := sr.Invert(nil, out)
			if err != nil {
				t.Errorf("Invert(%v): %v", out, err)
			}
			b.WriteString("  => " + rewrite.FormatKey(back, pk.Bare) + "\n")
		}
	}
	return b.String()
}
