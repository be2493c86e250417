package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/internal/earlysignal"
)

// TestMain serves as a job's SDK worker when a worker pool starts this
// test binary as one (beamtest.UseWorkerPool: the job stages the
// launching binary, as rekey's own main does), and runs the tests
// otherwise.
//
// With GO_TEST_REKEY_MAIN=1 it is the rekey command itself, its
// arguments the process's, through main: with main's signal handling and
// exit codes (interruptAt). Otherwise the signals rekey catches from the
// start (earlysignal) keep their default action.
func TestMain(m *testing.M) {
	if isWorker(os.Args[1:]) {
		earlysignal.Release()
		flag.Parse()
		beam.Init() // runs the worker harness and exits
		return
	}
	if os.Getenv(mainEnv) == "1" {
		main()
		return
	}
	earlysignal.Release()
	os.Exit(m.Run())
}

// mainEnv makes the test binary run rekey's main (TestMain).
const mainEnv = "GO_TEST_REKEY_MAIN"

// rekey runs the CLI in-process and returns stdout, stderr and the exit code.
func rekey(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	code := exitCode(err, &errb)
	return out.String(), errb.String(), code
}

func TestStrategiesListsEveryStrategy(t *testing.T) {
	out, _, code := rekey(t, "", "strategies")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, s := range []string{"none", "hashprefix", "shard", "bitreverse", "uuid", "swap", "reverse", "bucket", "generation", "chain"} {
		if !strings.Contains(out, "\n"+s+" ") {
			t.Errorf("strategies output lacks %s:\n%s", s, out)
		}
	}
}

func TestRewriteShard(t *testing.T) {
	in := "[\"2024-01-31T12:00:00Z\",\"u1\"]\n[\"2024-01-31T12:00:01Z\",\"u2\"]\n"
	out, errs, code := rekey(t, in, "rewrite", "--strategy", "shard", "--param", "n=10", "--key", "LastAccess TIMESTAMP, UserId STRING(MAX)")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	// Same figures as testdata/golden/shard-signed.txt.
	want := "[-1,\"2024-01-31T12:00:00Z\",\"u1\"]\n[-8,\"2024-01-31T12:00:01Z\",\"u2\"]\n"
	if out != want {
		t.Errorf("got\n%swant\n%s", out, want)
	}
}

func TestRewriteBadLinesAreReportedAndTheRestProcessed(t *testing.T) {
	in := strings.Join([]string{
		`"Customer1"`,
		`not json`,
		`{"path":["Customer","a/b"]}`,
		`{"path":["Customer","Customer2"]}`,
		`[1, [2]]`,
		`{"path":["Customer",0]}`,
		``,
		`7`,
	}, "\n")
	out, errs, code := rekey(t, in, "rewrite", "--strategy", "hashprefix", "--keep-going")
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	// One output line per input line: failed and empty lines stay empty.
	wantOut := "\"becf-Customer1\"\n\n\n{\"path\":[\"Customer\",\"0b02-Customer2\"]}\n\n\n\n\"8f14-7\"\n"
	if out != wantOut {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, wantOut)
	}
	for _, want := range []string{`line 2: not a JSON value; a string key is written in double quotes: "not json"`, `line 3: key Customer:"a/b": path element 1 (Customer:"a/b"): name contains "/"`, "line 5: value 2", "line 6: ", "id is 0", "4 of 8 lines failed"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
}

func TestRewriteInvertRoundTrip(t *testing.T) {
	keys := "[\"2024-01-31T12:00:00Z\",\"u1\"]\n"
	args := []string{"rewrite", "--strategy", "shard", "--param", "n=4", "--param", "mode=abs", "--key", "LastAccess TIMESTAMP, UserId STRING(MAX)"}
	out, _, code := rekey(t, keys, args...)
	if code != 0 {
		t.Fatal(code)
	}
	back, errs, code := rekey(t, out, append(args, "--invert")...)
	if code != 0 || back != keys {
		t.Errorf("invert: %q (exit %d, %s), want %q", back, code, errs, keys)
	}
	_, errs, code = rekey(t, "\"x\"\n", "rewrite", "--strategy", "uuid", "--invert", "--key", "K STRING(MAX)")
	if code != exitUsage || !strings.Contains(errs, "not invertible") {
		t.Errorf("uuid invert: exit %d, %s", code, errs)
	}
}

func TestRewriteExplain(t *testing.T) {
	out, _, code := rekey(t, "", "rewrite", "--strategy", "shard", "--param", "n=10", "--key", "UserId INT64, LastAccess TIMESTAMP", "--explain")
	if code != 0 {
		t.Fatal(code)
	}
	for _, want := range []string{
		"new key:       (ShardId INT64, UserId INT64, LastAccess TIMESTAMP)",
		"ShardId = MOD(FARM_FINGERPRINT(CONCAT(CAST(UserId AS STRING), '|', CAST(UNIX_MICROS(LastAccess) AS STRING))), 10)",
		"DDL: ShardId INT64 NOT NULL AS (",
		"invertible:    true",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"rewrite"}, "--strategy is required, or -c FILE"},
		{[]string{"rewrite", "--strategy", "nope"}, `strategy: unknown strategy "nope"`},
		{[]string{"rewrite", "--strategy", "hashprefx"}, `strategy: unknown strategy "hashprefx"; did you mean hashprefix?`},
		{[]string{"rewrite", "--strategy", "hashprefix", "--param", "n=40"}, "params.n: must be 1..32, got 40"},
		{[]string{"rewrite", "--strategy", "hashprefix", "--param", "n"}, `--param "n": want key=value`},
		{[]string{"rewrite", "--strategy", "swap", "--param", "order=X", "--key", "A INT64"}, `no key column "X"`},
		{[]string{"rewrite", "--bogus"}, "flag provided but not defined"},
		{[]string{"validate"}, "-c FILE is required"},
	} {
		_, errs, code := rekey(t, "", tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errs, exitUsage, tc.want)
		}
	}
}

func TestValidateConfigs(t *testing.T) {
	files, _ := filepath.Glob("../../configs/*.yaml")
	if len(files) == 0 {
		t.Fatal("no configs found")
	}
	for _, f := range files {
		out, errs, code := rekey(t, "", "validate", "-c", f)
		if code != 0 || !strings.Contains(out, "; not checked against the stores: add --connect)") {
			t.Errorf("%s: exit %d, %s%s", f, code, out, errs)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("source: {type: foo}\ntarget: {type: spanner}\nrewrite: {strategy: hashprefix, params: {n: 40}}\n"), 0o644)
	_, errs, code := rekey(t, "", "validate", "-c", bad)
	if code != exitUsage {
		t.Errorf("bad config: exit %d", code)
	}
	for _, want := range []string{"rewrite.params.n: must be 1..32, got 40", "source.type:", "target.table:"} {
		if !strings.Contains(errs, want) {
			t.Errorf("bad config: stderr lacks %q:\n%s", want, errs)
		}
	}
}

func TestVersion(t *testing.T) {
	out, _, code := rekey(t, "", "version")
	if code != 0 || !strings.HasPrefix(out, "rekey ") {
		t.Errorf("version: %q exit %d", out, code)
	}
}

// FuzzRewriteLine checks that no input line panics the CLI.
func FuzzRewriteLine(f *testing.F) {
	for _, s := range []string{`"a"`, `1`, `[1,"x"]`, `{"path":["A",1]}`, `{"path":["A","x","B",-1]}`, `[null]`, `"\u0000"`} {
		f.Add(s, "hashprefix")
		f.Add(s, "bitreverse")
		f.Add(s, "reverse")
	}
	f.Fuzz(func(t *testing.T, line, strategy string) {
		var out, errb bytes.Buffer
		_ = run(context.Background(), []string{"rewrite", "--strategy", strategy}, strings.NewReader(line), &out, &errb)
		if strings.Contains(errb.String(), "internal error") {
			t.Fatalf("line %q with %s: %s", line, strategy, errb.String())
		}
	})
}

func TestDemo(t *testing.T) {
	out, errs, code := rekey(t, "", "demo", "--keys-only")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Contains(out, "FAILED") {
		t.Errorf("a round trip failed:\n%s", out)
	}
	// The table's exact text is cmd/rekey/internal/demo's golden file.
	for _, want := range []string{"\nnone (copy) ", "12.80x", "2000 Customer entities", "becf-Customer1"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// TestRunDataflowDryRun translates a migration to a Dataflow job without
// contacting Google Cloud: standard output is the job's JSON alone (rekey's
// own lines go to standard error); -v adds Beam's log, with the pipeline.
func TestRunDataflowDryRun(t *testing.T) {
	keepBeamGlobals(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "rekey.yaml")
	os.WriteFile(cfg, []byte(`
source: {type: jsonl, path: gs://demo-bucket/in.jsonl, table: UserAccessLogs, key: "LastAccess TIMESTAMP, UserId STRING(36)"}
target: {type: jsonl, path: gs://demo-bucket/out.jsonl}
rewrite: {strategy: shard, params: {n: 16}}
dead_letter: gs://demo-bucket/dead.jsonl
`), 0o644)
	args := []string{"run", "-c", cfg, "--runner", "dataflow", "--dry_run",
		"--project", "demo-project", "--region", "us-central1", "--staging_location", "gs://demo-bucket/staging", "--temp_location", "gs://demo-bucket/tmp"}
	out, errs, code := rekey(t, "", args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	// The job is on stdout as readable, indented JSON, and nothing else.
	if !strings.HasPrefix(out, "{\n") {
		t.Errorf("stdout does not start with the job's indented JSON:\n%.2000s", out)
	}
	var job struct {
		ProjectID   string `json:"projectId"`
		Environment struct {
			Experiments []string `json:"experiments"`
		} `json:"environment"`
	}
	if err := json.Unmarshal([]byte(out), &job); err != nil {
		t.Fatalf("stdout is not the job's JSON alone: %v\n%.2000s", err, out)
	}
	if job.ProjectID != "demo-project" || !slices.Contains(job.Environment.Experiments, "use_runner_v2") {
		t.Errorf("job project %q, experiments %v", job.ProjectID, job.Environment.Experiments)
	}
	checkJobJSON(t, out, errs)
	for _, want := range []string{"rekey: jsonl UserAccessLogs -> jsonl gs://demo-bucket/out.jsonl with shard on dataflow", "dry run: the dataflow job was translated (its JSON on standard output)"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}

	out, errs, code = rekey(t, "", append(args, "-v")...)
	if code != 0 {
		t.Fatalf("-v: exit %d\n%s", code, errs)
	}
	if err := json.Unmarshal([]byte(out), &job); err != nil {
		t.Errorf("-v: stdout is not the job's JSON alone: %v", err)
	}
	for _, want := range []string{"Dry-run: not submitting job!", "Rewrite", "source.Files", "sink.JSONL"} {
		if !strings.Contains(errs, want) {
			t.Errorf("-v: stderr (Beam's log, the pipeline) lacks %q", want)
		}
	}
}

// TestDemoFiles runs the demo's file-to-file migration (the path taken
// where no emulator is installed).
func TestDemoFiles(t *testing.T) {
	out, errs, code := rekey(t, "", "demo", "--files")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, "[ok  ] 2000 records in, 2000 written") {
		t.Errorf("demo --files output:\n%s", out)
	}
}
