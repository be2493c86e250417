package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/internal/config"
	"github.com/rekeyio/rekey/internal/emulator"
	"github.com/rekeyio/rekey/internal/spannerdb"
)

// documentedCommands are the commands a bundled config's comment tells
// the user to run: `eval "$(rekey emulators up -c FILE --seed)"`, then
// `rekey run -c FILE ...` (their arguments after "rekey").
func documentedCommands(t *testing.T, file string) (up, run []string) {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	upRE := regexp.MustCompile(`(?m)^#\s+eval "\$\(rekey (emulators up [^)]*)\)"$`)
	runRE := regexp.MustCompile(`(?m)^#\s+rekey (run .*)$`)
	u, r := upRE.FindSubmatch(text), runRE.FindSubmatch(text)
	if u == nil || r == nil {
		t.Fatalf("%s does not say how to run it on the emulators (eval \"$(rekey emulators up -c ... --seed)\", then rekey run -c ...)", file)
	}
	return strings.Fields(string(u[1])), strings.Fields(string(r[1]))
}

// Every bundled config runs as shipped on the local emulators with the
// two commands its comment gives: emulators up -c FILE --seed (here: what
// up does once the emulators answer, on those of the test environment),
// then rekey run -c FILE. Each config gets a database and namespaces of
// its own (REKEY_* overrides), so runs do not meet.
func TestBundledConfigsRun(t *testing.T) {
	emulator.RequireSpanner(t)
	emulator.RequireDatastore(t)
	keepBeamGlobals(t)
	files, err := filepath.Glob("../../configs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no configs: %v", err)
	}
	t.Chdir("../..") // the commands are given from the repository's root
	for _, file := range files {
		file = strings.TrimPrefix(filepath.ToSlash(file), "../../")
		t.Run(filepath.Base(file), func(t *testing.T) {
			if filepath.Base(file) == "datastore-to-datastore.yaml" {
				// A known open bug, in the README's status: about half the
				// runs report written≈500 of read=1000 with no dead letter
				// (in-process prism and the job server alike); whether
				// records or only counts are lost is not known yet.
				t.Skip("known bug: datastore-to-datastore reports about half its records written (README, status)")
			}
			keepBeamGlobals(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			up, run := documentedCommands(t, file)
			if want := []string{"emulators", "up", "-c", file, "--seed"}; strings.Join(up, " ") != strings.Join(want, " ") {
				t.Errorf("documented: rekey %s, want rekey %s", strings.Join(up, " "), strings.Join(want, " "))
			}
			if len(run) < 3 || run[1] != "-c" || run[2] != file {
				t.Fatalf("documented: rekey %s, want rekey run -c %s ...", strings.Join(run, " "), file)
			}
			if out, errs, code := rekey(t, "", "validate", "-c", file); code != 0 {
				t.Fatalf("validate: exit %d\n%s%s", code, out, errs)
			}
			cfg, err := loadConfig(file, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			isolate(t, cfg)
			if cfg, err = loadConfig(file, io.Discard); err != nil {
				t.Fatal(err)
			}
			var notes bytes.Buffer
			if err := prepareStores(ctx, cfg, &notes, true); err != nil {
				t.Fatalf("emulators up: %v\n%s", err, notes.String())
			}
			if err := seedStores(ctx, cfg, &notes); err != nil {
				t.Fatalf("emulators up --seed: %v\n%s", err, notes.String())
			}
			out, errs, code := rekey(t, "", run...)
			if code != 0 {
				t.Fatalf("rekey %s: exit %d\nup said:\n%s\nstdout:\n%s\nstderr:\n%s", strings.Join(run, " "), code, notes.String(), out, errs)
			}
			m := regexp.MustCompile(`rekey: read=(\d+) rewritten=(\d+) written=(\d+) dead_lettered=0 `).FindStringSubmatch(out)
			if m == nil || m[1] == "0" || m[1] != m[3] {
				t.Errorf("rekey %s: not every record read was written:\n%s", strings.Join(run, " "), out)
			}
			t.Logf("%s: %s", file, strings.TrimSpace(m[0]))
		})
	}
}

// isolate points cfg's stores at a fresh Spanner database and fresh
// Datastore namespaces (REKEY_* overrides), and its dead letters at a
// temporary folder; the database is dropped when the test ends.
func isolate(t *testing.T, cfg *config.Config) {
	t.Setenv("REKEY_DEAD_LETTER", filepath.Join(t.TempDir(), "dead"))
	db := emulator.UniqueDatabaseID("bundled")
	for _, e := range endpoints(cfg) {
		switch e.ep.Type {
		case config.TypeSpanner:
			t.Setenv(config.EnvName(e.role+".database"), db)
			path := spannerdb.DatabasePath(e.ep.Project, e.ep.Instance, db)
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_ = emulator.DropSpannerDatabase(ctx, path)
			})
		case config.TypeDatastore:
			t.Setenv(config.EnvName(e.role+".namespace"), emulator.UniqueNamespace(e.role+e.ep.Namespace))
		}
	}
}

// validate refuses a config whose local input matches no file (run
// would), naming the path.
func TestValidateRefusesAMissingInput(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "rekey.yaml")
	os.WriteFile(cfg, []byte("source: {type: jsonl, path: ./data/customers.jsonl}\ntarget: {type: jsonl, path: ./out.jsonl}\nrewrite: {strategy: hashprefix}\n"), 0o644)
	_, errs, code := rekey(t, "", "validate", "-c", cfg)
	if want := "source.path: " + filepath.Join(dir, "data", "customers.jsonl") + " matches no file"; code != exitUsage || !strings.Contains(errs, want) {
		t.Errorf("exit %d, want %d and %q: %s", code, exitUsage, want, errs)
	}
	os.MkdirAll(filepath.Join(dir, "data"), 0o755)
	os.WriteFile(filepath.Join(dir, "data", "customers.jsonl"), []byte(`{"__key__":{"path":["Customer","a"]}}`+"\n"), 0o644)
	if out, errs, code := rekey(t, "", "validate", "-c", cfg); code != 0 {
		t.Errorf("with the file: exit %d: %s%s", code, out, errs)
	}
}

// The bundled configs name the project emulators up exports as
// DATASTORE_PROJECT_ID without -c (and with -c of any of them).
func TestBundledConfigsUseTheExportedProject(t *testing.T) {
	files, _ := filepath.Glob("../../configs/*.yaml")
	for _, file := range files {
		cfg, err := loadConfig(file, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range endpoints(cfg) {
			if e.ep.Project != "" && e.ep.Project != bundledProject {
				t.Errorf("%s: %s.project %s, but emulators up exports DATASTORE_PROJECT_ID=%s", file, e.role, e.ep.Project, bundledProject)
			}
		}
		if got := datastoreProject(cfg); got != bundledProject {
			t.Errorf("%s: up -c exports DATASTORE_PROJECT_ID=%s, want %s", file, got, bundledProject)
		}
	}
}

func TestEmulatorsSeedNeedsAConfig(t *testing.T) {
	_, errs, code := rekey(t, "", "emulators", "up", "--seed", "--state", t.TempDir())
	if code != exitUsage || !strings.Contains(errs, "--seed needs -c FILE") {
		t.Errorf("exit %d: %s", code, errs)
	}
}
