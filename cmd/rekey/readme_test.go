package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The README promises two commands that work as written on a fresh
// clone: the demo and the test suite. TestReadmeTryItDemo runs the first
// at the repository's root exactly as the README's fenced block shows it
// (CI runs the suite on a fresh clone of main, so there it is a fresh
// clone; a copy of the tracked files elsewhere would build every rekey
// package again, minutes of CPU, for nothing more), and checks that the
// second is what CI runs.

// tryItCommands returns the command lines of the README's "Try it"
// section's first fenced block, comments removed.
func tryItCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## Try it")
	if i < 0 {
		t.Fatal(`README.md has no "## Try it" section`)
	}
	s = s[i+1:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(s)
	if block == nil {
		t.Fatal(`README.md's "Try it" section has no sh block`)
	}
	var cmds []string
	for _, line := range strings.Split(block[1], "\n") {
		if k := strings.Index(line, " #"); k >= 0 {
			line = line[:k]
		}
		if line = strings.TrimSpace(line); line != "" {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

func TestReadmeTryItCommands(t *testing.T) {
	cmds := tryItCommands(t)
	if len(cmds) != 2 || !strings.Contains(cmds[0], " demo") || cmds[1] != "bash scripts/test.sh" {
		t.Fatalf("README's Try it block: %q; want the demo, then bash scripts/test.sh", cmds)
	}
	ci, err := os.ReadFile(filepath.Join(repoRoot, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(cmds[1]) + `\b`).Match(ci) {
		t.Errorf(".ci/run does not call %q, the README's test command", cmds[1])
	}
}

// TestReadmeTryItDemo runs the README's demo command at the
// repository's root. It needs the emulators (scripts/test.sh starts them).
func TestReadmeTryItDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rekey in a fresh tree and runs the demo")
	}
	if os.Getenv("SPANNER_EMULATOR_HOST") == "" || os.Getenv("DATASTORE_EMULATOR_HOST") == "" {
		t.Skip("needs the emulators: run it with scripts/test.sh")
	}
	demo := tryItCommands(t)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", demo)
	cmd.Dir = repoRoot
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s: %s", demo, time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("%s: %v\n%s", demo, err, tail(out.String(), 4000))
	}
	if want := "All checks passed"; !strings.Contains(out.String(), want) {
		t.Errorf("%s did not say %q:\n%s", demo, want, tail(out.String(), 4000))
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
