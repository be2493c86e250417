package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rekeyio/rekey/internal/testkit/golden"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

var columnPrefix = regexp.MustCompile(`column \d+: `)

// reasonAfterColumn is an error's text from its "column N: " on, without
// the column.
func reasonAfterColumn(t *testing.T, msg string) string {
	t.Helper()
	loc := columnPrefix.FindStringIndex(msg)
	if loc == nil {
		t.Fatalf("no column in %q", msg)
	}
	return strings.TrimSpace(strings.SplitN(msg[loc[1]:], "\n", 2)[0])
}

// A string that is not valid UTF-8 is refused with the reason `rekey run`'s
// JSON Lines reader gives for the same string; U+FFFD itself is a key.
func TestRewriteRefusesInvalidUTF8AsRunDoes(t *testing.T) {
	for _, s := range []string{"\xff", "\xfe", "ab\xc3", "\xed\xa0\x80"} {
		_, perr := record.ParseJSON([]byte(`{"__key__": {"path": ["K", "` + s + `"]}}`))
		if perr == nil {
			t.Fatalf("the JSON Lines reader accepts %q", s)
		}
		want := reasonAfterColumn(t, perr.Error())
		for _, line := range []string{`"` + s + `"`, `{"path":["K","` + s + `"]}`, `[1,"` + s + `"]`} {
			out, errs, code := rekey(t, line+"\n", "rewrite", "--strategy", "hashprefix")
			if code != exitFailure || out != "" || !strings.HasPrefix(errs, "line 1: column ") || reasonAfterColumn(t, errs) != want {
				t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and %q", line, code, out, errs, want)
			}
		}
	}
	out, errs, code := rekey(t, "\"\xff\"\n\"\xfe\"\n\"\xef\xbf\xbd\"\n", "rewrite", "--strategy", "hashprefix", "--keep-going")
	if code != exitFailure || out != "\n\n\"9b75-\ufffd\"\n" || strings.Count(errs, "not valid UTF-8") != 2 {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestRewriteIntegerBeyondINT64IsAnOverflow(t *testing.T) {
	for _, tc := range []struct {
		line string
		args []string
		want string
	}{
		{"100000000000000000000000000000", nil, "line 1: value 1: integer 100000000000000000000000000000 overflows INT64"},
		{"[1, 100000000000000000000000000000]", nil, "line 1: value 2: integer 100000000000000000000000000000 overflows INT64"},
		{"-9223372036854775809", []string{"--key", "Id INT64"}, "line 1: column Id: integer -9223372036854775809 overflows INT64"},
		{`{"path":["K",9223372036854775808]}`, nil, "line 1: path item 2: id: integer 9223372036854775808 overflows INT64"},
	} {
		out, errs, code := rekey(t, tc.line+"\n", append([]string{"rewrite", "--strategy", "none"}, tc.args...)...)
		if code != exitFailure || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want %q", tc.line, tc.args, code, out, errs, tc.want)
		}
	}
	// A float stays a float, and the largest INT64 an INT64.
	out, errs, code := rekey(t, "1e29\n9223372036854775807\n", "rewrite", "--strategy", "none")
	if code != 0 || out != "1e+29\n9223372036854775807\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestRewriteRefusesTextAfterTheKey(t *testing.T) {
	for _, line := range []string{`"a" "b"`, `1 2`, `[1] x`, `[1] ]`, `1}`, `{"path":["K",1]} {}`, `"a",`} {
		for _, args := range [][]string{{"--strategy", "none"}, {"--strategy", "none", "--key", "A STRING(MAX)"}} {
			out, errs, code := rekey(t, line+"\n", append([]string{"rewrite"}, args...)...)
			if code != exitFailure || out != "" || !strings.HasPrefix(errs, "line 1: unexpected text after the key: ") {
				t.Errorf("%s %v: exit %d, stdout %q, stderr %q", line, args, code, out, errs)
			}
		}
	}
}

func TestRewriteHintsToQuoteAString(t *testing.T) {
	_, errs, code := rekey(t, "Customer1\n", "rewrite", "--strategy", "hashprefix")
	want := `line 1: not a JSON value; a string key is written in double quotes: "Customer1"` + "\n"
	if code != exitFailure || !strings.HasPrefix(errs, want) {
		t.Errorf("exit %d, stderr %q; want %q", code, errs, want)
	}
}

// Problems of the command itself are one usage error before any line is
// read: exit 2, nothing on stdout, no "line N:" message.
func TestRewriteCommandProblemsAreOneUsageError(t *testing.T) {
	t.Setenv("SPANNER_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	uuidCfg := writeTestConfig(t, `
source: {type: datastore, project: p, kind: Customer}
target: {type: datastore, project: p, namespace: v2, kind: Customer}
rewrite: {strategy: uuid}
keep_original_key: OriginalKey
`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--strategy", "hashprefix", "--invert"}, `--invert needs to know the keys it reads: --key "Col TYPE, ..." (the source key schema) for Spanner keys, or --store datastore`},
		{[]string{"--strategy", "hashprefix", "--invert", "--store", "spanner"}, "--invert needs to know the keys it reads"},
		{[]string{"--strategy", "uuid", "--invert", "--key", "K STRING(MAX)"}, "--invert: strategy uuid is not invertible"},
		{[]string{"--strategy", "uuid", "--invert", "--store", "datastore"}, "--invert: strategy uuid is not invertible"},
		{[]string{"-c", uuidCfg, "--invert"}, "--invert: strategy uuid is not invertible (see 'rekey strategies'); the config keeps each record's old key in OriginalKey, which a key alone does not carry"},
		{[]string{"-c", "../../configs/datastore-to-spanner.yaml", "--invert"}, "--invert: the rewrite goes from datastore to spanner; keys are inverted within one store only"},
		{[]string{"--strategy", "hashprefix", "--param", "n=40"}, "rewrite: params.n: must be 1..32, got 40"},
		{[]string{"--strategy", "hashprefix", "--param", "bogus=1"}, "params.bogus: unknown parameter"},
		{[]string{"--strategy", "shard", "--store", "datastore"}, "shard: Datastore keys not supported"},
		{[]string{"--strategy", "hashprefix", "--key", "A INT65"}, "rewrite: --key: "},
		{[]string{"--strategy", "hashprefix", "--store", "bigtable"}, `--store must be spanner or datastore, got "bigtable"`},
		{[]string{"--strategy", "hashprefix", "--store", "datastore", "--key", "A INT64"}, "--key is a Spanner key schema; it does not go with --store datastore"},
		{[]string{"-c", uuidCfg, "--strategy", "hashprefix"}, "-c FILE and --strategy together"},
		{[]string{"-c", uuidCfg, "--param", "n=4"}, "-c FILE and --param together"},
		{[]string{"-c", uuidCfg, "--key", "A INT64"}, "-c FILE and --key together"},
		{[]string{"-c", uuidCfg, "--table", "X"}, "-c FILE and --table together"},
		{[]string{"-c", filepath.Join(t.TempDir(), "missing.yaml")}, "missing.yaml"},
	} {
		out, errs, code := rekey(t, "1\n\"a\"\n{\"path\":[\"K\",1]}\n", append([]string{"rewrite"}, tc.args...)...)
		if code != exitUsage || out != "" || !strings.HasPrefix(errs, "rekey: ") || strings.Contains(errs, "line ") || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one error with %q", tc.args, code, out, errs, tc.want)
		}
	}
}

// Without --keep-going the first line that fails stops the command; the
// lines before it are printed, an empty line as an empty line.
func TestRewriteStopsAtTheFirstFailedLine(t *testing.T) {
	out, errs, code := rekey(t, "1\n\n\"x\"\n[1,\n2\n", "rewrite", "--strategy", "hashprefix")
	wantErr := "line 4: not JSON: unexpected EOF\nrekey: stopped at line 4 (--keep-going goes on past lines that fail): some inputs failed\n"
	if code != exitFailure || out != "\"c4ca-1\"\n\n\"9dd4-x\"\n" || errs != wantErr {
		t.Errorf("exit %d, stdout %q, stderr %q; want stderr %q", code, out, errs, wantErr)
	}
}

// keepGoingInputs cover each way a line can fail, between lines that do
// not, Spanner and Datastore keys mixed.
var keepGoingInputs = []string{
	`"Customer1"`,
	`Customer1`,
	`42`,
	`100000000000000000000000000000`,
	`1e29`,
	"\"\xff\"",
	"\"\xef\xbf\xbd\"",
	`"a" "b"`,
	`[1] x`,
	`[1] ]`,
	`[1,`,
	``,
	`[1, "u1"]`,
	`[1, [2]]`,
	`[null]`,
	`{"path":["Customer","Customer2","Order",7]}`,
	`{"path":["Customer","a/b"]}`,
	`{"path":["Customer",0]}`,
	`{"path":["Customer"]}`,
	`{"path":["Customer","c"],"kind":"x"}`,
	`{"path":["__x__","c"]}`,
	`"last"`,
}

// TestRewriteKeepGoingGolden: with --keep-going, stdout has one line per
// input line, so `paste` puts each key next to its rewrite; the golden
// file is that paste and the messages on stderr.
func TestRewriteKeepGoingGolden(t *testing.T) {
	args := []string{"rewrite", "--strategy", "hashprefix", "--keep-going"}
	in := strings.Join(keepGoingInputs, "\n") + "\n"
	out, errs, code := rekey(t, in, args...)
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	outLines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(outLines) != len(keepGoingInputs) {
		t.Fatalf("%d output lines for %d input lines:\n%s", len(outLines), len(keepGoingInputs), out)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "$ rekey %s  (input | output; input that is not UTF-8 in Go quotes)\n", strings.Join(args, " "))
	for i, l := range keepGoingInputs {
		if !utf8.ValidString(l) {
			l = strconv.Quote(l)
		}
		fmt.Fprintf(&b, "%-46s | %s\n", l, outLines[i])
	}
	b.WriteString("$ stderr, exit 1\n")
	b.WriteString(errs)
	golden.Check(t, filepath.Join("testdata", "rewrite", "keep-going.txt"), b.String())
}

// rewriteCLI runs `rekey rewrite` on lines and returns its output lines,
// failing the test on a non-zero exit.
func rewriteCLI(t *testing.T, lines []string, args ...string) []string {
	t.Helper()
	out, errs, code := rekey(t, strings.Join(lines, "\n")+"\n", append([]string{"rewrite"}, args...)...)
	if code != 0 {
		t.Fatalf("rewrite %v: exit %d: %s", args, code, errs)
	}
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

// pipelineEntityKeys rewrites entities with the given keys, with a
// property each, as `rekey run` does: through the rekeyer of the job the
// config resolves to.
func pipelineEntityKeys(t *testing.T, config string, keys []string) []string {
	t.Helper()
	cfg, err := loadConfig(config, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	job, err := migration.ResolveOffline(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rk, err := job.Spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, text := range keys {
		pk, err := rewrite.ParseKey(text, nil)
		if err != nil {
			t.Fatal(err)
		}
		rec := record.Record{Key: &pk.Datastore, Table: pk.Datastore.Leaf().Kind, Fields: []record.Field{{Name: "Name", Value: record.String("Ann")}}}
		if err := rk.Rewrite(&rec); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		out = append(out, rewrite.FormatDatastoreKey(*rec.Key))
	}
	return out
}

// -c FILE rewrites with the config's rewrite: here a chain (hash prefix,
// then generation, on the root) and a move to namespace gen3, as the
// pipeline's rekeyer does; --invert maps the keys back.
func TestRewriteWithAConfigsChain(t *testing.T) {
	const cfg = "../../configs/chain.yaml"
	keys := []string{`{"path":["Customer","Customer1"]}`, `{"path":["Customer","Customer1","Order",5]}`, `{"path":["Customer",7]}`}
	got := rewriteCLI(t, keys, "-c", cfg)
	want := pipelineEntityKeys(t, cfg, keys)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rewrite -c:\n%s\nthe pipeline's rekeyer:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got[0] != `{"path":["Customer","3-becf-Customer1"],"namespace":"gen3"}` {
		t.Errorf("Customer1 -> %s", got[0])
	}
	// The chain's steps one after the other, without the config, give the
	// same path.
	steps := rewriteCLI(t, rewriteCLI(t, keys, "--strategy", "hashprefix", "--param", "n=4", "--param", "elements=root"),
		"--strategy", "generation", "--param", "g=3", "--param", "as=prefix", "--param", "elements=root")
	for i := range keys {
		if strings.Replace(got[i], `,"namespace":"gen3"`, "", 1) != steps[i] {
			t.Errorf("%s: -c gives %s, the steps %s", keys[i], got[i], steps[i])
		}
	}
	if back := rewriteCLI(t, got, "-c", cfg, "--invert"); strings.Join(back, "\n") != strings.Join(keys, "\n") {
		t.Errorf("invert: %v, want %v", back, keys)
	}
	_, errs, code := rekey(t, "[1]\n", "rewrite", "-c", cfg)
	if code != exitFailure || !strings.Contains(errs, "line 1: a Spanner key, but the keys read are Datastore keys") {
		t.Errorf("a Spanner key: exit %d, %s", code, errs)
	}
}

// A Spanner source's key comes from source.schema (or the database); the
// config's rewrite is what --strategy, --param and --key would give.
func TestRewriteWithAConfigsSpannerSchema(t *testing.T) {
	cfg := writeTestConfig(t, `
source: {type: spanner, project: p, instance: rekey, database: demo, table: Logs, schema: "%s/schema.sql"}
target: {type: jsonl, path: "%s/out.jsonl"}
rewrite: {strategy: shard, params: {n: 4, mode: abs, columns: [UserId]}}
`)
	ddl := "CREATE TABLE Logs (\n  UserId STRING(36) NOT NULL,\n  Seq INT64 NOT NULL,\n  V STRING(MAX),\n) PRIMARY KEY (UserId, Seq);\n"
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfg), "schema.sql"), []byte(ddl), 0o644); err != nil {
		t.Fatal(err)
	}
	keys := []string{`["u1", 5]`, `["u2", -1]`, `["日本語", 9223372036854775807]`}
	got := rewriteCLI(t, keys, "-c", cfg)
	want := rewriteCLI(t, keys, "--strategy", "shard", "--param", "n=4", "--param", "mode=abs", "--param", "columns=UserId", "--key", "UserId STRING(36), Seq INT64")
	if strings.Join(got, "\n") != strings.Join(want, "\n") || !strings.HasPrefix(got[0], "[") || !strings.HasSuffix(got[0], `,"u1",5]`) {
		t.Errorf("-c: %v\nflags: %v", got, want)
	}
	_, errs, code := rekey(t, "[\"u1\"]\n{\"path\":[\"K\",1]}\n", "rewrite", "-c", cfg, "--keep-going")
	if code != exitFailure ||
		!strings.Contains(errs, "line 1: key has 1 values, the key schema PRIMARY KEY (UserId, Seq) has 2 columns") ||
		!strings.Contains(errs, "line 2: a Datastore key, but the keys read are Spanner keys (UserId STRING(36), Seq INT64)") {
		t.Errorf("exit %d, %s", code, errs)
	}
}

// A Datastore source going to Spanner: Datastore keys in, the Spanner
// keys the rows get out.
func TestRewriteWithAConfigFromDatastoreToSpanner(t *testing.T) {
	t.Setenv("SPANNER_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	got := rewriteCLI(t, []string{`{"path":["Customer",5]}`, `{"path":["Customer",-3]}`}, "-c", "../../configs/datastore-to-spanner.yaml")
	want := rewriteCLI(t, []string{`[5]`, `[-3]`}, "--strategy", "bitreverse", "--param", "preserve_sign=true", "--key", "CustomerId INT64")
	if strings.Join(got, "\n") != strings.Join(want, "\n") || got[0] == "[5]" {
		t.Errorf("-c: %v, flags: %v", got, want)
	}
}

// A line too long for a key says which and how long a line may be (it
// said "after line 0: bufio.Scanner: token too long").
func TestRewriteLineTooLong(t *testing.T) {
	in := "\"a\"\n\"" + strings.Repeat("x", maxKeyLine+1) + "\"\n"
	out, errs, code := rekey(t, in, "rewrite", "--strategy", "hashprefix")
	if code == exitOK || !strings.Contains(errs, "line 2 is longer than 16 MiB") || strings.Count(out, "\n") != 1 {
		t.Errorf("exit %d, stdout %.80q, stderr %.300q; want line 1 mapped and line 2 named as too long", code, out, errs)
	}
}

// A Spanner source whose config gives source.key is rewritten offline
// (README step 1, before any store is up): the key is the config's, no
// store is asked. Without source.key the error says what the rewrite
// needs.
func TestRewriteWithAConfigFromSpannerOffline(t *testing.T) {
	t.Setenv("SPANNER_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	key := `["2024-01-31T12:00:00Z","u1"]`
	got := rewriteCLI(t, []string{key}, "-c", "../../configs/spanner-to-spanner.yaml")
	want := rewriteCLI(t, []string{key}, "--strategy", "swap", "--param", "order=UserId", "--key", "LastAccess TIMESTAMP, UserId STRING(MAX)")
	if strings.Join(got, "\n") != strings.Join(want, "\n") || got[0] == key {
		t.Errorf("-c: %v, flags: %v", got, want)
	}
	noKey := writeTestConfig(t, `
source: {type: spanner, project: p, instance: inst, database: db, table: Logs}
target: {type: spanner, project: p, instance: inst, database: db, table: Logs2}
rewrite: {strategy: hashprefix}
`)
	_, errs, code := rekey(t, key+"\n", "rewrite", "-c", noKey)
	if code == exitOK || !strings.Contains(errs, "the rewrite needs the source table's key, which the config does not give (source.key) and the source database did not answer with") {
		t.Errorf("without source.key: exit %d, %s", code, errs)
	}
}
