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
