package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/viper"

	"github.com/rekeyio/rekey/internal/testkit/golden"
)

// loadFileText writes text to a config file and loads it as the CLI does.
func loadFileText(t *testing.T, text string) error {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rekey.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(path)
	return err
}

// An unknown key no longer hides the rest: LoadFile reports the decoding
// problems and what Validate finds, but not twice for a value it could
// not decode.
func TestLoadFileReportsEveryProblemWithUnknownKeys(t *testing.T) {
	err := loadFileText(t, `
source: {type: jsonl, path: in.jsonl, tabel: x}
target: {type: spanner, project: p, instance: Inst}
rewrite: {strategy: hashprefix, params: {n: 99}}
write:
  batch_bytes: lots
  retry: {initial_backoff: 1 second, max_backoff: 5}
`)
	checkProblems(t, err, []string{
		`source.tabel: unknown key (did you mean "table"?) (known: ...`,
		`write.batch_bytes: must be an integer, got "lots"`,
		`write.retry.initial_backoff: "1 second" is not a duration (e.g. 1s, 500ms)`,
		`write.retry.max_backoff: 5 is not a duration: give it a unit (e.g. 5s, 5ms)`,
		`target.instance: must be 2-64 lowercase letters, digits or hyphens, starting with a letter and not ending with a hyphen, got "Inst"`,
		`target.database: required for a spanner target`,
		`target.table: required for a spanner target`,
		`source.key: required for a jsonl source going to a spanner target: ...`,
		`rewrite.params.n: must be 1..32, got 99`,
	})
}

func TestBadDurationNamesTheValue(t *testing.T) {
	t.Setenv("REKEY_COHORT_SKEW", "ten seconds")
	_, err := load(t, spannerPair+`rewrite: {strategy: none}
write: {retry: {initial_backoff: "1 second", commit_deadline: 0, max_cumulative_backoff: " 20m "}}
`)
	checkProblems(t, err, []string{
		`write.retry.initial_backoff: "1 second" is not a duration (e.g. 1s, 500ms)`,
		`cohort.skew: "ten seconds" is not a duration (e.g. 1s, 500ms)`,
	})
}

func TestUnknownEnvironmentVariables(t *testing.T) {
	t.Setenv("REKEY_WRITE_BATCH_ROW", "7")
	t.Setenv("REKEY_TARGET_TABEL", "X")
	t.Setenv("REKEY_NOTHING_LIKE_IT", "1")
	t.Setenv("REKEY_REWRITE_PARAMS_SEP", "_") // the file names no sep
	t.Setenv("REKEY_REWRITE_PARAMS_N", "8")   // the file names n
	t.Setenv("REKEY_SOURCE_FILTER", "")       // empty: unset, as viper reads it
	t.Setenv("REKEY_JOB_ENDPOINT", "localhost:8099")
	_, err := load(t, spannerPair+`rewrite: {strategy: hashprefix, params: {n: 4}}`)
	checkProblems(t, err, []string{
		`environment variable REKEY_WRITE_BATCH_ROW names no config key (did you mean write.batch_rows (REKEY_WRITE_BATCH_ROWS)?)`,
		`environment variable REKEY_TARGET_TABEL names no config key (did you mean target.table (REKEY_TARGET_TABLE)?)`,
		`environment variable REKEY_NOTHING_LIKE_IT names no config key`,
		`environment variable REKEY_REWRITE_PARAMS_SEP names no config key: the environment overrides only the rewrite parameters the file names; add rewrite.params.sep to the file`,
	})
}

func TestNonConfigEnvIsWhatTheRepositoryReads(t *testing.T) {
	for name, doc := range NonConfigEnv {
		if !strings.HasPrefix(name, EnvPrefix+"_") || doc == "" {
			t.Errorf("NonConfigEnv[%q] = %q: want a REKEY_ name and what reads it", name, doc)
		}
		if k, ok := envKeys(viper.New())[name]; ok {
			t.Errorf("%s is listed as not a config key, but overrides %s", name, k)
		}
	}
}

func TestKeysDifferingOnlyInCaseAreRefused(t *testing.T) {
	_, err := load(t, spannerPair+`
rewrite:
  strategy: chain
  steps:
    - strategy: shard
      params: {n: 4, N: 5}
Write:
  batch_rows: 10
  Batch_Rows: 20
`)
	checkProblems(t, err, []string{
		`rewrite.steps[0].params.n: given twice, as "n" (line 20) and "N" (line 20); keys are case-insensitive, so one would silently replace the other`,
		`write.batch_rows: given twice, as "batch_rows" (line 22) and "Batch_Rows" (line 23); keys are case-insensitive, so one would silently replace the other`,
	})
	// Keys in another case than the reference's are still the same keys.
	c := mustLoad(t, spannerPair+"Rewrite: {Strategy: none}\nWRITE: {Batch_Rows: 20}\n")
	if c.Write.BatchRows != 20 || c.Rewrite.Strategy != "none" {
		t.Errorf("write.batch_rows = %d, rewrite.strategy = %q; want 20, none", c.Write.BatchRows, c.Rewrite.Strategy)
	}
}

// showFile is the config of the config show tests; its comments say
// which value comes from where.
const showFile = "testdata/show/rekey.yaml"

func explainShowFile(t *testing.T) *Effective {
	t.Helper()
	t.Setenv("REKEY_WRITE_BUFFER", "20000")
	t.Setenv("REKEY_REWRITE_STRATEGY", "") // empty: not set
	v, err := NewViper(showFile)
	if err != nil {
		t.Fatal(err)
	}
	flags, err := ApplySets(v, "--set", []string{"write.shards=32", "Cohort.User=UserId"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Explain(v, flags)
	if err != nil {
		t.Fatal(err)
	}
	if e.Problems != nil {
		t.Fatalf("problems: %v", e.Problems)
	}
	return e
}

func TestExplainSaysWhereEachValueCameFrom(t *testing.T) {
	e := explainShowFile(t)
	got := map[string]Setting{}
	for _, s := range e.Settings {
		got[s.Key] = s
	}
	want := []Setting{
		{Key: "source.type", Value: "jsonl", Origin: FromFile, From: showFile + ":3"},
		{Key: "source.columns", Value: []string{"UserId", "LastAccess", "Payload"}, Origin: FromFile, From: showFile + ":6"},
		{Key: "rewrite.steps[1].params.g", Value: 2, Origin: FromFile, From: showFile + ":20"},
		{Key: "write.batch_rows", Value: 500, Origin: FromDefault},
		{Key: "write.batch_bytes", Value: 2000000, Origin: FromFile, From: showFile + ":24"},
		{Key: "write.buffer", Value: 20000, Origin: FromEnv, From: "REKEY_WRITE_BUFFER"},
		{Key: "write.shards", Value: 32, Origin: FromFlag, From: "--set write.shards=32"},
		{Key: "cohort.user", Value: "UserId", Origin: FromFlag, From: "--set cohort.user=UserId"},
		{Key: "write.retry.initial_backoff", Value: "1s", Origin: FromDefault},
		{Key: "write.retry.max_backoff", Value: "30s", Origin: FromFile, From: showFile + ":26"},
		{Key: "ancestors", Value: "all", Origin: FromDefault},
	}
	for _, w := range want {
		if g, ok := got[w.Key]; !ok || !reflect.DeepEqual(g, w) {
			t.Errorf("%s: got %#v, want %#v", w.Key, g, w)
		}
	}
	// Empty values nothing set are left out.
	for _, k := range []string{"source.filter", "target.kind", "keep_original_key", "write.parallelism", "cohort.skew"} {
		if s, ok := got[k]; ok {
			t.Errorf("%s is shown (%+v), but nothing set it", k, s)
		}
	}
	// The settings follow Config's order.
	var keys []string
	for _, s := range e.Settings {
		keys = append(keys, s.Key)
	}
	if i, j := slices.Index(keys, "source.type"), slices.Index(keys, "write.mode"); i < 0 || j < i {
		t.Errorf("order: %q", keys)
	}
}

func TestConfigShowGolden(t *testing.T) {
	e := explainShowFile(t)
	var y, j bytes.Buffer
	if err := WriteYAML(&y, e.Settings, "effective config of "+showFile); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&j, e.Settings); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/show/effective.yaml", y.String())
	golden.Check(t, "testdata/show/effective.json", j.String())
	if !json.Valid(j.Bytes()) {
		t.Error("the JSON output is not valid JSON")
	}
}

// The YAML that config show prints is a config with the same values.
func TestConfigShowYAMLReadsBack(t *testing.T) {
	e := explainShowFile(t)
	var y bytes.Buffer
	if err := WriteYAML(&y, e.Settings, ""); err != nil {
		t.Fatal(err)
	}
	t.Setenv("REKEY_WRITE_BUFFER", "")
	path := filepath.Join(t.TempDir(), "effective.yaml")
	if err := os.WriteFile(path, y.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := LoadFile(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, y.String())
	}
	if !reflect.DeepEqual(back, e.Config) {
		t.Errorf("read back:\n%+v\nwant\n%+v", *back, *e.Config)
	}
}

func TestApplySetsRefusesWhatIsNotAKey(t *testing.T) {
	v, err := NewViper("")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ApplySets(v, "--set", []string{"write.batch_row=7", "write", "rewrite.params.n=4", "write.retry=1s"})
	checkErrors(t, err, []string{
		`--set write.batch_row=7: write.batch_row is not a config key that holds a value (did you mean write.batch_rows?)`,
		`--set write: want KEY=VALUE, e.g. write.batch_rows=100`,
		`--set write.retry=1s: write.retry is not a config key that holds a value`,
	})
}

// checkErrors checks the messages of a joined error, in order.
func checkErrors(t *testing.T, err error, want []string) {
	t.Helper()
	if got := lines(err); !slices.Equal(got, want) {
		t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// Enums lists every key Validate checks against a list of values, with
// the list Validate accepts.
func TestEnumsAreWhatValidateAccepts(t *testing.T) {
	c := &Config{}
	c.SetDefaults()
	for _, s := range settingsOf(c) {
		if s.value.Kind() == reflect.String {
			s.value.SetString("zz-not-a-value")
		}
	}
	seen := map[string]bool{}
	for _, e := range leaves(c.Validate()) {
		var fe *FieldError
		if !errors.As(e, &fe) || !strings.Contains(fe.Msg, "must be one of ") {
			continue
		}
		seen[fe.Path] = true
		allowed, ok := Enums[fe.Path]
		if !ok {
			t.Errorf("%s takes one of a few values but is not in Enums: %s", fe.Path, fe.Msg)
			continue
		}
		if want := "must be one of " + strings.Join(allowed, ", ") + ","; !strings.HasPrefix(fe.Msg, want) {
			t.Errorf("%s: Validate says %q, Enums has %q", fe.Path, fe.Msg, allowed)
		}
	}
	for k := range Enums {
		if !seen[k] {
			t.Errorf("Enums lists %s, which Validate does not check", k)
		}
	}
}
