package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/beamtest"
)

// Where the job's workers are not this process (a job server's
// EXTERNAL or DOCKER environment, Dataflow), local paths are refused
// before anything runs, naming each key and flag and what to give
// instead; --shared-disk says the workers see this machine's files.
func TestRemoteWorkersRefuseLocalPaths(t *testing.T) {
	keepBeamGlobals(t)
	cfg := writeTestConfig(t, csvConfig)
	external := []string{"--runner", "universal", "--endpoint", "localhost:1", "--environment_type", "EXTERNAL", "--environment_config", "localhost:2"}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{append([]string{"run", "-c", cfg}, external...), []string{"source.path: ", "target.path: ", "dead_letter: ", "is a local path", "--shared-disk"}},
		{append([]string{"redrive", "-c", cfg, "--from", "dead.jsonl"}, external...), []string{"--from " + filepath.Join(mustGetwd(t), "dead.jsonl") + ": is a local path"}},
		{append([]string{"plan", "-c", cfg, "--shared-disk=false"}, external...), []string{"source.path: "}},
		{append([]string{"verify", "-c", cfg, "--migration", "m", "--cohorts", "1", "--report", "r.jsonl"}, external...), []string{"--report " + filepath.Join(mustGetwd(t), "r.jsonl") + ": is a local path"}},
	} {
		_, errs, code := rekey(t, "", c.args...)
		if code != exitUsage {
			t.Errorf("rekey %s: exit %d, want %d\n%s", strings.Join(c.args, " "), code, exitUsage, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("rekey %s: stderr lacks %q:\n%s", strings.Join(c.args, " "), w, errs)
			}
		}
	}
	// A plan of files on such workers needs --keys they can write.
	_, errs, code := rekey(t, "", append([]string{"plan", "-c", writeTestConfig(t, strings.Replace(csvConfig, `target: {type: jsonl, path: "%s/out.jsonl"}`, `target: {type: spanner, project: p, instance: i, database: d, table: T}`, 1)), "--shared-disk"}, external...)...)
	if code == 0 || strings.Contains(errs, "is a local path") {
		t.Errorf("plan --shared-disk: exit %d, refused the local paths:\n%s", code, errs)
	}
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// A run and a plan with their workers in other processes (the worker
// pool; each worker in a folder and TMPDIR of its own) and --shared-disk:
// the run's dead letters reach the launcher's path and its --summary has
// their stages and reasons; the plan with its default --out, a relative
// folder of the launcher's working folder, samples every record and
// leaves no keys behind, in its folder or the worker's.
func TestRunAndPlanOnWorkerPool(t *testing.T) {
	keepBeamGlobals(t)
	pool := beamtest.UseWorkerPool(t)
	cfg := writeTestConfig(t, csvConfig)
	dir := filepath.Dir(cfg)
	excelCSV(t, filepath.Join(dir, "access.csv"), "LastAccess,UserId,Note",
		"2024-01-31T12:00:00Z,u1,a", "2024-01-31T12:00:01Z,u2,b", `2024-01-31T12:00:02Z,"u3`)
	summary := filepath.Join(dir, "summary.json")
	out, errs, code := rekey(t, "", "run", "-c", cfg, "--runner", "universal", "--shared-disk", "--summary", summary)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d (partial)\nstdout: %s\nstderr: %s", code, exitFailure, out, errs)
	}
	var s runSummary
	b, err := os.ReadFile(summary)
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != "partial" || s.Counters["read"] != 3 || s.Counters["written"] != 2 || s.DeadLetters.Total != 1 || s.DeadLetters.ByStage["read"] != 1 || len(s.DeadLetters.Reasons) != 1 {
		t.Errorf("summary:\n%s", b)
	}
	if got := len(readLines(t, filepath.Join(dir, "out.jsonl"))); got != 2 {
		t.Errorf("out.jsonl has %d records, want 2", got)
	}
	workers := pool.Started(t)

	// The plan, from a working folder of its own, with the default --out.
	spanCfg := writeTestConfig(t, fmt.Sprintf(`
source: {type: csv, path: %q, table: UserAccessLog, key: "LastAccess STRING(MAX), UserId STRING(MAX)"}
target: {type: spanner, project: %s, instance: %s, database: plan-pool, table: UserAccessLog}
rewrite: {strategy: hashprefix}
dead_letter: %q`, filepath.Join(dir, "access.csv"), emulator.SpannerProject(), emulator.SpannerInstance(), filepath.Join(dir, "plan-dead.jsonl")))
	t.Chdir(t.TempDir())
	out, errs, code = rekey(t, "", "plan", "-c", spanCfg, "--runner", "universal", "--shared-disk")
	if code != exitOK {
		t.Fatalf("plan: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if !strings.Contains(out, "sample: 2 records of 3") || !strings.Contains(out, "1 dead-lettered") {
		t.Errorf("plan: stdout does not say it sampled both valid records and dead-lettered the third:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join("rekey-plan", "plan.json")); err != nil {
		t.Errorf("plan: no report in the launcher's ./rekey-plan: %v", err)
	}
	planWorkers := pool.Started(t)[len(workers):]
	if len(planWorkers) == 0 {
		t.Fatal("plan: the worker pool started no worker")
	}
	for _, w := range planWorkers {
		pool.WaitExit(t, w.ID)
		var left []string
		filepath.Walk(w.Dir, func(path string, info os.FileInfo, err error) error {
			rel, _ := filepath.Rel(w.Dir, path)
			if err == nil && !info.IsDir() && !strings.HasPrefix(rel, "staged") && rel != "worker.log" && rel != "pipeline_options.json" {
				left = append(left, rel)
			}
			return nil
		})
		if len(left) > 0 {
			t.Errorf("plan: worker %s left %v in its folder", w.ID, left)
		}
	}
}

// readLines reads a file's non-empty lines.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(strings.TrimSpace(string(b)))
}
