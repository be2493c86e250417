package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const showConfig = `source: {type: jsonl, path: gs://b/in.jsonl, key: Id INT64}
target: {type: spanner, project: p, instance: inst, database: db, table: T}
rewrite: {strategy: hashprefix, params: {n: 6}}
write:
  batch_rows: 100
`

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rekey.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigShowYAML(t *testing.T) {
	file := writeConfig(t, showConfig)
	t.Setenv("REKEY_WRITE_BUFFER", "20000")
	out, errs, code := rekey(t, "", "config", "show", "-c", file, "--set", "write.shards=32")
	if code != exitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, line := range []string{
		"  type: jsonl # file " + file + ":1\n",
		"    n: 6 # file " + file + ":3\n",
		"  batch_rows: 100 # file " + file + ":5\n",
		"  buffer: 20000 # env REKEY_WRITE_BUFFER\n",
		"  shards: 32 # flag --set write.shards=32\n",
		"  batch_mutations: 5000 # default\n",
		"    max_cumulative_backoff: 15m # default\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("output lacks %q:\n%s", line, out)
		}
	}
}

func TestConfigShowJSON(t *testing.T) {
	file := writeConfig(t, showConfig)
	t.Setenv("REKEY_WRITE_BATCH_ROWS", "250")
	out, errs, code := rekey(t, "", "config", "show", "-c", file, "--format", "json")
	if code != exitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	var settings []struct {
		Key    string `json:"key"`
		Value  any    `json:"value"`
		Source string `json:"source"`
		From   string `json:"from"`
	}
	if err := json.Unmarshal([]byte(out), &settings); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	got := map[string]string{}
	for _, s := range settings {
		got[s.Key] = s.Source + " " + s.From
	}
	for k, want := range map[string]string{
		"write.batch_rows":                 "env REKEY_WRITE_BATCH_ROWS",
		"rewrite.params.n":                 "file " + file + ":3",
		"write.mode":                       "default ",
		"target.table":                     "file " + file + ":2",
		"cohort.buckets":                   "default ",
		"rewrite.strategy":                 "file " + file + ":3",
		"write.adaptive_throttle.disabled": "",
		"write.parallelism":                "",
	} {
		if got[k] != want {
			t.Errorf("%s: %q, want %q", k, got[k], want)
		}
	}
}

// A config with problems is still shown; the problems follow, all of
// them, and the exit code is 2.
func TestConfigShowReportsEveryProblem(t *testing.T) {
	file := writeConfig(t, `source: {type: jsonl, path: in.jsonl, tabel: x}
target: {type: spanner, project: p}
rewrite: {strategy: hashprefix}
write: {batch_rows: 10, Batch_Rows: 20, retry: {initial_backoff: 1 second}}
`)
	t.Setenv("REKEY_WRITE_BATCH_ROW", "7")
	out, errs, code := rekey(t, "", "config", "show", "-c", file)
	if code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitUsage, errs)
	}
	if !strings.Contains(out, "  type: jsonl # file ") {
		t.Errorf("the config is not shown:\n%s", out)
	}
	for _, want := range []string{
		`source.tabel: unknown key (did you mean "table"?)`,
		`write.batch_rows: given twice, as "batch_rows" (line 4) and "Batch_Rows" (line 4)`,
		`write.retry.initial_backoff: "1 second" is not a duration (e.g. 1s, 500ms)`,
		`environment variable REKEY_WRITE_BATCH_ROW names no config key (did you mean write.batch_rows (REKEY_WRITE_BATCH_ROWS)?)`,
		`target.instance: required for a spanner target`,
		`source.key: required for a jsonl source going to a spanner target`,
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	// validate reports the same problems.
	_, verrs, vcode := rekey(t, "", "validate", "-c", file)
	if vcode != exitUsage || !strings.Contains(verrs, "REKEY_WRITE_BATCH_ROW names no config key") || !strings.Contains(verrs, "target.instance: required") {
		t.Errorf("validate: exit %d, stderr:\n%s", vcode, verrs)
	}
}

func TestConfigShowUsage(t *testing.T) {
	file := writeConfig(t, showConfig)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"config"}, "config: no subcommand given"},
		{[]string{"config", "shwo"}, `unknown command "shwo"`},
		{[]string{"config", "show"}, "config show: -c FILE is required"},
		{[]string{"config", "show", "-c", file, "--format", "toml"}, `--format must be yaml or json, got "toml"`},
		{[]string{"config", "show", "-c", file, "--set", "write.batch_row=1"}, "write.batch_row is not a config key that holds a value (did you mean write.batch_rows?)"},
		{[]string{"config", "show", "-c", filepath.Join(t.TempDir(), "none.yaml")}, "none.yaml"},
	} {
		_, errs, code := rekey(t, "", tt.args...)
		if code != exitUsage || !strings.Contains(errs, tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tt.args, code, errs, exitUsage, tt.want)
		}
	}
}
