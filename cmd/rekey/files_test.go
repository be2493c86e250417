package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// excelCSV writes the CSV file Excel's "CSV UTF-8" writes: a byte order
// mark, then CRLF lines.
func excelCSV(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("\uFEFF"+strings.Join(lines, "\r\n")+"\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// csvConfig is a config migrating DIR/access.csv to DIR/out.jsonl.
const csvConfig = `
source: {type: csv, path: "%s/access.csv", table: UserAccessLog, key: "LastAccess STRING(MAX), UserId STRING(MAX)"}
target: {type: jsonl, path: "%s/out.jsonl"}
rewrite: {strategy: hashprefix}
dead_letter: "%s/dead.jsonl"`

// An Excel CSV is migrated whole: every row, no dead letter.
func TestRunExcelCSV(t *testing.T) {
	keepBeamGlobals(t)
	cfg := writeTestConfig(t, csvConfig)
	dir := filepath.Dir(cfg)
	excelCSV(t, filepath.Join(dir, "access.csv"), "LastAccess,UserId,Note",
		"2024-01-31T12:00:00Z,u1,a", "2024-01-31T12:00:01Z,u2,b", "2024-01-31T12:00:02Z,u3,c")
	out, errs, code := rekey(t, "", "run", "-c", cfg, "--runner", "direct")
	if code != 0 || !strings.Contains(out, "read=3 rewritten=3 written=3 dead_lettered=0") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	written, err := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(written), "\n"); n != 3 || strings.Contains(string(written), `\r`) || !strings.Contains(string(written), `"Note":"c"`) {
		t.Errorf("%d lines written, want 3 without CRs:\n%s", n, written)
	}
}

// A CSV header that lacks a key column, or names one twice, is one
// config error naming the file and the header, before anything runs:
// no dead letters, no target; a dry run and validate --connect say the
// same.
func TestRunRefusesBadCSVHeader(t *testing.T) {
	keepBeamGlobals(t)
	for name, tc := range map[string]struct{ header, want string }{
		"no key column": {"Last Access,UserId,Note", `CSV header "Last Access,UserId,Note" has no key column LastAccess`},
		"duplicate":     {"LastAccess,UserId,UserId", `CSV header "LastAccess,UserId,UserId": "UserId" appears twice, as columns 2 and 3`},
	} {
		for _, dry := range []bool{false, true} {
			cfg := writeTestConfig(t, csvConfig)
			dir := filepath.Dir(cfg)
			csv := filepath.Join(dir, "access.csv")
			excelCSV(t, csv, tc.header, "2024-01-31T12:00:00Z,u1,a", "2024-01-31T12:00:01Z,u2,b")
			args := []string{"run", "-c", cfg, "--runner", "direct"}
			if dry {
				args = append(args, "--dry_run")
			}
			out, errs, code := rekey(t, "", args...)
			if code != exitUsage || !strings.Contains(errs, "source.path: "+csv+": "+tc.want) || strings.Count(errs, "CSV header") != 1 {
				t.Errorf("%s (dry run %v): exit %d, want %d and one %q\nstdout: %s\nstderr: %s", name, dry, code, exitUsage, tc.want, out, errs)
			}
			for _, f := range []string{"dead.jsonl", "out.jsonl"} {
				if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
					t.Errorf("%s (dry run %v): %s was written", name, dry, f)
				}
			}
			if dry {
				continue
			}
			if _, errs, code := rekey(t, "", "validate", "-c", cfg); code != 0 {
				t.Errorf("%s: validate without --connect: exit %d: %s", name, code, errs)
			}
			if _, errs, code := rekey(t, "", "validate", "--connect", "-c", cfg); code != exitUsage || !strings.Contains(errs, csv+": "+tc.want) {
				t.Errorf("%s: validate --connect: exit %d, want %d and %q: %s", name, code, exitUsage, tc.want, errs)
			}
		}
	}
}

// An input without records says so plainly and is no error.
func TestRunEmptySource(t *testing.T) {
	keepBeamGlobals(t)
	for _, text := range []string{"", "\uFEFFLastAccess,UserId\r\n"} {
		cfg := writeTestConfig(t, csvConfig)
		csv := filepath.Join(filepath.Dir(cfg), "access.csv")
		if err := os.WriteFile(csv, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errs, code := rekey(t, "", "run", "-c", cfg, "--runner", "direct")
		if want := "rekey: the source holds 0 records (csv " + csv + "): nothing to migrate\n"; code != 0 || !strings.Contains(out, want) {
			t.Errorf("%q: exit %d, want 0 and %q\nstdout: %s\nstderr: %s", text, code, want, out, errs)
		}
	}
}

// --summary writes the run's counters, timings and dead letters (by
// stage and reason) as one JSON object, for a partial run too.
func TestRunSummary(t *testing.T) {
	keepBeamGlobals(t)
	cfg := writeTestConfig(t, csvConfig)
	dir := filepath.Dir(cfg)
	excelCSV(t, filepath.Join(dir, "access.csv"), "LastAccess,UserId,Note",
		"2024-01-31T12:00:00Z,u1,a", "2024-01-31T12:00:01Z,u2,b", `2024-01-31T12:00:02Z,"u3`)
	summary := filepath.Join(dir, "summary.json")
	out, errs, code := rekey(t, "", "run", "-c", cfg, "--runner", "direct", "--summary", summary)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (partial)\nstdout: %s\nstderr: %s", code, out, errs)
	}
	b, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	var s runSummary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%v:\n%s", err, b)
	}
	if s.Command != "run" || s.Status != "partial" || s.Runner != "direct" || s.Counters["written"] != 2 || s.Counters["read"] != 3 || // read = written + dead-lettered
		s.DeadLetters.Total != 1 || s.DeadLetters.ByStage["read"] != 1 || len(s.DeadLetters.Reasons) != 1 || s.DeadLetters.Reasons[0].Count != 1 ||
		s.ElapsedSeconds <= 0 || s.Finished.Before(s.Started) || s.Target != "jsonl "+filepath.Join(dir, "out.jsonl") {
		t.Errorf("summary:\n%s", b)
	}
	// A run that fails before it starts still says so.
	_, _, code = rekey(t, "", "run", "-c", filepath.Join(dir, "missing.yaml"), "--runner", "direct", "--summary", summary)
	b, _ = os.ReadFile(summary)
	if code == 0 || !strings.Contains(string(b), `"status": "failed"`) || !strings.Contains(string(b), "missing.yaml") {
		t.Errorf("exit %d, summary of a failed run:\n%s", code, b)
	}
	if _, _, code := rekey(t, "", "run", "-c", cfg, "--summary", filepath.Join(dir, "no", "such", "s.json")); code != 2 {
		t.Errorf("--summary in a missing folder: exit %d, want 2", code)
	}
}
