package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/golden"
)

// checkGolden compares got with testdata/lint/name (-update-golden rewrites it).
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "lint", name), got)
}

func TestLintGolden(t *testing.T) {
	for _, tt := range []struct{ ddl, golden string }{
		{"problems.sql", "problems"},
		{"clean.sql", "clean"},
	} {
		for format, ext := range map[string]string{"text": "txt", "json": "json"} {
			t.Run(tt.golden+"."+ext, func(t *testing.T) {
				out, errs, code := rekey(t, "", "lint", "--ddl", "testdata/lint/"+tt.ddl, "--nodes", "3", "--format", format)
				if code != exitOK || errs != "" {
					t.Fatalf("exit %d, stderr %q", code, errs)
				}
				checkGolden(t, tt.golden+"."+ext, out)
			})
		}
	}
}

// lintJSON is the JSON document `rekey lint --format json` writes.
type lintJSON struct {
	Findings []struct {
		Rule, Severity, Subject, Evidence, Fix, Source string
	} `json:"findings"`
	Summary struct {
		Inputs   []string       `json:"inputs"`
		Findings map[string]int `json:"findings"`
		Worst    string         `json:"worst"`
		FailOn   string         `json:"fail_on"`
		Failed   bool           `json:"failed"`
	} `json:"summary"`
}

func parseLintJSON(t *testing.T, out string) lintJSON {
	t.Helper()
	var doc lintJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not one JSON document: %v\n%s", err, out)
	}
	return doc
}

// ruleSubjects lists a report's findings as sorted "rule subject" lines.
func (d lintJSON) ruleSubjects() []string {
	var out []string
	for _, f := range d.Findings {
		out = append(out, f.Rule+" "+f.Subject)
	}
	slices.Sort(out)
	return out
}

func TestLintJSONCoversEveryProblemOfTheDDL(t *testing.T) {
	out, _, _ := rekey(t, "", "lint", "--ddl", "testdata/lint/problems.sql", "--nodes", "3", "--format", "json")
	doc := parseLintJSON(t, out)
	want := []string{
		"long-key Addresses", "long-key Sessions.SessionTimeUuid", "many-key-columns Addresses",
		"monotonic-index INDEX OrdersByPlacedAt", "monotonic-key Orders.OrderSeq",
		"shards-far-above-nodes Events.ShardId", "shards-far-above-nodes Readings.ShardId",
		"timestamp-first-key UserAccessLogs.LastAccess", "timestamp-key-without-desc UserAccessLogs.LastAccess",
		"uuid-v1 Sessions.SessionTimeUuid",
	}
	if got := doc.ruleSubjects(); !slices.Equal(got, want) {
		t.Errorf("findings\n%q\nwant\n%q", got, want)
	}
	for _, f := range doc.Findings {
		if f.Fix == "" || f.Source == "" || f.Evidence == "" {
			t.Errorf("%s %s: fix, source or evidence missing", f.Rule, f.Subject)
		}
	}
	if doc.Summary.Worst != "error" || doc.Summary.Findings["error"] != 3 || doc.Summary.Failed {
		t.Errorf("summary %+v", doc.Summary)
	}
}

func TestLintFailOn(t *testing.T) {
	for _, tt := range []struct {
		ddl, failOn string
		code        int
	}{
		{"problems.sql", "error", exitFindings},
		{"problems.sql", "warning", exitFindings},
		{"problems.sql", "info", exitFindings},
		{"clean.sql", "info", exitOK},
		{"problems.sql", "", exitOK},
	} {
		args := []string{"lint", "--ddl", "testdata/lint/" + tt.ddl}
		if tt.failOn != "" {
			args = append(args, "--fail-on", tt.failOn)
		}
		out, errs, code := rekey(t, "", args...)
		if code != tt.code {
			t.Errorf("%s --fail-on %q: exit %d, want %d (exitCode in app.go maps an error's ExitCode method)\nstderr: %s", tt.ddl, tt.failOn, code, tt.code, errs)
		}
		if code == exitFindings && (!strings.Contains(errs, "findings at or above "+tt.failOn) || !strings.Contains(out, "fails --fail-on "+tt.failOn)) {
			t.Errorf("--fail-on %s: stdout %q\nstderr %q", tt.failOn, out, errs)
		}
	}
	// Only the findings at or above the threshold are counted.
	_, err := runLintArgs(t, "--ddl", "testdata/lint/problems.sql", "--fail-on", "error")
	var fe findingsError
	if !errors.As(err, &fe) || fe.n != 3 || fe.ExitCode() != exitFindings {
		t.Errorf("error %v (%+v), want 3 findings at or above error", err, fe)
	}
}

func runLintArgs(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb strings.Builder
	err := run(context.Background(), append([]string{"lint"}, args...), strings.NewReader(""), &out, &errb)
	return out.String(), err
}

func TestLintUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "give --ddl FILE, --database PATH, -c FILE or --datastore"},
		{[]string{"-c", "x.yaml", "--ddl", "y.sql"}, "do not combine it"},
		{[]string{"--ddl", "testdata/lint/clean.sql", "--format", "yaml"}, "--format must be text or json"},
		{[]string{"--ddl", "testdata/lint/clean.sql", "--fail-on", "fatal"}, `severity "fatal"`},
		{[]string{"--datastore", "--project", "p"}, "--datastore needs --kind K"},
		{[]string{"--kind", "K", "--ddl", "testdata/lint/clean.sql"}, "are for --datastore"},
		{[]string{"--database", "mydb"}, "want projects/P/instances/I/databases/D"},
		{[]string{"--ddl", "testdata/lint/missing.sql"}, "missing.sql"},
		{[]string{"--ddl", "testdata/lint/clean.sql", "--nodes", "-1"}, "must not be negative"},
		{[]string{"--ddl", "testdata/lint/clean.sql", "extra"}, "unexpected arguments"},
	} {
		_, err := runLintArgs(t, tt.args...)
		if !isUsage(err) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("lint %q: %v, want a usage error containing %q", tt.args, err, tt.want)
		}
	}
}

func TestLintBadDDLSaysWhere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.sql")
	if err := os.WriteFile(path, []byte("CREATE TABLE T (A INT64) PRIMARY KEY (A);\nCREATE TABLE U (A INT64) PRIMARY KEY (B)"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := runLintArgs(t, "--ddl", path)
	if !isUsage(err) || !strings.Contains(err.Error(), path+": statement 2: table U: key column B") {
		t.Errorf("error %v", err)
	}
}

// A config whose Spanner source names its DDL file is linted offline.
func TestLintConfigWithSourceSchema(t *testing.T) {
	ddl, err := filepath.Abs("testdata/lint/problems.sql")
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeTestConfig(t, fmt.Sprintf(`
source:
  type: spanner
  project: demo-project
  instance: demo
  database: logs
  table: UserAccessLogs
  schema: %s
target:
  type: jsonl
  path: %%s/out.jsonl
rewrite:
  strategy: swap
  params:
    order: [UserId]
dead_letter: %%s/dead
`, ddl))
	out, errs, code := rekey(t, "", "lint", "-c", cfg, "--format", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	doc := parseLintJSON(t, out)
	if len(doc.Summary.Inputs) != 1 || !strings.HasPrefix(doc.Summary.Inputs[0], "source DDL file "+ddl+": 7 tables, 2 indexes") {
		t.Errorf("inputs %q", doc.Summary.Inputs)
	}
	if !slices.Contains(doc.ruleSubjects(), "timestamp-first-key UserAccessLogs.LastAccess") {
		t.Errorf("findings %q", doc.ruleSubjects())
	}
}

// stripComments drops the -- comment lines of a DDL file and splits it
// into statements, for the emulator.
func ddlStatements(t *testing.T, file string) []string {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(text), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			lines = append(lines, l)
		}
	}
	var stmts []string
	for _, s := range strings.Split(strings.Join(lines, "\n"), ";") {
		if s = strings.TrimSpace(s); s != "" {
			stmts = append(stmts, s)
		}
	}
	return stmts
}

// The DDL the emulator returns (GetDatabaseDdl, in its own rendering)
// gives the same findings as the file it was created from.
func TestLintSpannerDatabaseOnTheEmulator(t *testing.T) {
	_, path := emulator.TestDBPath(t, ddlStatements(t, "testdata/lint/problems.sql")...)
	out, errs, code := rekey(t, "", "lint", "--database", path, "--nodes", "3", "--format", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	fromFile, _, _ := rekey(t, "", "lint", "--ddl", "testdata/lint/problems.sql", "--nodes", "3", "--format", "json")
	got, want := parseLintJSON(t, out), parseLintJSON(t, fromFile)
	if !slices.Equal(got.ruleSubjects(), want.ruleSubjects()) {
		t.Errorf("from the database:\n%q\nfrom the file:\n%q", got.ruleSubjects(), want.ruleSubjects())
	}
	if want := "Spanner database " + path + ": 7 tables, 2 indexes"; !slices.Equal(got.Summary.Inputs, []string{want}) {
		t.Errorf("inputs %q, want %q", got.Summary.Inputs, want)
	}
}

// A config's shard rewrite is checked against --nodes: for the target
// table in the target's DDL, and for a target database not created yet.
func TestLintConfigShardsOnTheEmulator(t *testing.T) {
	_, path := emulator.TestDBPath(t, "CREATE TABLE Logs (ShardId INT64 NOT NULL, UserId STRING(36) NOT NULL) PRIMARY KEY (ShardId, UserId)")
	parts := strings.Split(path, "/") // projects/P/instances/I/databases/D
	for _, tt := range []struct{ database, input string }{
		{parts[5], "target database " + path + ": 1 table, 0 indexes"},
		{"not-created-yet", "target database " + strings.Join(parts[:5], "/") + "/not-created-yet: not found, not linted"},
	} {
		cfg := writeTestConfig(t, fmt.Sprintf(`
source:
  type: jsonl
  path: %%s/in.jsonl
  key: UserId STRING(36)
target:
  type: spanner
  project: %s
  instance: %s
  database: %s
  table: Logs
rewrite:
  strategy: shard
  params:
    n: 64
dead_letter: %%s/dead
`, parts[1], parts[3], tt.database))
		out, errs, code := rekey(t, "", "lint", "-c", cfg, "--nodes", "2", "--format", "json", "--fail-on", "warning")
		if code != exitFindings {
			t.Fatalf("%s: exit %d, want %d: %s\n%s", tt.database, code, exitFindings, errs, out)
		}
		doc := parseLintJSON(t, out)
		if !slices.Equal(doc.Summary.Inputs, []string{tt.input}) {
			t.Errorf("%s: inputs %q, want %q", tt.database, doc.Summary.Inputs, tt.input)
		}
		if got := doc.ruleSubjects(); !slices.Equal(got, []string{"shards-far-above-nodes Logs.ShardId"}) ||
			!strings.Contains(doc.Findings[0].Evidence, "64 shards (rewrite shard n=64 of the config) for 2 nodes") {
			t.Errorf("%s: findings %+v", tt.database, doc.Findings)
		}
	}
}

func TestLintDatastoreOnTheEmulator(t *testing.T) {
	c := emulator.TestDatastore(t)
	ctx := context.Background()
	ns := emulator.UniqueNamespace(t.Name())
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	var keys []*datastore.Key
	var props []datastore.PropertyList
	for i := 1; i <= 40; i++ {
		k := datastore.NameKey("Customer", fmt.Sprintf("Customer%d", i), nil)
		k.Namespace = ns
		keys = append(keys, k)
		props = append(props, datastore.PropertyList{
			{Name: "Created", Value: t0.Add(time.Duration(i) * time.Minute)},
			{Name: "Note", Value: "x", NoIndex: true},
			{Name: "Updated", Value: t0.Add(time.Duration(i) * time.Hour), NoIndex: true},
		})
		o := datastore.IDKey("Order", int64(i), nil)
		o.Namespace = ns
		keys = append(keys, o)
		props = append(props, datastore.PropertyList{{Name: "Total", Value: int64(i * 7 % 13)}})
	}
	if _, err := c.PutMulti(ctx, keys, props); err != nil {
		t.Fatal(err)
	}
	project := emulator.DatastoreProject()
	for _, tt := range []struct {
		sample string
		how    string
	}{{"0", "all 40 entities"}, {"1000", "all 40 entities"}, {"25", "the first 25 entities in key order (no __scatter__ index here: not a random sample) of 40"}} {
		out, errs, code := rekey(t, "", "lint", "--datastore", "--project", project, "--namespace", ns,
			"--kind", "Customer", "--kind", "Order", "--sample", tt.sample, "--format", "json")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errs)
		}
		doc := parseLintJSON(t, out)
		for _, in := range doc.Summary.Inputs {
			if !strings.Contains(in, tt.how) {
				t.Errorf("--sample %s: input %q, want it to say %q", tt.sample, in, tt.how)
			}
		}
		got := doc.ruleSubjects()
		// Updated is not indexed, Total not a sequence; the first 25
		// names in key order (Customer1, Customer10…19, Customer2, …)
		// are still dense in 1..31.
		want := []string{"monotonic-indexed-property Customer.Created", "monotonic-key kind Order", "sequential-names kind Customer"}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("--sample %s: findings %q, want %q", tt.sample, got, want)
		}
	}
	// The kind of a config's Datastore source is sampled the same way.
	cfg := writeTestConfig(t, fmt.Sprintf(`
source:
  type: datastore
  project: %s
  namespace: %s
  kind: Customer
target:
  type: jsonl
  path: %%s/out.jsonl
rewrite:
  strategy: hashprefix
dead_letter: %%s/dead
`, project, ns))
	out, errs, code := rekey(t, "", "lint", "-c", cfg, "--format", "json")
	if code != exitOK {
		t.Fatalf("-c: exit %d: %s", code, errs)
	}
	doc := parseLintJSON(t, out)
	want := []string{"monotonic-indexed-property Customer.Created", "sequential-names kind Customer"}
	if got := doc.ruleSubjects(); !slices.Equal(got, want) || len(doc.Summary.Inputs) != 1 ||
		doc.Summary.Inputs[0] != "Datastore kind Customer (namespace "+ns+"): all 40 entities" {
		t.Errorf("-c: findings %q, inputs %q", got, doc.Summary.Inputs)
	}
}
