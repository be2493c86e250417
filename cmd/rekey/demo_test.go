package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDemoOutAndKeepConfigsFlags(t *testing.T) {
	var got *DemoOptions
	cmd := newCmdDemo(&factory{}, func(o *DemoOptions) error { got = o; return nil })
	if _, err := execCmd(t, cmd, "--files", "--out", "o", "--keep-configs", "k"); err != nil {
		t.Fatal(err)
	}
	if !got.Files || got.Out != "o" || got.KeepConfigs != "k" {
		t.Errorf("demo: %+v", *got)
	}
	for _, args := range [][]string{{"--keys-only", "--out", "o"}, {"--keys-only", "--keep-configs", "k"}} {
		cmd := newCmdDemo(&factory{}, func(*DemoOptions) error { t.Error("runF called"); return nil })
		_, err := execCmd(t, cmd, args...)
		if want := "--keys-only runs no migration"; !isUsage(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("demo %v: %v; want a usage error with %q", args, err, want)
		}
	}
}

// `rekey demo --files --out DIR --keep-configs DIR` leaves the output and
// a config that `rekey run -c` runs again; a folder holding a user's
// files is refused before anything is written.
func TestDemoFilesOutKeepConfigs(t *testing.T) {
	out, keep := t.TempDir(), t.TempDir()
	stdout, errs, code := rekey(t, "", "demo", "--files", "--out", out, "--keep-configs", keep)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, errs)
	}
	kept := filepath.Join(keep, "files-useraccesslogs.yaml")
	for _, want := range []string{"written to " + filepath.Join(out, "user_access_logs_v2.jsonl"), "config kept: " + kept} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
	stdout, errs, code = rekey(t, "", "run", "-c", kept, "--overwrite")
	if code != 0 || !strings.Contains(errs+stdout, "written=2000") {
		t.Errorf("rekey run -c %s: exit %d\n%s\n%s", kept, code, stdout, errs)
	}

	users := t.TempDir()
	if err := os.WriteFile(filepath.Join(users, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, errs, code = rekey(t, "", "demo", "--files", "--out", users)
	if code == 0 || !strings.Contains(errs, "--out "+users+": the folder holds notes.txt, which the demo did not write") {
		t.Errorf("demo --out into a user's folder: exit %d, %s", code, errs)
	}
	if stdout != "" { // refused before the key table is shown
		t.Errorf("demo --out into a user's folder printed %.200q before refusing", stdout)
	}
	if entries, _ := os.ReadDir(users); len(entries) != 1 {
		t.Errorf("the refused folder changed: %v", entries)
	}
}
