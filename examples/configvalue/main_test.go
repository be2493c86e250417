package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
)

// outside builds the examples' applications as a module of their own
// that requires rekey (replaced by this checkout), the way code outside
// rekey's module builds them: Go refuses any import of rekey's internal
// packages there. It returns the directory of the built programs.
func outside(t *testing.T, extra map[string]string) (string, error) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"configvalue/main.go": "examples/configvalue/main.go",
		"staged/main.go":      "examples/staged/app/main.go",
		"accesslogs/main.go":  "examples/accesslogs/main.go",
	}
	for to, from := range files {
		b, err := os.ReadFile(filepath.Join(root, from))
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, to), string(b))
	}
	for to, text := range extra {
		write(t, filepath.Join(dir, to), text)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "go.mod"), fmt.Sprintf("module example.test/outside\n\n%s\nrequire github.com/rekeyio/rekey v0.0.0\n\nreplace github.com/rekeyio/rekey => %s\n", requirements(string(mod)), root))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "go.sum"), string(sum))
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "bin")+"/", "./...")
	cmd.Dir = dir
	// Offline: every module the examples need is the checkout's own.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v\n%s", err, out)
	}
	return filepath.Join(dir, "bin"), nil
}

// requirements returns the go line and the require directives of the
// go.mod text mod. The outside module requires what rekey does, at the
// same versions: with rekey alone, Go would walk rekey's dependencies'
// own requirements, and need go.mod files of versions no build of rekey
// downloads (which, offline, a fresh module cache lacks).
func requirements(mod string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(mod, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case in:
			b.WriteString(line + "\n")
			in = l != ")"
		case strings.HasPrefix(l, "require ("):
			b.WriteString(line + "\n")
			in = true
		case strings.HasPrefix(l, "go "), strings.HasPrefix(l, "require "):
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestExamplesUsePublicAPI: the three applications build outside the
// module, and a program there that imports an internal package does not
// (the check would catch an example that did).
func TestExamplesUsePublicAPI(t *testing.T) {
	if _, err := outside(t, nil); err != nil {
		t.Fatalf("the examples do not build outside the module: %v", err)
	}
	probe := "package main\n\nimport _ \"github.com/rekeyio/rekey/internal/store/emulator\"\n\nfunc main() {}\n"
	_, err := outside(t, map[string]string{"probe/main.go": probe})
	if err == nil || !strings.Contains(err.Error(), "use of internal package") {
		t.Errorf("a program outside the module importing an internal package: %v; want Go to refuse it", err)
	}
}

// TestConfigValue runs the example, built outside the module, against
// the Firestore emulator in Datastore mode with new in a database of its
// own (the application's client of it): while alice's cohort is old the
// write goes to old only; once it is in dual_write (held for the cache
// TTL plus skew), to both.
func TestConfigValue(t *testing.T) {
	if os.Getenv("DATASTORE_EMULATOR_HOST") == "" {
		t.Skip("DATASTORE_EMULATOR_HOST is not set (scripts/test.sh starts the emulator)")
	}
	bin, err := outside(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	project, newDB := emulator.DatastoreProject(), "rekey-configvalue"
	oldNS, newNS := emulator.UniqueNamespace("cv-old"), emulator.UniqueNamespace("cv-new")
	mig := fmt.Sprintf("logs-%d", time.Now().UnixNano())
	const ttl, skew = time.Second, 300 * time.Millisecond
	run := func(page string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "configvalue"), "-project", project, "-old-namespace", oldNS, "-new-namespace", newNS,
			"-new-database", newDB, "-migration", mig, "-user", "alice", "-page", page, "-cache-ttl", ttl.String(), "-skew", skew.String())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("configvalue: %v\n%s", err, out)
		}
		return string(out)
	}
	oldC := emulator.TestDatastore(t)
	newC, err := datastoredb.Client(ctx, project, newDB)
	if err != nil {
		t.Fatal(err)
	}
	defer newC.Close()
	pages := func(c *datastore.Client, ns string) []string {
		t.Helper()
		var ents []struct{ User, Page string }
		if _, err := c.GetAll(ctx, datastore.NewQuery("Log").Namespace(ns).FilterField("User", "=", "alice"), &ents); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			out = append(out, e.Page)
		}
		return out
	}

	out := run("/v1")
	if !strings.Contains(out, `found true, Page "/v1"`) || !strings.Contains(out, "is old") {
		t.Errorf("in old: %s", out)
	}
	if o, n := pages(oldC, oldNS), pages(newC, newNS); len(o) != 1 || o[0] != "/v1" || len(n) != 0 {
		t.Errorf("in old: old holds %q, new %q; want [/v1] and nothing", o, n)
	}

	k := cohort.Of("alice", cohort.DefaultBuckets)
	st := phases.DatastoreStore{Client: newC, Namespace: newNS}
	if _, _, err := st.Move(ctx, phases.Move{Migration: mig, Cohorts: []cohort.Range{{First: k, Last: k}}, To: cutover.DualWrite, Force: true, Who: "test"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl + skew) // the library writes new once dual_write is held that long
	out = run("/v2")
	if !strings.Contains(out, `found true, Page "/v2"`) || !strings.Contains(out, "is dual_write") {
		t.Errorf("in dual_write: %s", out)
	}
	if o, n := pages(oldC, oldNS), pages(newC, newNS); len(o) != 1 || o[0] != "/v2" || len(n) != 1 || n[0] != "/v2" {
		t.Errorf("in dual_write: old holds %q, new %q; want [/v2] in both", o, n)
	}
}
