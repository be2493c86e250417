package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rekeyio/rekey/internal/store/emulator"
)

// TestInterruptSaysWhatWasDone stops `rekey run` with SIGINT at several
// moments: before its job starts (while it reads the target's schema),
// as the job is submitted and its worker starts, while it reads (JSON
// Lines to Spanner with a global shuffle, whose writes wait for the
// whole input) and while it writes. Each time rekey exits 130 saying
// that it was stopped, prints the counters of what it did, and writes
// its --summary with status "interrupted". Each moment is found from
// what rekey does or prints (its connections, the line before its job
// starts, its progress lines), not guessed from the time since its
// start.
func TestInterruptSaysWhatWasDone(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a large input")
	}
	keepBeamGlobals(t)
	in := filepath.Join(t.TempDir(), "logs.jsonl")
	var rows strings.Builder
	for i := range 300_000 {
		fmt.Fprintf(&rows, `{"Id": "u%07d", "Page": "/p/%d"}`+"\n", i, i)
	}
	if err := os.WriteFile(in, []byte(rows.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	progress := regexp.MustCompile(`(\d+) read, (\d+) written`)
	// counts are the read and written counts of the last progress line in
	// s, ok false before the first.
	counts := func(s string) (read, written int64, ok bool) {
		m := progress.FindAllStringSubmatch(s, -1)
		if m == nil {
			return 0, 0, false
		}
		read, _ = strconv.ParseInt(m[len(m)-1][1], 10, 64)
		written, _ = strconv.ParseInt(m[len(m)-1][2], 10, 64)
		return read, written, true
	}
	reading := func(s string) bool { r, w, ok := counts(s); return ok && r > 0 && w == 0 }
	writing := func(s string) bool { _, w, ok := counts(s); return ok && w > 0 }
	files := fmt.Sprintf(`
source: {type: jsonl, path: %q, table: Logs, key: "Id STRING(MAX)"}
target: {type: jsonl, path: "%%s/out.jsonl"}
rewrite: {strategy: hashprefix}
dead_letter: "%%s/dead.jsonl"`, in)
	// As the job is submitted: the line saying what runs comes just
	// before.
	t.Run("jsonl/submit", func(t *testing.T) {
		interruptAt(t, writeTestConfig(t, files), nil, func(s string) bool { return strings.Contains(s, "with hashprefix on prism") })
	})
	// Just after, while prism starts the job's worker (which it asks
	// rekey's loopback server for): a few moments a few milliseconds
	// apart, as the stop meets the worker's start at one of them.
	for _, after := range []time.Duration{5, 10, 15, 20, 25, 30} {
		t.Run(fmt.Sprintf("jsonl/worker+%dms", after), func(t *testing.T) {
			var seen time.Time
			interruptAt(t, writeTestConfig(t, files), nil, func(s string) bool {
				if seen.IsZero() && strings.Contains(s, "with hashprefix on prism") {
					seen = time.Now()
				}
				return !seen.IsZero() && time.Since(seen) >= after*time.Millisecond
			})
		})
	}
	// Before the job, while rekey reads the target table's schema: from a
	// Spanner "emulator" that takes connections and answers nothing. The
	// first connection is the check that it can be reached, the second
	// the client's.
	t.Run("before-job/schema", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		var accepted atomic.Int32
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				t.Cleanup(func() { c.Close() })
			}
		}()
		cfg := writeTestConfig(t, fmt.Sprintf(`
source: {type: jsonl, path: %q, table: Logs, key: "Id STRING(MAX)"}
target: {type: spanner, project: proj, instance: inst, database: db, table: Logs}
rewrite: {strategy: hashprefix}
dead_letter: "%%s/dead.jsonl"`, in))
		interruptAt(t, cfg, []string{"SPANNER_EMULATOR_HOST=" + l.Addr().String()}, func(string) bool { return accepted.Load() >= 2 })
	})

	if _, err := emulator.SpannerHost(); err != nil && os.Getenv(emulator.EnvSkip) == "1" {
		t.Skip("the Spanner moments need the Spanner emulator: ", err)
	}
	const ddl = `CREATE TABLE Logs (Id STRING(MAX) NOT NULL, Page STRING(MAX)) PRIMARY KEY (Id)`
	spannerCfg := func(t *testing.T, write string, ddl ...string) string {
		_, path := emulator.TestDBPath(t, ddl...)
		return writeTestConfig(t, fmt.Sprintf(`
source: {type: jsonl, path: %q, table: Logs, key: "Id STRING(MAX)"}
target: {type: spanner, project: %s, instance: %s, database: %s, table: Logs}
rewrite: {strategy: hashprefix}
dead_letter: "%%s/dead.jsonl"
write: {%s}`, in, emulator.SpannerProject(), emulator.SpannerInstance(), filepath.Base(path), write))
	}
	t.Run("spanner/shuffle", func(t *testing.T) {
		interruptAt(t, spannerCfg(t, "mode: upsert, shuffle: always", ddl), nil, reading)
	})
	t.Run("spanner/write", func(t *testing.T) {
		interruptAt(t, spannerCfg(t, "mode: upsert", ddl), nil, writing)
	})
}

// interruptAt runs `rekey run -c cfg --summary FILE` as a process of its
// own (the test binary as rekey's main) with env added to its
// environment, sends it SIGINT once what it printed satisfies moment,
// and checks what a stopped run must say and write.
func interruptAt(t *testing.T, cfg string, env []string, moment func(output string) bool) {
	t.Helper()
	text, state, summary := stopAt(t, cfg, env, moment, 1)
	if code := state.ExitCode(); code != 130 {
		t.Errorf("exit code %d, want 130", code)
	}
	for _, want := range []string{"rekey: stopped by SIGINT", "rekey: read="} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	b, err := os.ReadFile(summary)
	var s runSummary
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil || s.Status != "interrupted" || s.Stopped == "" {
		t.Errorf("summary (%v): status %q, stopped %q, want interrupted and what was stopped:\n%s", err, s.Status, s.Stopped, b)
	}
}

// A second SIGINT, a moment after the first, ends the run at once, by
// the signal as its default action does, and says so; unless the first
// stop was over by then, which says what it did. Either way something
// is said.
func TestInterruptTwiceSaysSo(t *testing.T) {
	in := filepath.Join(t.TempDir(), "logs.jsonl")
	if err := os.WriteFile(in, []byte(strings.Repeat(`{"Id": "a"}`+"\n", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeTestConfig(t, fmt.Sprintf(`
source: {type: jsonl, path: %q, table: Logs, key: "Id STRING(MAX)"}
target: {type: jsonl, path: "%%s/out.jsonl"}
rewrite: {strategy: hashprefix}
dead_letter: "%%s/dead.jsonl"`, in))
	text, state, _ := stopAt(t, cfg, nil, func(s string) bool { return strings.Contains(s, "with hashprefix on prism") }, 2)
	ws, _ := state.Sys().(syscall.WaitStatus)
	killed := strings.Contains(text, "rekey: a second SIGINT: stopped at once") && ws.Signaled() && ws.Signal() == syscall.SIGINT
	stopped := strings.Contains(text, "rekey: stopped by SIGINT") && strings.Contains(text, "rekey: read=") && state.ExitCode() == 130
	if !killed && !stopped {
		t.Errorf("%v, want killed by SIGINT saying so, or exit 130 saying what was done:\n%s", state, text)
	}
}

// stopAt runs `rekey run -c cfg --summary FILE` as interruptAt says and
// sends it n SIGINTs at the moment, and returns what it printed, how it
// ended and the summary's path.
func stopAt(t *testing.T, cfg string, env []string, moment func(output string) bool, n int) (string, *os.ProcessState, string) {
	t.Helper()
	summary := filepath.Join(filepath.Dir(cfg), "summary.json")
	cmd := exec.Command(os.Args[0], "run", "-c", cfg, "--summary", summary)
	cmd.Env = append(append(os.Environ(), mainEnv+"=1"), env...)
	var mu sync.Mutex
	var out strings.Builder
	output := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	deadline := time.After(60 * time.Second)
wait:
	for !moment(output()) {
		select {
		case <-done:
			t.Fatalf("the run ended before the moment to stop it:\n%s", output())
		case <-deadline:
			t.Fatalf("no moment to stop the run within a minute:\n%s", output())
		case <-time.After(2 * time.Millisecond):
			continue wait
		}
	}
	for i := range n {
		if i > 0 {
			time.Sleep(time.Millisecond) // two signals at once are one
		}
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil && i == 0 {
			t.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(45 * time.Second):
		t.Fatalf("still running 45 s after SIGINT:\n%s", output())
	}
	text := output()
	t.Logf("stopped:\n%s", text[max(0, len(text)-800):])
	return text, cmd.ProcessState, summary
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
