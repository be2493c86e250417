package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/emulator"
)

// planDir is a fresh --out directory holding the given files.
func planDir(t *testing.T, files ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "plan")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Flags that cannot make a plan are usage errors, exit 2, before Beam
// starts or the config is read (it does not exist here).
func TestPlanUsageErrors(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "missing.yaml")
	users := planDir(t, "notes.txt")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sample", "10", "--all"}, "give --sample N or --all, not both"},
		{[]string{"--sample", "0"}, "--sample must be at least 1"},
		{[]string{"--sample", "-3"}, "--sample must be at least 1"},
		{[]string{"--nodes", "0"}, "--nodes must be at least 1"},
		{[]string{"--rows", "-1"}, "cannot be negative"},
		{[]string{"--presplit", "-1"}, "cannot be negative"},
		{[]string{"--split-delay", "-1m"}, "cannot be negative"},
		{[]string{"--runner", "dataflow"}, "give --keys gs://BUCKET/DIR"},
		{[]string{"--runner", "dataflow", "--keys", "/tmp/keys"}, "give --keys gs://BUCKET/DIR"},
		{[]string{"--out", users}, "holds files that are not a plan's"},
		{[]string{"--all", "--out", users}, "holds files that are not a plan's"},
	} {
		args := append([]string{"plan", "-c", cfg, "--out", planDir(t)}, tc.args...)
		out, errs, code := rekey(t, "", args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit %d saying %q", tc.args, code, errs, out, exitUsage, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(users, "notes.txt")); err != nil {
		t.Errorf("the user's file: %v", err)
	}
}

// A plan replaces only its own files: --out may be new, empty or an
// earlier plan's directory, not one holding other files.
func TestPlanOutKeepsUserFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  string
		ok   bool
	}{
		{"missing", filepath.Join(t.TempDir(), "new"), true},
		{"empty", planDir(t), true},
		{"an earlier plan's", planDir(t, "plan.json", "report.html", "heatmap.png"), true},
		{"a user's files", planDir(t, "report.html", "data.csv"), false},
	} {
		err := keepUserFiles(tc.dir)
		if tc.ok && err != nil || !tc.ok && (err == nil || !isUsage(err) || !strings.Contains(err.Error(), tc.dir)) {
			t.Errorf("--out %s (%s): %v", tc.dir, tc.name, err)
		}
	}
	file := filepath.Join(planDir(t, "plan.json"), "plan.json")
	if err := keepUserFiles(file); err == nil || !isUsage(err) {
		t.Errorf("--out a file: %v, want a usage error", err)
	}
}

// TestPlanEndToEnd runs `rekey plan` on a JSON Lines file of sequential
// ids created one a second, for a Spanner table rewritten with
// bitreverse: it prints the summary, writes the report into --out and
// removes the sampled keys; the target table stays empty.
func TestPlanEndToEnd(t *testing.T) {
	keepBeamGlobals(t)
	db, path := emulator.TestDBPath(t, `CREATE TABLE EventsV2 (Id INT64 NOT NULL, Created TIMESTAMP, Page STRING(MAX)) PRIMARY KEY (Id)`)
	dir := t.TempDir()
	var in strings.Builder
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 2000 {
		fmt.Fprintf(&in, `{"Id": %d, "Created": %q, "Page": "/p/%d"}`+"\n", i+1, start.Add(time.Duration(i)*time.Second).Format(time.RFC3339), i%7)
	}
	if err := os.WriteFile(filepath.Join(dir, "events.jsonl"), []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeTestConfig(t, fmt.Sprintf(`
source: {type: jsonl, path: %q, table: Events, key: "Id INT64"}
target: {type: spanner, project: %s, instance: %s, database: %s, table: EventsV2}
rewrite: {strategy: bitreverse}
dead_letter: "%%s/dead.jsonl"`, filepath.Join(dir, "events.jsonl"), emulator.SpannerProject(), emulator.SpannerInstance(), filepath.Base(path)))
	report := filepath.Join(dir, "report")
	out, errs, code := rekey(t, "", "plan", "-c", cfg, "--sample", "1000", "--rows", "2000000", "--out", report)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	// The key grows with the file's line order too: the read position
	// each record carries names the file.
	for _, want := range []string{"sample: 1,000 records of 2,000,000", "monotonic-key", "order of the records in " + filepath.Join(dir, "events.jsonl"), "rewritten keys: no findings", "\n    before ", "\n    after ", "report: " + filepath.Join(report, "report.html")} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout does not say %q:\n%s", want, out)
		}
	}
	// The pipeline's progress ends with what the plan read, whatever the
	// last progress line said.
	if want := "rekey: plan: 2,000 records read, 1,000 sampled, 0 dead-lettered"; !strings.Contains(errs, want) || strings.Contains(errs, "(a dry run)") {
		t.Errorf("stderr does not say %q (or calls the plan a dry run):\n%s", want, errs)
	}
	entries, err := os.ReadDir(report)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "heatmap.png plan.json rate.png report.html spread.png" && got != "dead-letters.jsonl heatmap.png plan.json rate.png report.html spread.png" {
		t.Errorf("--out holds %s; want the report's files and no keys directory", got)
	}
	// A second plan into the same directory replaces the first.
	if _, errs, code := rekey(t, "", "plan", "-c", cfg, "--sample", "500", "--out", report); code != exitOK {
		t.Errorf("a second plan into %s: exit %d: %s", report, code, errs)
	}
	var rows int64
	err = db.Single().Query(context.Background(), spanner.Statement{SQL: "SELECT COUNT(*) FROM EventsV2"}).
		Do(func(r *spanner.Row) error { return r.Columns(&rows) })
	if err != nil || rows != 0 {
		t.Errorf("the target table holds %d rows (%v), want none", rows, err)
	}
}

// TestPlanFileToDatastore plans a JSON Lines file of Datastore entities
// into a Datastore kind: every record is sampled (the read position the
// plan gives a file's records stayed in the rewritten entity, whose
// __names__ are reserved, and dead-lettered every one of them).
func TestPlanFileToDatastore(t *testing.T) {
	emulator.RequireDatastore(t)
	keepBeamGlobals(t)
	dir := t.TempDir()
	var in strings.Builder
	for i := range 300 {
		fmt.Fprintf(&in, `{"__key__":{"path":["Customer","Customer%d"]},"Name":"c%d"}`+"\n", i+1, i+1)
	}
	if err := os.WriteFile(filepath.Join(dir, "customers.jsonl"), []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeTestConfig(t, fmt.Sprintf(`
source: {type: jsonl, path: %q}
target: {type: datastore, project: %s, namespace: plan-file-%d, kind: Customer}
rewrite: {strategy: uuid, params: {version: 5}}
dead_letter: %q`, filepath.Join(dir, "customers.jsonl"), emulator.DatastoreProject(), time.Now().UnixNano(), filepath.Join(dir, "dead")))
	out, errs, code := rekey(t, "", "plan", "-c", cfg, "--out", filepath.Join(dir, "report"))
	if code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	for _, want := range []string{"sample: 300 records of 300", "sequential-names", "3 servers", "pass --rows", "report: "} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "dead-lettered") {
		t.Errorf("the plan dead-lettered records:\n%s\n%s", out, errs)
	}
}
