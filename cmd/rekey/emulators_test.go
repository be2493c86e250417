package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/golden"
	"github.com/rekeyio/rekey/migration/config"
)

func TestEmulatorsStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", stateFileName)
	st, ok, err := readState(path)
	if err != nil || ok || st.Emulators == nil || len(st.Emulators) != 0 {
		t.Fatalf("readState of a missing file = %+v, %v, %v; want empty, false, nil", st, ok, err)
	}
	want := emulatorState{Emulators: map[emulator.Kind]emulator.Launched{
		emulator.Spanner:   {Kind: emulator.Spanner, Host: "127.0.0.1:9010", PID: 4242, StartTicks: 99, Bin: "/x/emulator_main", Log: "/run/s.log"},
		emulator.Datastore: {Kind: emulator.Datastore, Host: "127.0.0.1:8081", PID: 4343, Bin: "/x/cloud_firestore_emulator", Log: "/run/d.log"},
	}}
	if err := writeState(path, want); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file: %v, %v; want mode 0600", fi, err)
	}
	got, ok, err := readState(path)
	if err != nil || !ok || len(got.Emulators) != 2 || got.Emulators[emulator.Spanner] != want.Emulators[emulator.Spanner] || got.Emulators[emulator.Datastore] != want.Emulators[emulator.Datastore] {
		t.Fatalf("read back %+v, %v, %v; want %+v", got, ok, err, want)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), stateFileName+".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// Nothing recorded: the file goes.
	if err := writeState(path, emulatorState{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file after recording nothing: %v", err)
	}
	if err := writeState(path, emulatorState{}); err != nil {
		t.Errorf("removing a missing state file: %v", err)
	}
}

func TestEmulatorsStateFileRefusesOthers(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"not json":         "hello\n",
		"unknown emulator": `{"emulators": {"mysql": {"pid": 5}}}`,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := readState(path); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "remove it") {
			t.Errorf("%s: readState = %v; want an error naming the file and saying to remove it", name, err)
		}
	}
}

func TestEmulatorsStateDir(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/7")
	if got := stateDir("/s"); got != "/s" {
		t.Errorf("stateDir(/s) = %s", got)
	}
	if got := stateDir(""); got != "/run/user/7" {
		t.Errorf("stateDir with XDG_RUNTIME_DIR = %s", got)
	}
	t.Setenv("XDG_RUNTIME_DIR", "")
	if got := stateDir(""); got != os.TempDir() {
		t.Errorf("stateDir without XDG_RUNTIME_DIR = %s, want %s", got, os.TempDir())
	}
}

func TestEmulatorsExportText(t *testing.T) {
	got := exportText("127.0.0.1:9010", "127.0.0.1:8081", "my-project") +
		"# quoted:\n" + exportText("127.0.0.1:9010", "127.0.0.1:8081", "it's $HOME") +
		"# down:\n" + unsetText()
	golden.Check(t, filepath.Join("testdata", "emulators", "exports.golden"), got)
	// What the shell makes of it.
	out, err := exec.Command("sh", "-c", exportText("h:1", "h:2", `a 'b' "$c"`)+`printf '%s|%s|%s' "$SPANNER_EMULATOR_HOST" "$DATASTORE_EMULATOR_HOST" "$DATASTORE_PROJECT_ID"`).Output()
	if err != nil || string(out) != `h:1|h:2|a 'b' "$c"` {
		t.Errorf("sh read the exports as %q, %v", out, err)
	}
}

// TestEmulatorsNotes checks what up says for each kind of endpoint.
func TestEmulatorsNotes(t *testing.T) {
	spanner := func(db, table string) config.Endpoint {
		return config.Endpoint{Type: config.TypeSpanner, Project: "p", Instance: "local", Database: db, Table: table}
	}
	ds := config.Endpoint{Type: config.TypeDatastore, Project: "dp", Namespace: "ns", Kind: "Customer"}
	var b strings.Builder
	for _, tc := range []struct {
		name          string
		cfg           config.Config
		created       []bool // per endpoint
		again         []bool
		wantDSProject string
	}{
		{"spanner to spanner, one database", config.Config{Source: spanner("demo", "Logs"), Target: spanner("demo", "LogsByUser")}, []bool{true, false}, []bool{false, true}, bundledProject},
		{"spanner to spanner, existing databases", config.Config{Source: spanner("old", "Logs"), Target: spanner("new", "Logs")}, []bool{false, false}, []bool{false, false}, bundledProject},
		{"datastore to spanner", config.Config{Source: ds, Target: spanner("demo", "Customers")}, []bool{false, true}, []bool{false, false}, "dp"},
		{"jsonl to datastore, named database", config.Config{Source: config.Endpoint{Type: config.TypeJSONL, Path: "in.jsonl"}, Target: config.Endpoint{Type: config.TypeDatastore, Project: "tp", Database: "other-db", Kind: "K"}}, []bool{false, false}, []bool{false, false}, "tp"},
	} {
		b.WriteString("# " + tc.name + "\n")
		for i, e := range endpoints(&tc.cfg) {
			b.WriteString(storeNote(&tc.cfg, e, tc.created[i], tc.again[i], false))
		}
		if got := datastoreProject(&tc.cfg); got != tc.wantDSProject {
			t.Errorf("%s: DATASTORE_PROJECT_ID %s, want %s", tc.name, got, tc.wantDSProject)
		}
	}
	golden.Check(t, filepath.Join("testdata", "emulators", "notes.golden"), b.String())
}

func TestEmulatorsFlags(t *testing.T) {
	for _, args := range [][]string{
		{"emulators", "up", "--spanner-port", "-1"},
		{"emulators", "up", "--datastore-port", "70000"},
		{"emulators", "up", "extra"},
		{"emulators", "down", "extra"},
		{"emulators", "sideways"},
		{"emulators"},
	} {
		if _, errs, code := rekey(t, "", args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d (usage); stderr %s", args, code, exitUsage, errs)
		}
	}
}

func TestEmulatorsDownWithNothingRecorded(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := rekey(t, "", "emulators", "down", "--state", dir)
	if code != 0 || !strings.Contains(errs, "no emulators recorded in "+filepath.Join(dir, stateFileName)) || out != unsetText() {
		t.Errorf("down with nothing recorded: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestEmulatorsUpNotInstalled(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SPANNER_EMULATOR_BIN", filepath.Join(dir, "no-emulator"))
	out, errs, code := rekey(t, "", "emulators", "up", "--state", dir)
	if code != exitFailure || out != "" || !strings.Contains(errs, "gcloud components install cloud-spanner-emulator") {
		t.Errorf("up without the Spanner emulator: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, stateFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file after a failed up: %v", err)
	}
}

// helperEnv makes the test binary run the CLI (TestEmulatorsCLIProcess).
const helperEnv = "GO_TEST_RUN_REKEY_CLI"

// TestEmulatorsCLIProcess is not a test: with GO_TEST_RUN_REKEY_CLI=1 the
// test binary is the rekey command, given the arguments after "--", as a
// process of its own.
func TestEmulatorsCLIProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process")
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(exitCode(run(context.Background(), args, os.Stdin, os.Stdout, os.Stderr), os.Stderr))
}

// cliInShell runs `out="$(rekey ARGS)"` in sh, as a user's eval does, and
// returns the output and standard error. A process the command leaves
// holding its standard output would keep the shell waiting: the test
// would time out.
func cliInShell(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	sh := `out="$("$0" -test.run='^TestEmulatorsCLIProcess$' -- "$@")" || exit $?; printf '%s\n' "$out"`
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", sh, os.Args[0]}, args...)...)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rekey %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errb.String())
	}
	return string(out), errb.String()
}

// parseExports reads "export NAME=VALUE" lines (unquoted values).
func parseExports(t *testing.T, out string) map[string]string {
	t.Helper()
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok || !strings.HasPrefix(line, "export ") {
			t.Fatalf("stdout line %q is not an export", line)
		}
		vars[name] = value
	}
	return vars
}

// TestEmulatorsUpDown starts the real emulators as a user would (each
// command a process of its own, its output read by a shell), checks that
// the config's Spanner database exists and the Datastore emulator takes
// the config's kind, that a second up reuses them, and that down stops
// them all.
func TestEmulatorsUpDown(t *testing.T) {
	for _, k := range emulator.Kinds {
		if _, err := emulator.Binary(k); errors.Is(err, emulator.ErrNotInstalled) {
			t.Skip(err)
		}
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "migration.yaml")
	if err := os.WriteFile(cfg, []byte(`source:
  type: datastore
  project: try-local
  namespace: shop
  kind: Customer
  key: CustomerId INT64
target:
  type: spanner
  project: try-local
  instance: local
  database: customers
  table: Customers
rewrite:
  strategy: bitreverse
`), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	statePath := filepath.Join(state, stateFileName)
	start := time.Now()
	out, errs := cliInShell(t, "emulators", "up", "-c", cfg, "--state", state)
	t.Logf("up took %s; stderr:\n%s", time.Since(start).Round(time.Millisecond), errs)
	st, ok, err := readState(statePath)
	if err != nil || !ok || len(st.Emulators) != 2 {
		t.Fatalf("state after up: %+v, %v, %v", st, ok, err)
	}
	t.Cleanup(func() { // should the test fail before down
		for _, l := range st.Emulators {
			_ = syscall.Kill(-l.PID, syscall.SIGKILL)
		}
	})
	spanner, ds := st.Emulators[emulator.Spanner], st.Emulators[emulator.Datastore]
	vars := parseExports(t, out)
	want := map[string]string{emulator.EnvSpannerHost: spanner.Host, emulator.EnvDatastoreHost: ds.Host, emulator.EnvDatastoreProject: "try-local"}
	if len(vars) != len(want) {
		t.Errorf("exports %v, want %v", vars, want)
	}
	for k, v := range want {
		if vars[k] != v {
			t.Errorf("export %s=%s, want %s", k, vars[k], v)
		}
	}
	for _, want := range []string{"started the Spanner emulator", "started the Firestore emulator", "created the Spanner database projects/try-local/instances/local/databases/customers", "kind Customer: nothing to create"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}

	// The database is there, on the emulator up exported; the Datastore
	// emulator takes an entity of the config's kind.
	for k, v := range vars {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	admin, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.GetDatabase(ctx, &databasepb.GetDatabaseRequest{Name: "projects/try-local/instances/local/databases/customers"}); err != nil {
		t.Errorf("the config's database: %v", err)
	}
	dc, err := emulator.DatastoreClient(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	key := datastore.IDKey("Customer", 7, nil)
	key.Namespace = "shop"
	if _, err := dc.Put(ctx, key, &struct{ Name string }{"Ada"}); err != nil {
		t.Errorf("put into the Datastore emulator: %v", err)
	}

	// A second up reuses both and finds the database there; its --ddl
	// creates one's own table in the config's Spanner database (here the
	// target's: the source is Datastore).
	ddl := filepath.Join(dir, "schema.sql")
	if err := os.WriteFile(ddl, []byte("-- mine\nCREATE TABLE Customers (CustomerId INT64 NOT NULL, Name STRING(MAX)) PRIMARY KEY (CustomerId);\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out2, errs2 := cliInShell(t, "emulators", "up", "-c", cfg, "--state", state, "--ddl", ddl)
	if want := "rekey: target: ran 1 statement of " + ddl + " in projects/try-local/instances/local/databases/customers"; !strings.Contains(errs2, want) {
		t.Errorf("up --ddl: stderr lacks %q:\n%s", want, errs2)
	}
	if ddlText, err := admin.GetDatabaseDdl(ctx, &databasepb.GetDatabaseDdlRequest{Database: "projects/try-local/instances/local/databases/customers"}); err != nil || len(ddlText.Statements) != 1 || !strings.Contains(ddlText.Statements[0], "CREATE TABLE Customers") {
		t.Errorf("the database's DDL after up --ddl: %v, %v", ddlText, err)
	}
	if out2 != out {
		t.Errorf("second up exports\n%s\nwant\n%s", out2, out)
	}
	if strings.Count(errs2, "rekey: reusing the") != 2 || strings.Contains(errs2, "started the") || !strings.Contains(errs2, "databases/customers exists") {
		t.Errorf("second up: stderr\n%s", errs2)
	}
	if st2, _, _ := readState(statePath); st2.Emulators[emulator.Spanner] != spanner || st2.Emulators[emulator.Datastore] != ds {
		t.Errorf("state after the second up %+v, want %+v", st2, st)
	}

	out3, errs3 := cliInShell(t, "emulators", "down", "--state", state)
	if out3 != unsetText() || strings.Count(errs3, "rekey: stopped the") != 2 {
		t.Errorf("down: stdout %q, stderr\n%s", out3, errs3)
	}
	for _, l := range st.Emulators {
		if left := groupProcesses(t, l.PID); len(left) > 0 {
			t.Errorf("the %s's process group %d still has running processes: %s", l.Kind.Title(), l.PID, left)
		}
		if l.Answers() {
			t.Errorf("the %s still answers on %s", l.Kind.Title(), l.Host)
		}
		if _, err := os.Stat(l.Log); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("log %s after down: %v", l.Log, err)
		}
	}
	if _, err := os.Stat(statePath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file after down: %v", err)
	}
	_, errs4 := cliInShell(t, "emulators", "down", "--state", state)
	if !strings.Contains(errs4, "nothing to stop") {
		t.Errorf("second down: stderr %s", errs4)
	}
}

// groupProcesses lists, as ps shows them, the processes of process group
// pgid that are not zombies (which remain where init does not reap them).
func groupProcesses(t *testing.T, pgid int) []string {
	t.Helper()
	out, err := exec.Command("ps", "-eo", "pgid=,pid=,stat=,args=").Output()
	if err != nil {
		t.Fatalf("ps: %v", err)
	}
	var left []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == strconv.Itoa(pgid) && !strings.HasPrefix(f[2], "Z") {
			left = append(left, strings.TrimSpace(line))
		}
	}
	return left
}
