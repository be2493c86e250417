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
// clone: the demo and the test suite. TestReadmeTryItOnAFreshClone runs
// the first in a copy of the repository's tracked files (what a clone
// holds: nothing built, no bin/), exactly as the README's fenced block
// shows it, and checks that the second is what CI runs.

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

// TestReadmeTryItOnAFreshClone runs the README's demo command in a fresh
// copy of the tracked files. It needs the emulators (scripts/test.sh
// starts them) and git.
func TestReadmeTryItOnAFreshClone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rekey in a fresh tree and runs the demo")
	}
	if os.Getenv("SPANNER_EMULATOR_HOST") == "" || os.Getenv("DATASTORE_EMULATOR_HOST") == "" {
		t.Skip("needs the emulators: run it with scripts/test.sh")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git to list the tracked files")
	}
	demo := tryItCommands(t)[0]
	clone := freshClone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", demo)
	cmd.Dir = clone
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s in a fresh clone: %s", demo, time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("%s in a fresh clone: %v\n%s", demo, err, tail(out.String(), 4000))
	}
	if want := "All checks passed"; !strings.Contains(out.String(), want) {
		t.Errorf("%s in a fresh clone did not say %q:\n%s", demo, want, tail(out.String(), 4000))
	}
}

// freshClone copies the repository's tracked files, as they are in the
// working tree, into a new folder: what a clone of this tree holds.
func freshClone(t *testing.T) string {
	t.Helper()
	list, err := exec.Command("git", "-C", repoRoot, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "rekey")
	n := 0
	for _, name := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(repoRoot, name))
		if os.IsNotExist(err) {
			continue // deleted in the working tree, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(repoRoot, name))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n < 100 {
		t.Fatalf("git ls-files listed %d files; the copy would not be the repository", n)
	}
	return dst
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
