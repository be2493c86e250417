package demo

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/testkit/beamtest"
	"github.com/rekeyio/rekey/internal/testkit/golden"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/rewrite"
)

func TestMain(m *testing.M) { beamtest.Main(m) }

// The key table is deterministic: it is kept as a golden file, and names
// the chain and explains RANGES/WINDOW.
func TestDemoKeysGolden(t *testing.T) {
	var b strings.Builder
	if err := Keys(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"\nchain: swap then hashprefix  (UserId, LastAccess) ",
		"\n" + logsRewriteLabel + " ",
		"\n" + rangesLine + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the key table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "FAILED") {
		t.Errorf("a round trip failed:\n%s", out)
	}
	golden.Check(t, "testdata/keys.golden", out)
}

// tableShards is the ShardId the key table's shard row gives each sample
// row, by its key as rewrite.FormatKey writes it.
func tableShards(t *testing.T) (rewrite.KeySchema, map[string]int64) {
	t.Helper()
	schema, keys, err := sampleLogKeys()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(spannerCases(), func(c demoCase) bool { return c.label == logsRewriteLabel })
	if i < 0 {
		t.Fatalf("the key table has no %q row", logsRewriteLabel)
	}
	r, err := spannerRewriter(spannerCases()[i].config, schema)
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Out().Columns[0].Name; c != "ShardId" {
		t.Fatalf("the shard row's new key starts with %s, not ShardId", c)
	}
	out := map[string]int64{}
	for _, k := range keys {
		nk, err := r.Rewrite(nil, k)
		if err != nil {
			t.Fatal(err)
		}
		out[rewrite.FormatKey(k, false)] = nk[0].Int
	}
	return schema, out
}

// checkShards compares the shards a migration wrote (by LastAccess and
// UserId) with the key table's.
func checkShards(t *testing.T, where string, got map[[2]string]int64) {
	t.Helper()
	schema, want := tableShards(t)
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, the key table has %d", where, len(got), len(want))
	}
	bad := 0
	for k, shard := range got {
		pk, err := rewrite.ParseKey(fmt.Sprintf("[%q,%q]", k[0], k[1]), &schema)
		if err != nil {
			t.Fatalf("%s: key %v: %v", where, k, err)
		}
		key := rewrite.FormatKey(pk.Values, false)
		if w, ok := want[key]; !ok || w != shard {
			if bad++; bad <= 3 {
				t.Errorf("%s: %s has ShardId %d, the key table's shard row gives %d (present: %v)", where, key, shard, w, ok)
			}
		}
	}
}

// The file migration keeps its input, output and dead letters in --out
// and its config in --keep-configs; the kept config loads, is the
// migration the demo ran, and running it again gives the same output. A
// second demo into the same folders replaces its own files and leaves a
// user's.
func TestDemoFilesOutAndKeptConfig(t *testing.T) {
	out, keep := t.TempDir(), filepath.Join(t.TempDir(), "configs")
	o := Options{Runner: "prism", FilesOnly: true, Out: out, KeepConfigs: keep}
	var b strings.Builder
	if err := Migrate(t.Context(), &b, o); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	target := filepath.Join(out, filesOutput)
	kept := filepath.Join(keep, filesConfig+".yaml")
	for _, want := range []string{
		"2000 written to " + target + "\n",
		"config kept: " + kept + " (rekey run -c " + kept + " --overwrite)\n",
		"The demo's files (the file migration's input and output, its dead letters): " + out + "\n",
		"each with `rekey run -c FILE`: " + keep + "\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the demo does not say %q:\n%s", want, b.String())
		}
	}
	first := sortedLines(t, target)
	shards := map[[2]string]int64{}
	for _, line := range first {
		var r struct {
			LastAccess struct {
				TS string `json:"$timestamp"`
			}
			UserId  string
			ShardId int64
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		shards[[2]string{r.LastAccess.TS, r.UserId}] = r.ShardId
	}
	checkShards(t, target, shards)

	cfg, err := config.LoadFile(kept)
	if err != nil {
		t.Fatalf("the kept config does not load: %v", err)
	}
	if cfg.Source.Path != filepath.Join(out, "user_access_logs.jsonl") || cfg.Target.Path != target || cfg.DeadLetter != filepath.Join(out, "dead.jsonl") ||
		!reflect.DeepEqual(cfg.Rewrite.Step(), logsRewrite().Step()) {
		t.Errorf("the kept config is not the demo's migration: %+v", cfg)
	}
	if err := os.Remove(target); err != nil {
		t.Fatal(err)
	}
	_, res, err := migration.Run(t.Context(), cfg, migration.Options{}, pipeline.Runner{Runner: "prism"})
	if err != nil {
		t.Fatalf("running the kept config: %v", err)
	}
	if again := sortedLines(t, target); !slices.Equal(again, first) || res.Counters[migration.Written] != 2000 {
		t.Errorf("the kept config wrote %d records, %d lines; the demo %d lines (equal: %v)", res.Counters[migration.Written], len(again), len(first), slices.Equal(again, first))
	}

	mine := filepath.Join(out, "mine.txt")
	if err := os.WriteFile(mine, []byte("the user's"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := Migrate(t.Context(), &b, o); err != nil {
		t.Fatalf("a second demo into the same folders: %v\n%s", err, b.String())
	}
	if data, err := os.ReadFile(mine); err != nil || string(data) != "the user's" {
		t.Errorf("the second demo touched the user's file: %q, %v", data, err)
	}
	if again := sortedLines(t, target); !slices.Equal(again, first) {
		t.Errorf("the second demo's output differs from the first's")
	}
}

func sortedLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return lines
}

// The demo writes only into folders that are new, empty or its own.
func TestDemoClaimDir(t *testing.T) {
	root := t.TempDir()
	missing := filepath.Join(root, "a", "b")
	if err := claimDir(missing, "--out"); err != nil {
		t.Fatalf("a missing folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(missing, markFile)); err != nil {
		t.Errorf("the new folder is not marked: %v", err)
	}
	if err := os.WriteFile(filepath.Join(missing, "dead.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := claimDir(missing, "--out"); err != nil {
		t.Errorf("the demo's own folder: %v", err)
	}
	if err := claimDir(t.TempDir(), "--out"); err != nil {
		t.Errorf("an empty folder: %v", err)
	}

	users := filepath.Join(root, "users")
	os.Mkdir(users, 0o755)
	for _, name := range []string{"notes.txt", "user_access_logs.jsonl"} {
		if err := os.WriteFile(filepath.Join(users, name), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := claimDir(users, "--keep-configs")
	want := "--keep-configs " + users + ": the folder holds notes.txt and 1 more, which the demo did not write; give a new or empty folder"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a user's folder: %v; want %q", err, want)
	}
	if entries, _ := os.ReadDir(users); len(entries) != 2 {
		t.Errorf("the refused folder changed: %v", entries)
	}
}

// configYAML writes a config config.LoadFile reads back as it was: every
// example config, and one that sets durations, lists of sections and
// nested rewrite steps.
func TestDemoConfigYAMLRoundTrips(t *testing.T) {
	// Absolute: the loader resolves relative paths against the file's
	// folder, and the copy is read from another folder.
	configs, err := filepath.Abs("../../../../configs")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(configs, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example configs: %v", err)
	}
	rich := filepath.Join(t.TempDir(), "rich.yaml")
	if err := os.WriteFile(rich, []byte(`
source: {type: datastore, project: p, namespace: old, kind: Customer}
target: {type: datastore, project: p, namespace: new, kind: Customer}
rewrite:
  strategy: chain
  steps:
    - {strategy: hashprefix, params: {n: 6, sep: "_"}}
    - {strategy: generation, params: {g: 3, as: prefix}}
ancestors: root
references: [ReferredBy, Owner]
references_to:
  - {property: Account, kind: Account, rewrite: {strategy: reverse}}
keep_original_key: OriginalKey
descendants: [Order]
dead_letter: /tmp/dead
write:
  mode: insert
  batch_rows: 0
  retry: {initial_backoff: 250ms, max_backoff: 2m30s, commit_deadline: 15s}
  adaptive_throttle: {k: 2, window: 90s}
ramp: {profile: datastore}
cohort: {user: "key:Customer", buckets: 100, cache_ttl: 45s}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range append(files, rich) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want, err := config.LoadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			text, err := configYAML(want)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "again.yaml")
			if err := os.WriteFile(path, text, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := config.LoadFile(path)
			if err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("read back:\n%+v\nwant\n%+v\nfrom\n%s", got, want, text)
			}
		})
	}
}

// The whole demo on the emulators: its checks pass, the Spanner
// migration writes the ShardId the key table shows for every row, and
// every kept config loads and runs again.
func TestDemoOnEmulators(t *testing.T) {
	emulator.RequireSpanner(t)
	emulator.RequireDatastore(t)
	t.Setenv(emulator.EnvDatastoreProject, os.Getenv(emulator.EnvDatastoreProject)) // the demo sets it
	out, keep := t.TempDir(), t.TempDir()
	var b strings.Builder
	if err := Migrate(t.Context(), &b, Options{Runner: "prism", Out: out, KeepConfigs: keep}); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if !strings.Contains(b.String(), "All checks passed") || !strings.Contains(b.String(), filepath.Join(out, "plan", "report.html")) {
		t.Errorf("demo output:\n%s", b.String())
	}
	names := []string{"1-spanner-useraccesslogs", "2-spanner-customers", "3-datastore-customer"}
	for i, name := range names {
		path := filepath.Join(keep, name+".yaml")
		cfg, err := config.LoadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if i == 0 {
			logsShards(t, cfg.Target)
		}
		_, res, err := migration.Run(t.Context(), cfg, migration.Options{}, pipeline.Runner{Runner: "prism"})
		if err != nil {
			t.Fatalf("running %s again: %v", path, err)
		}
		if n := res.Counters[migration.Written]; n != 2000 || res.Counters[migration.DeadLettered] != 0 {
			t.Errorf("%s again: %s", path, res.Counters)
		}
	}
}

// logsShards checks the shards of the access-log migration's target.
func logsShards(t *testing.T, target config.Endpoint) {
	t.Helper()
	c, err := emulator.SpannerClient(t.Context(), spannerdb.DatabasePath(target.Project, target.Instance, target.Database))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := map[[2]string]int64{}
	err = c.Single().Query(t.Context(), spanner.Statement{SQL: "SELECT ShardId, LastAccess, UserId FROM " + target.Table}).Do(func(r *spanner.Row) error {
		var shard int64
		var ts time.Time
		var user string
		if err := r.Columns(&shard, &ts, &user); err != nil {
			return err
		}
		got[[2]string{ts.UTC().Format(time.RFC3339Nano), user}] = shard
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkShards(t, target.Database+"."+target.Table, got)
}
