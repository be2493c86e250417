// Package golden compares test output with golden files: Check fails the
// test when the file differs, or rewrites the file when the test binary
// runs with -update-golden (then review the diff before committing it).
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update-golden", false, "rewrite the golden files instead of comparing with them")

// Updating reports whether the test binary runs with -update-golden.
func Updating() bool { return *update }

// Check compares got with the file at path (relative to the test's
// package), or writes it with -update-golden.
func Check(t testing.TB, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update-golden writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test -run %s -update-golden rewrites it; review the diff):\n--- got\n%s\n--- want\n%s", path, t.Name(), got, want)
	}
}
