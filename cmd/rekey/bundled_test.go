package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
)

// documentedCommands are the commands a bundled config's comment tells
// the user to run: `eval "$(rekey emulators up -c FILE --seed)"` (or
// `--ddl SCHEMA.sql`), then
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
			keepBeamGlobals(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			up, run := documentedCommands(t, file)
			// --seed loads the samples; --ddl FILE creates one's own
			// tables (the import config's).
			var ddl string
			if len(up) == 6 && up[4] == "--ddl" {
				ddl, up = up[5], up[:4]
			} else if len(up) == 5 && up[4] == "--seed" {
				up = up[:4]
			}
			if want := []string{"emulators", "up", "-c", file}; strings.Join(up, " ") != strings.Join(want, " ") {
				t.Errorf("documented: rekey %s, want rekey %s --seed (or --ddl FILE)", strings.Join(up, " "), strings.Join(want, " "))
			}
			if len(run) < 3 || run[1] != "-c" || run[2] != file {
				t.Fatalf("documented: rekey %s, want rekey run -c %s ...", strings.Join(run, " "), file)
			}
			if out, errs, code := rekey(t, "", "validate", "-c", file); code != 0 {
				t.Fatalf("validate: exit %d\n%s%s", code, out, errs)
			}
			cfg := isolatedConfig(t, file)
			var notes bytes.Buffer
			if err := prepareStores(ctx, cfg, &notes, true); err != nil {
				t.Fatalf("emulators up: %v\n%s", err, notes.String())
			}
			if ddl != "" {
				e, err := ddlEndpoint(cfg)
				if err == nil {
					err = applyDDLFile(ctx, e, ddl, &notes)
				}
				if err != nil {
					t.Fatalf("emulators up --ddl %s: %v\n%s", ddl, err, notes.String())
				}
			} else if err := seedStores(ctx, cfg, &notes); err != nil {
				t.Fatalf("emulators up --seed: %v\n%s", err, notes.String())
			}
			out, errs, code := rekey(t, "", run...)
			if code != 0 {
				t.Fatalf("rekey %s: exit %d\nup said:\n%s\nstdout:\n%s\nstderr:\n%s", strings.Join(run, " "), code, notes.String(), out, errs)
			}
			m := regexp.MustCompile(`rekey: read=(\d+) rewritten=(\d+) written=(\d+) dead_lettered=0 `).FindStringSubmatch(out)
			if m == nil || m[1] == "0" {
				t.Fatalf("rekey %s: nothing read, or records dead-lettered:\n%s", strings.Join(run, " "), out)
			}
			// Judged by what reached the store: every record read is
			// there. The counters may be short on prism (countsNote), and
			// then the run says so.
			read, _ := strconv.ParseInt(m[1], 10, 64)
			if n := targetRecords(ctx, t, cfg); n != read {
				t.Errorf("rekey %s: the target holds %d records, read=%d:\n%s", strings.Join(run, " "), n, read, out)
			}
			if m[1] != m[3] && !strings.Contains(out, "rekey: note: the counts do not add up") {
				t.Errorf("rekey %s: written=%s of read=%s and no note that the counts are short:\n%s", strings.Join(run, " "), m[3], m[1], out)
			}
			t.Logf("%s: %s", file, strings.TrimSpace(m[0]))
		})
	}
}

// targetRecords counts what cfg's target holds: the rows of its Spanner
// table, or the entities of its Datastore namespace (every kind but
// rekey's own, Rekey*, such as the ramp-up's state).
func targetRecords(ctx context.Context, t *testing.T, cfg *config.Config) int64 {
	t.Helper()
	tgt := cfg.Target
	switch tgt.Type {
	case config.TypeSpanner:
		c, err := emulator.SpannerClient(ctx, spannerdb.DatabasePath(tgt.Project, tgt.Instance, tgt.Database))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var n int64
		err = c.Single().Query(ctx, spanner.Statement{SQL: "SELECT COUNT(*) FROM `" + tgt.Table + "`"}).Do(func(r *spanner.Row) error { return r.Column(0, &n) })
		if err != nil {
			t.Fatal(err)
		}
		return n
	case config.TypeDatastore:
		c, err := datastoredb.Client(ctx, tgt.Project, tgt.Database)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		keys, err := c.GetAll(ctx, datastore.NewQuery("").Namespace(tgt.Namespace).KeysOnly(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, k := range keys {
			if !strings.HasPrefix(k.Kind, "__") && !strings.HasPrefix(k.Kind, "Rekey") {
				n++
			}
		}
		return n
	}
	t.Fatalf("target type %s: not counted", tgt.Type)
	return 0
}

// isolatedConfig loads the config file with its stores isolated.
func isolatedConfig(t *testing.T, file string) *config.Config {
	t.Helper()
	cfg, err := loadConfig(file, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	isolate(t, cfg)
	if cfg, err = loadConfig(file, io.Discard); err != nil {
		t.Fatal(err)
	}
	return cfg
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

// A run whose counts do not add up says so on prism and universal (the
// job server dropped some), and nothing when they add up, on direct, or
// for a cohort backfill (which leaves records out by design). A dry run
// writes nothing by design: its records are counted as they would be
// written (migration.WouldWrite), and add up with none written.
func TestCountsNote(t *testing.T) {
	short := migration.Counters{migration.Read: 1000, migration.Written: 430}
	if note := countsNote("prism", false, false, short); !strings.Contains(note, "read 1000, written + dead-lettered 430") {
		t.Errorf("prism, short: %q", note)
	}
	if note := countsNote("universal", false, false, short); note == "" {
		t.Error("universal, short: no note")
	}
	dryShort := migration.Counters{migration.Read: 50000, migration.WouldWrite + "Users": 30000, migration.DeadLettered: 10}
	if note := countsNote("prism", false, true, dryShort); !strings.Contains(note, "read 50000, would be written + dead-lettered 30010") {
		t.Errorf("prism, dry run, short: %q", note)
	}
	for _, c := range []struct {
		runner  string
		cohorts bool
		dryRun  bool
		counts  migration.Counters
	}{
		{"prism", false, false, migration.Counters{migration.Read: 1000, migration.Written: 990, migration.DeadLettered: 10}},
		{"direct", false, false, short},
		{"prism", true, false, short},
		// A dry run: nothing written, every record would be.
		{"prism", false, true, migration.Counters{migration.Read: 50000, migration.WouldWrite + "Users": 49990, migration.DeadLettered: 10}},
		{"universal", false, true, migration.Counters{migration.Read: 50000, migration.WouldWrite + "Users": 20000, migration.WouldWrite + "Orders": 30000}},
	} {
		if note := countsNote(c.runner, c.cohorts, c.dryRun, c.counts); note != "" {
			t.Errorf("%s cohorts=%v dry=%v %v: %q, want none", c.runner, c.cohorts, c.dryRun, c.counts, note)
		}
	}
}
