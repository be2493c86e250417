package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// writeTestConfig writes a config into a temp dir, with %s standing for
// that dir, and returns its path.
func writeTestConfig(t *testing.T, yaml string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "rekey.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(yaml, "%s", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(`{"__key__":{"path":["K","a"]},"Id":"a","x":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// keepBeamGlobals restores Beam's process-wide settings when the test
// ends: a run on prism sets flags (environment_type), and its loopback
// worker installs Beam's logger; the CLI's tests share one process, while
// the CLI runs one command per process.
func keepBeamGlobals(t *testing.T) {
	vals := map[string]string{}
	flag.VisitAll(func(f *flag.Flag) { vals[f.Name] = f.Value.String() })
	t.Cleanup(func() {
		beamlog.SetLogger(&beamlog.Structural{})
		flag.VisitAll(func(f *flag.Flag) {
			if old := vals[f.Name]; f.Value.String() != old {
				if err := f.Value.Set(old); err != nil {
					t.Errorf("restoring --%s: %v", f.Name, err)
				}
			}
		})
	})
}

// A store that cannot be reached (here: no credentials) is an operation
// that failed, exit 1, whichever store and whichever end it is.
func TestExitCodeNoCredentialsIsTheSameForEveryStore(t *testing.T) {
	keepBeamGlobals(t)
	t.Setenv("SPANNER_EMULATOR_HOST", "")
	t.Setenv("DATASTORE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	for name, yaml := range map[string]string{
		"spanner source": `
source: {type: spanner, project: p, instance: inst, database: db, table: T}
target: {type: jsonl, path: "%s/out.jsonl"}
rewrite: {strategy: bitreverse}
dead_letter: "%s/dead.jsonl"`,
		"spanner target": `
source: {type: jsonl, path: "%s/in.jsonl", table: T, key: "Id STRING(MAX)"}
target: {type: spanner, project: p, instance: inst, database: db, table: T}
rewrite: {strategy: hashprefix}
dead_letter: "%s/dead.jsonl"`,
		"datastore source": `
source: {type: datastore, project: p, kind: K}
target: {type: jsonl, path: "%s/out.jsonl"}
rewrite: {strategy: hashprefix}
dead_letter: "%s/dead.jsonl"`,
		"datastore target": `
source: {type: jsonl, path: "%s/in.jsonl"}
target: {type: datastore, project: p, kind: K}
rewrite: {strategy: hashprefix}
dead_letter: "%s/dead.jsonl"`,
	} {
		t.Run(name, func(t *testing.T) {
			out, errs, code := rekey(t, "", "run", "-c", writeTestConfig(t, yaml))
			// Where the service's address does not resolve (no network),
			// the reach check says so first; else the client's
			// credentials error comes.
			if code != exitFailure || !(strings.Contains(errs, "missing.json") || strings.Contains(errs, "cannot reach")) {
				t.Errorf("exit %d, want %d, with the credentials or the reach error\nstdout: %s\nstderr: %s", code, exitFailure, out, errs)
			}
		})
	}
}

// A store that cannot be reached fails at once, naming the address and
// the cause, whichever store and end it is.
func TestRunUnreachableStoreFailsFast(t *testing.T) {
	keepBeamGlobals(t)
	for name, tc := range map[string]struct{ env, yaml string }{
		"spanner": {"SPANNER_EMULATOR_HOST", `
source: {type: spanner, project: p, instance: inst, database: db, table: T}
target: {type: jsonl, path: "%s/out.jsonl"}
rewrite: {strategy: bitreverse}
dead_letter: "%s/dead.jsonl"`},
		"datastore": {"DATASTORE_EMULATOR_HOST", `
source: {type: jsonl, path: "%s/in.jsonl"}
target: {type: datastore, project: p, kind: K}
rewrite: {strategy: hashprefix}
dead_letter: "%s/dead.jsonl"`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(tc.env, "127.0.0.1:1")
			start := time.Now()
			out, errs, code := rekey(t, "", "run", "-c", writeTestConfig(t, tc.yaml))
			if code != exitFailure || !strings.Contains(errs, "127.0.0.1:1 ("+tc.env+")") || !strings.Contains(errs, "connection refused") {
				t.Errorf("exit %d, want %d, naming the address and the cause\nstdout: %s\nstderr: %s", code, exitFailure, out, errs)
			}
			if el := time.Since(start); el > 10*time.Second {
				t.Errorf("took %s", el)
			}
		})
	}
	// A redrive into an unreachable target, and the demo against an
	// unreachable emulator, fail as fast and say the same.
	t.Run("redrive", func(t *testing.T) {
		t.Setenv("DATASTORE_EMULATOR_HOST", "127.0.0.1:1")
		cfg := writeTestConfig(t, `
source: {type: jsonl, path: "%s/in.jsonl"}
target: {type: datastore, project: p, kind: K}
rewrite: {strategy: hashprefix}
dead_letter: "%s/dead.jsonl"`)
		rec := record.Record{Table: "K", Key: &rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "K", Name: "a"}}}, Fields: []record.Field{{Name: "V", Value: record.Int(1)}}}
		from := filepath.Join(t.TempDir(), "failed.jsonl")
		if err := os.WriteFile(from, []byte(record.NewDeadLetter(record.StageWrite, "test", &rec, errors.New("unavailable"))+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		out, errs, code := rekey(t, "", "redrive", "-c", cfg, "--from", from)
		if code != exitFailure || !strings.Contains(errs, "127.0.0.1:1 (DATASTORE_EMULATOR_HOST)") || !strings.Contains(errs, "connection refused") {
			t.Errorf("redrive: exit %d, want %d, naming the address and the cause\nstdout: %s\nstderr: %s", code, exitFailure, out, errs)
		}
		if el := time.Since(start); el > 10*time.Second {
			t.Errorf("redrive took %s", el)
		}
	})
	t.Run("demo", func(t *testing.T) {
		t.Setenv("SPANNER_EMULATOR_HOST", "127.0.0.1:1")
		start := time.Now()
		out, errs, code := rekey(t, "", "demo", "--out", filepath.Join(t.TempDir(), "demo"))
		if code == 0 || !strings.Contains(out+errs, "127.0.0.1:1") || !strings.Contains(out+errs, "connection refused") {
			t.Errorf("demo: exit %d, want a failure naming the address and the cause\nstdout: %s\nstderr: %s", code, out, errs)
		}
		if el := time.Since(start); el > 10*time.Second {
			t.Errorf("demo took %s", el)
		}
	})
	t.Run("validate --connect", func(t *testing.T) {
		t.Setenv("SPANNER_EMULATOR_HOST", "127.0.0.1:1")
		cfg := writeTestConfig(t, `
source: {type: spanner, project: p, instance: inst, database: db, table: T}
target: {type: jsonl, path: "%s/out.jsonl"}
rewrite: {strategy: bitreverse}
dead_letter: "%s/dead.jsonl"`)
		if _, errs, code := rekey(t, "", "validate", "-c", cfg); code != 0 {
			t.Errorf("validate without --connect: exit %d: %s", code, errs)
		}
		if _, errs, code := rekey(t, "", "validate", "--connect", "-c", cfg); code != exitFailure || !strings.Contains(errs, "connection refused") {
			t.Errorf("validate --connect: exit %d, want %d: %s", code, exitFailure, errs)
		}
	})
}

// A source database the client reaches but cannot read the schema of
// says that the schema can be given as a DDL file instead.
func TestRunSourceSchemaHint(t *testing.T) {
	keepBeamGlobals(t)
	emulator.RequireSpanner(t)
	cfg := writeTestConfig(t, `
source: {type: spanner, project: `+emulator.SpannerProject()+`, instance: `+emulator.SpannerInstance()+`, database: no-such-db, table: T}
target: {type: jsonl, path: "%s/out.jsonl"}
rewrite: {strategy: bitreverse}
dead_letter: "%s/dead.jsonl"`)
	_, errs, code := rekey(t, "", "run", "-c", cfg)
	if code != exitFailure || !strings.Contains(errs, "give its DDL as source.schema: FILE") {
		t.Errorf("exit %d, want %d with the source.schema hint: %s", code, exitFailure, errs)
	}
}

// A config that does not fit the database is a config error, exit 2:
// nothing was done.
func TestExitCodeConfigThatDoesNotFitTheDatabase(t *testing.T) {
	keepBeamGlobals(t)
	_, path := emulator.TestDBPath(t, `CREATE TABLE Existing (Id STRING(MAX) NOT NULL) PRIMARY KEY (Id)`)
	db := filepath.Base(path)
	p, inst := emulator.SpannerProject(), emulator.SpannerInstance()
	for name, tc := range map[string]struct{ yaml, want string }{
		"missing source table": {`
source: {type: spanner, project: ` + p + `, instance: ` + inst + `, database: ` + db + `, table: Missing}
target: {type: jsonl, path: "%s/out.jsonl"}
rewrite: {strategy: hashprefix}
dead_letter: "%s/dead.jsonl"`, "source: table Missing"},
		"missing target table": {`
source: {type: jsonl, path: "%s/in.jsonl", table: Missing, key: "Id STRING(MAX)"}
target: {type: spanner, project: ` + p + `, instance: ` + inst + `, database: ` + db + `, table: Missing}
rewrite: {strategy: hashprefix}
dead_letter: "%s/dead.jsonl"`, "target table Missing does not exist"},
		"target table with another key": {`
source: {type: jsonl, path: "%s/in.jsonl", table: Existing, key: "Id STRING(MAX)"}
target: {type: spanner, project: ` + p + `, instance: ` + inst + `, database: ` + db + `, table: Existing}
rewrite: {strategy: shard, params: {n: 4}}
dead_letter: "%s/dead.jsonl"`, "target table Existing exists with (Id STRING(MAX))"},
	} {
		t.Run(name, func(t *testing.T) {
			out, errs, code := rekey(t, "", "run", "-c", writeTestConfig(t, tc.yaml))
			if code != exitUsage || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, want %d, saying %q\nstdout: %s\nstderr: %s", code, exitUsage, tc.want, out, errs)
			}
		})
	}
}

// Datastore descendant kinds under the older key `interleaved` still
// validate, with a warning naming the new key; under `descendants` there
// is none.
func TestValidateWarnsOfInterleavedForDescendants(t *testing.T) {
	for key, warn := range map[string]bool{"interleaved": true, "descendants": false} {
		cfg := writeTestConfig(t, `
source: {type: datastore, project: p, kind: Customer}
target: {type: jsonl, path: "%s/out.jsonl"}
rewrite: {strategy: hashprefix}
`+key+`: [Order]
dead_letter: "%s/dead.jsonl"`)
		out, errs, code := rekey(t, "", "validate", "-c", cfg)
		if code != 0 || !strings.Contains(out, ": ok") {
			t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", key, code, out, errs)
		}
		if got := strings.Contains(errs, "warning: interleaved: the descendant kinds of a datastore source now go in descendants"); got != warn {
			t.Errorf("%s: warned %v, want %v; stderr: %q", key, got, warn, errs)
		}
	}
}

// A dry run on a local runner reads and rewrites every record and writes
// no target file; it says what it would have written, and, with nothing
// written by design, not that its counts do not add up (on prism, where
// the note is given).
func TestRunDryRunLocal(t *testing.T) {
	for _, runner := range []string{"direct", "prism"} {
		t.Run(runner, func(t *testing.T) {
			keepBeamGlobals(t)
			cfg := writeTestConfig(t, `
source: {type: jsonl, path: "%s/rows.jsonl", table: T, key: "Id STRING(MAX)"}
target: {type: jsonl, path: "%s/out.jsonl"}
rewrite: {strategy: hashprefix}
dead_letter: "%s/dead.jsonl"`)
			if err := os.WriteFile(filepath.Join(filepath.Dir(cfg), "rows.jsonl"), []byte(`{"Id": "a", "x": 1}`+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			out, errs, code := rekey(t, "", "run", "-c", cfg, "--runner", runner, "--dry_run")
			if code != 0 {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
			}
			for _, want := range []string{"nothing was written; 1 records would be written (T 1)", `("a") -> ("`} {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "do not add up") {
				t.Errorf("a dry run says its counts do not add up:\n%s", out)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(cfg), "out.jsonl")); !os.IsNotExist(err) {
				t.Errorf("the dry run wrote the target file (stat: %v)", err)
			}
		})
	}
}

// Dataflow needs --project and --region, and gs:// paths: what workers on
// other machines cannot read is refused before anything runs, naming the
// key.
func TestRunDataflowRefusesWhatWorkersCannotUse(t *testing.T) {
	keepBeamGlobals(t)
	local := writeTestConfig(t, `
source: {type: jsonl, path: "%s/in.jsonl"}
target: {type: jsonl, path: gs://b/out.jsonl}
rewrite: {strategy: hashprefix}
dead_letter: "%s/dead.jsonl"`)
	gcs := writeTestConfig(t, `
source: {type: jsonl, path: gs://b/in.jsonl}
target: {type: jsonl, path: gs://b/out.jsonl}
rewrite: {strategy: hashprefix}`)
	for name, tc := range map[string]struct {
		args []string
		want []string
	}{
		"no project": {[]string{"run", "-c", gcs, "--runner", "dataflow", "--dry_run", "--region", "r"}, []string{"needs --project and --region"}},
		"no region":  {[]string{"run", "-c", gcs, "--runner", "dataflow", "--dry_run", "--project", "p"}, []string{"needs --project and --region"}},
		"no staging location": {[]string{"run", "-c", gcs, "--runner", "dataflow", "--dry_run", "--project", "p", "--region", "r"},
			[]string{"needs --staging_location=gs://BUCKET/PATH", "also with --dry_run", "stages the pipeline and the worker binary there"}},
		"local staging location": {[]string{"run", "-c", gcs, "--runner", "dataflow", "--dry_run", "--project", "p", "--region", "r", "--staging_location", "/tmp/s"},
			[]string{`--staging_location must be a gs://BUCKET/PATH`, `got "/tmp/s"`}},
		"local paths": {[]string{"run", "-c", local, "--runner", "dataflow", "--dry_run", "--project", "p", "--region", "r", "--staging_location", "gs://b/s"},
			[]string{"source.path: ", "dead_letter: ", "is a local path", "REKEY_SOURCE_PATH"}},
		"no dead letter path": {[]string{"run", "-c", gcs, "--runner", "dataflow", "--dry_run", "--project", "p", "--region", "r", "--staging_location", "gs://b/s"}, []string{"dead_letter: required"}},
	} {
		t.Run(name, func(t *testing.T) {
			keepBeamGlobals(t) // each case's Beam flags are its own
			out, errs, code := rekey(t, "", tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, exitUsage, out, errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q: %s", w, errs)
				}
			}
			if strings.Contains(out, "rekey: jsonl") {
				t.Errorf("the run started: %s", out)
			}
		})
	}
}

// A Dataflow dry run translates the job and prepares nothing: with
// --create-target, the target's DDL is printed, not run, and no manifest
// is written.
func TestRunDataflowDryRunPreparesNothing(t *testing.T) {
	keepBeamGlobals(t)
	_, srcPath := emulator.TestDBPath(t, `CREATE TABLE Logs (Id INT64 NOT NULL, Page STRING(MAX)) PRIMARY KEY (Id)`)
	dst, dstPath := emulator.TestDBPath(t)
	p, inst := emulator.SpannerProject(), emulator.SpannerInstance()
	cfg := writeTestConfig(t, `
source: {type: spanner, project: `+p+`, instance: `+inst+`, database: `+filepath.Base(srcPath)+`, table: Logs}
target: {type: spanner, project: `+p+`, instance: `+inst+`, database: `+filepath.Base(dstPath)+`, table: LogsV2}
rewrite: {strategy: bitreverse}
dead_letter: gs://b/dead.jsonl`)
	out, errs, code := rekey(t, "", "run", "-c", cfg, "--create-target", "--runner", "dataflow", "--dry_run",
		"--project", "demo-project", "--region", "us-central1", "--staging_location", "gs://b/staging", "--temp_location", "gs://b/tmp")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if !strings.Contains(errs, "CREATE TABLE LogsV2") || !strings.Contains(errs, "would execute") {
		t.Errorf("stderr does not show the DDL a run would execute:\n%s", errs)
	}
	checkJobJSON(t, out, errs)
	var tables int64
	err := dst.Single().Query(context.Background(), spanner.Statement{SQL: "SELECT COUNT(*) FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = ''"}).
		Do(func(r *spanner.Row) error { return r.Columns(&tables) })
	if err != nil || tables != 0 {
		t.Errorf("the target database has %d tables (%v) after a dry run, want none (no DDL, no manifest)", tables, err)
	}
}

// Every example config translates to a Dataflow job with no credentials
// and no emulator: its local paths are overridden with gs:// ones through
// REKEY_* variables, a Spanner source's schema comes from a DDL file, and
// nothing is prepared.
func TestRunDataflowDryRunOfflineEveryConfig(t *testing.T) {
	keepBeamGlobals(t)
	ddl, err := filepath.Abs("testdata/useraccesslogs.sql")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../../configs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no configs: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Setenv("SPANNER_EMULATOR_HOST", "")
			t.Setenv("DATASTORE_EMULATOR_HOST", "")
			t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
			t.Setenv("REKEY_DEAD_LETTER", "gs://b/dead")
			cfg, err := loadConfig(file, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Source.IsFile() {
				t.Setenv("REKEY_SOURCE_PATH", "gs://b/in/*")
			}
			if cfg.Target.IsFile() {
				t.Setenv("REKEY_TARGET_PATH", "gs://b/out.jsonl")
			}
			if cfg.Source.Type == "spanner" {
				t.Setenv("REKEY_SOURCE_SCHEMA", ddl)
			}
			out, errs, code := rekey(t, "", "run", "-c", file, "--create-target", "--runner", "dataflow", "--dry_run",
				"--project", "demo-project", "--region", "us-central1", "--staging_location", "gs://b/staging", "--temp_location", "gs://b/tmp")
			if code != 0 || !strings.Contains(errs, "rekey: dry run: the dataflow job was translated") {
				t.Errorf("exit %d\nstdout: %.2000s\nstderr: %.2000s", code, out, errs)
			}
			checkJobJSON(t, out, errs)
		})
	}
}

// checkJobJSON checks the output of a Dataflow dry run: standard output
// is the translated job's JSON and nothing else (for jq), and standard
// error is short: what rekey says, not the pipeline proto Beam logs at
// INFO (shown with -v).
func checkJobJSON(t *testing.T, out, errs string) {
	t.Helper()
	var job struct {
		Name  string            `json:"name"`
		Type  string            `json:"type"`
		Steps []json.RawMessage `json:"steps"`
	}
	if err := json.Unmarshal([]byte(out), &job); err != nil {
		t.Errorf("stdout is not the job's JSON alone: %v\n%.2000s", err, out)
	} else if job.Name == "" || job.Type == "" {
		t.Errorf("stdout's JSON is not a Dataflow job (name %q, type %q):\n%.2000s", job.Name, job.Type, out)
	}
	if strings.Contains(errs, "components:{") || len(errs) > 4000 {
		t.Errorf("stderr holds %d bytes (the pipeline proto?):\n%.2000s", len(errs), errs)
	}
}

// A JSON Lines target file that exists is not replaced: the second run is
// refused (exit 2) and the first run's output stays, unless --overwrite.
func TestRunKeepsAnExistingTargetFile(t *testing.T) {
	keepBeamGlobals(t)
	cfg := writeTestConfig(t, `
source: {type: jsonl, path: rows.jsonl, table: T, key: "Id STRING(MAX)"}
target: {type: jsonl, path: out.jsonl}
rewrite: {strategy: hashprefix}
dead_letter: dead.jsonl`)
	dir := filepath.Dir(cfg)
	if err := os.WriteFile(filepath.Join(dir, "rows.jsonl"), []byte(`{"Id": "a"}`+"\n"+`{"Id": "b"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.jsonl")
	// Relative paths are the config file's folder's: run from elsewhere.
	t.Chdir(t.TempDir())
	if _, errs, code := rekey(t, "", "run", "-c", cfg, "--runner", "direct"); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, errs)
	}
	first, err := os.ReadFile(out)
	if err != nil || strings.Count(string(first), "\n") != 2 {
		t.Fatalf("first run wrote %q (%v)", first, err)
	}
	_, errs, code := rekey(t, "", "run", "-c", cfg, "--runner", "direct")
	if code != exitUsage || !strings.Contains(errs, "exists and rekey does not replace it") {
		t.Errorf("second run: exit %d, want %d: %s", code, exitUsage, errs)
	}
	if now, _ := os.ReadFile(out); string(now) != string(first) {
		t.Errorf("the refused run changed the target: %q", now)
	}
	if _, errs, code := rekey(t, "", "run", "-c", cfg, "--runner", "direct", "--overwrite"); code != 0 {
		t.Errorf("--overwrite: exit %d: %s", code, errs)
	}
}

// After a SIGINT or SIGTERM the runner's logs are dropped (prism logged
// "Bundle Failed" errors for the bundles the stop cancelled).
func TestQuietWhenStopping(t *testing.T) {
	var b strings.Builder
	log := slog.New(quietWhenStopping{slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelWarn})}).With("job", "j")
	log.Error("before the stop")
	stopping.Store(true)
	t.Cleanup(func() { stopping.Store(false) })
	log.Error("Bundle Failed.")
	if !strings.Contains(b.String(), "before the stop") || strings.Contains(b.String(), "Bundle Failed") {
		t.Errorf("logged %q; want the record before the stop only", b.String())
	}
}
