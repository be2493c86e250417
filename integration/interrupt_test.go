package integration

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/beamtest"
)

// TestInterruptStopsCleanly stops `rekey run` (JSON Lines -> JSON Lines,
// 1,500,000 records) with SIGINT or SIGTERM a second into the run, on
// prism and direct: it stops within 10 s with exit code 130 or 143, says
// that a re-run converges, prints the counters of what it did, and leaves
// no part file of the target or the dead letters behind.
func TestInterruptStopsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a large input")
	}
	bin := buildRekey(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range 1_500_000 {
		fmt.Fprintf(w, `{"Id": "u%07d", "Page": "/p/%d", "Bytes": %d}`+"\n", i, i, i)
	}
	if err := w.Flush(); err != nil || f.Close() != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		runner string
		sig    syscall.Signal
		code   int
	}{
		{"prism", syscall.SIGINT, 130},
		{"prism", syscall.SIGTERM, 143},
		{"direct", syscall.SIGINT, 130},
		{"direct", syscall.SIGTERM, 143},
	} {
		t.Run(fmt.Sprintf("%s/%v", tc.runner, tc.sig), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			cfg := writeConfig(t, fmt.Sprintf(`
source: {type: jsonl, path: %q, table: Logs, key: "Id STRING(MAX)"}
target: {type: jsonl, path: %q}
rewrite: {strategy: hashprefix}
dead_letter: %q
`, in, filepath.Join(out, "out.jsonl"), filepath.Join(out, "dead.jsonl")))
			p := startRekey(t, bin, cfg, "--runner", tc.runner)
			time.Sleep(time.Second)
			if p.exited() {
				t.Fatalf("the run ended before the signal:\n%s", p.out.String())
			}
			sent := time.Now()
			if err := p.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				t.Fatalf("still running 10 s after %v", tc.sig)
			}
			text := p.out.String()
			t.Logf("stopped %s after %v:\n%s", time.Since(sent).Round(time.Millisecond), tc.sig, text[max(0, len(text)-600):])
			if m := regexp.MustCompile(`read=(\d+) `).FindStringSubmatch(text); m == nil || m[1] == "0" {
				t.Errorf("the counters do not show a run stopped half way: %v", m)
			}
			if p.exitCode != tc.code {
				t.Errorf("exit code %d, want %d\n%s", p.exitCode, tc.code, text)
			}
			for _, want := range []string{"a re-run of the same config converges", "read="} {
				if !strings.Contains(text, want) {
					t.Errorf("output lacks %q:\n%s", want, text)
				}
			}
			parts, _ := filepath.Glob(filepath.Join(out, "*.part-*"))
			if len(parts) > 0 {
				t.Errorf("part files left behind: %v", parts)
			}
		})
	}
}

// TestInterruptOnWorkerPool stops a JSON Lines → Spanner run whose worker
// is another process (the worker pool, --environment_type EXTERNAL, as a
// Flink or Spark job server runs it) with SIGINT once rows have landed.
// rekey does not claim a stop that has not happened: it cancels the job,
// waits for the job server to report it ended, and says so (or that it
// could not confirm it) before it exits; its --summary says
// "interrupted". Judged by the store: once rekey has exited, the table
// does not grow any more (the engine stopped the worker).
func TestInterruptOnWorkerPool(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a large input")
	}
	endpoint := beamtest.JobEndpoint(t)
	workers := beamtest.UseWorkerPool(t) // for its log; the job is rekey's, in its own process
	pool := os.Getenv(beamtest.EnvWorkerPool)
	bin := buildRekey(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	const n = 300_000
	for i := range n {
		fmt.Fprintf(w, `{"Id": "u%07d", "Page": "/p/%d"}`+"\n", i, i)
	}
	if err := w.Flush(); err != nil || f.Close() != nil {
		t.Fatal(err)
	}
	dbID, db := newSpannerTarget(t, "intpool", "CREATE TABLE Logs (Id STRING(MAX) NOT NULL, Page STRING(MAX)) PRIMARY KEY (Id)")
	summary := filepath.Join(dir, "summary.json")
	cfg := writeConfig(t, fmt.Sprintf(`
source: {type: jsonl, path: %q, table: Logs, key: "Id STRING(MAX)"}
target: {type: spanner, project: %s, instance: %s, database: %s, table: Logs}
rewrite: {strategy: hashprefix}
dead_letter: %q
`, in, emulator.SpannerProject(), emulator.SpannerInstance(), dbID, filepath.Join(dir, "dead.jsonl")))
	p := startRekey(t, bin, cfg, "--runner", "universal", "--endpoint", endpoint, "--environment_type", "EXTERNAL",
		"--environment_config", pool, "--shared-disk", "--summary", summary)
	deadline := time.Now().Add(2 * time.Minute)
	for countRows(t, db, "Logs") == 0 {
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("no row landed before the run ended or within 2 minutes:\n%s", p.out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatal("still running a minute after SIGINT")
	}
	atExit := countRows(t, db, "Logs")
	text := p.out.String()
	if p.exitCode != 130 {
		t.Errorf("exit code %d, want 130:\n%s", p.exitCode, text)
	}
	if !strings.Contains(text, "the job server reports the job CANCELLED") || !strings.Contains(text, "may still commit until the engine stops those workers") {
		t.Errorf("rekey does not say what the job server reported of the stop and what may still land:\n%s", text)
	}
	// What may still land are the commits in flight when the engine
	// stopped the worker; after that, nothing.
	started := workers.Started(t)
	for _, w := range started {
		workers.WaitExit(t, w.ID)
	}
	time.Sleep(2 * time.Second) // a commit sent before the worker died
	stopped := countRows(t, db, "Logs")
	time.Sleep(5 * time.Second)
	later := countRows(t, db, "Logs")
	t.Logf("%d rows when rekey exited, %d once its worker had stopped, %d five seconds later, of %d", atExit, stopped, later, n)
	if later != stopped {
		t.Errorf("the table grew from %d to %d rows after the job's worker had stopped", stopped, later)
	}
	if atExit >= n {
		t.Errorf("the whole input landed (%d rows): the run was not stopped half way", atExit)
	}
	b, err := os.ReadFile(summary)
	if err != nil || !strings.Contains(string(b), `"status": "interrupted"`) || !strings.Contains(string(b), `"stopped": "`) {
		t.Errorf("summary (%v):\n%s", err, b)
	}
}
