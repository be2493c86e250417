package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
)

// TestCohortCleanupFlags: the flags and Beam's reach the options; what is
// missing or wrong is a usage error saying what, before anything runs.
func TestCohortCleanupFlags(t *testing.T) {
	var got *RunOptions
	cmd := newCmdCohortCleanup(&factory{}, func(o *RunOptions) error { got = o; return nil })
	if _, err := execCmd(t, cmd, "-c", "m.yaml", "--migration", "logs", "--cohorts", "0-9,20", "--force", "--why", "done in May", "--runner", "direct", "--dry_run"); err != nil {
		t.Fatal(err)
	}
	if got.Config != "m.yaml" || got.Migration != "logs" || got.Cohorts != "0-9,20" || !got.Force || got.Why != "done in May" || got.Runner != "direct" || !slices.Equal(got.BeamArgs, []string{"--dry_run=true"}) {
		t.Errorf("options %+v", *got)
	}
	never := func(*RunOptions) error { t.Error("runF called"); return nil }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--migration", "m", "--cohorts", "1"}, "cleanup: -c FILE is required"},
		{[]string{"-c", "m.yaml", "--cohorts", "1"}, "--migration NAME is required"},
		{[]string{"-c", "m.yaml", "--migration", "m"}, "--cohorts LIST is required"},
		{[]string{"-c", "m.yaml", "--migration", "m", "--cohorts", "1", "--runner", "spark"}, `--runner must be one of prism, direct, dataflow, universal, got "spark"`},
		{[]string{"-c", "m.yaml", "--migration", "m", "--cohorts", "1", "extra"}, "extra"},
		{[]string{"-c", "m.yaml", "--migration", "m", "--cohorts", "1", "--to", "done"}, "flag provided but not defined: --to"},
	} {
		_, err := execCmd(t, newCmdCohortCleanup(&factory{}, never), tc.args...)
		if !isUsage(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want a usage error with %q", tc.args, err, tc.want)
		}
	}
	// Through the root: the command is there, and a bad cohort list, a
	// config file that is not there, a target without a phase store are
	// usage errors too.
	cfg := writeTestConfig(t, `
source: {type: jsonl, path: "%s/in.jsonl", key: "Id STRING(MAX)"}
target: {type: spanner, project: p, instance: inst, database: db, table: T}
rewrite: {strategy: none}
cohort: {user: Id, buckets: 100}
`)
	files := writeTestConfig(t, `
source: {type: jsonl, path: "%s/in.jsonl", key: "Id STRING(MAX)"}
target: {type: jsonl, path: "%s/out.jsonl"}
rewrite: {strategy: none}
cohort: {user: Id, buckets: 100}
`)
	keepBeamGlobals(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cohort", "cleanup", "-c", cfg, "--migration", "m", "--cohorts", "100"}, "--cohorts:"},
		{[]string{"cohort", "cleanup", "-c", files, "--migration", "m", "--cohorts", "1", "--runner", "direct"}, "the phase store is kept at a Spanner or Datastore target; this config's target is jsonl"},
		{[]string{"cohort", "cleanup", "-c", cfg + ".missing", "--migration", "m", "--cohorts", "1"}, "missing"},
	} {
		_, errs, code := rekey(t, "", tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errs, exitUsage, tc.want)
		}
	}
}

// TestCohortCleanupCLI cleans up cohorts of a Spanner migration with
// `rekey cohort cleanup` on the emulator: a cohort not done is refused
// (exit 1, nothing deleted), a dry run says what it would delete, the
// cleanup deletes the done cohorts' rows of the old table (and no other),
// prints its counters and audit record, and `rekey cohort log` shows it.
func TestCohortCleanupCLI(t *testing.T) {
	keepBeamGlobals(t)
	ctx := context.Background()
	old := emulator.TestDB(t, `CREATE TABLE Logs (UserId STRING(36) NOT NULL, Seq INT64 NOT NULL, Page STRING(MAX)) PRIMARY KEY (UserId, Seq)`)
	storeDB := emulator.TestDB(t, phases.SpannerDDL...)
	id := func(c *spanner.Client) string { return c.DatabaseName()[strings.LastIndex(c.DatabaseName(), "/")+1:] }
	cfg := writeTestConfig(t, fmt.Sprintf(`
source: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: Logs}
target: {type: spanner, project: %[1]s, instance: %[2]s, database: %[4]s, table: LogsV2}
rewrite: {strategy: shard, params: {n: 8}}
dead_letter: "%%s/dead.jsonl"
cohort: {user: UserId, buckets: 100}
`, emulator.SpannerProject(), emulator.SpannerInstance(), id(old), id(storeDB)))
	var ms []*spanner.Mutation
	count := map[int]int{}
	for i := range 30 {
		u := fmt.Sprintf("u%d", i)
		count[cohort.Of(u, 100)] += 3
		for q := range int64(3) {
			ms = append(ms, spanner.Insert("Logs", []string{"UserId", "Seq", "Page"}, []any{u, q, "p"}))
		}
	}
	if _, err := old.Apply(ctx, ms); err != nil {
		t.Fatal(err)
	}
	c1, c2 := cohort.Of("u0", 100), cohort.Of("u1", 100)
	done := cohort.Format([]cohort.Range{{First: c1, Last: c1}, {First: c2, Last: c2}})
	want := count[c1] + count[c2]
	var other int // a cohort that stays old
	for c := range count {
		if c != c1 && c != c2 {
			other = c
			break
		}
	}
	rows := func() int {
		var n int64
		if err := old.Single().Query(ctx, spanner.Statement{SQL: "SELECT COUNT(*) FROM Logs"}).Do(func(r *spanner.Row) error { return r.Columns(&n) }); err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	cli := func(args ...string) (string, int) {
		t.Helper()
		var out, errb bytes.Buffer
		err := run(ctx, append(args, "-c", cfg, "--migration", "logs"), strings.NewReader(""), &out, &errb)
		code := exitCode(err, &errb)
		return out.String() + errb.String(), code
	}
	if out, code := cli("cohort", "prepare"); code != 0 {
		t.Fatalf("prepare: exit %d\n%s", code, out)
	}
	if out, code := cli("cohort", "advance", "--cohorts", done, "--to", "done", "--force"); code != 0 {
		t.Fatalf("advance: exit %d\n%s", code, out)
	}
	if out, code := cli("cohort", "cleanup", "--cohorts", fmt.Sprintf("%s,%d", done, other), "--runner", "direct"); code != exitFailure || !strings.Contains(out, fmt.Sprintf("cohorts %d are old, not done", other)) || rows() != 90 {
		t.Errorf("cleanup of a cohort in old: exit %d, %d rows left\n%s", code, rows(), out)
	}
	if out, code := cli("cohort", "cleanup", "--cohorts", done, "--runner", "direct", "--dry_run"); code != 0 || !strings.Contains(out, fmt.Sprintf("nothing was deleted; %d records would be deleted (Logs %d)", want, want)) || rows() != 90 {
		t.Errorf("dry run: exit %d, %d rows left\n%s", code, rows(), out)
	}
	// (--dry_run=false: Beam's flags are the process's, and this test's
	// process ran a dry run already.)
	out, code := cli("cohort", "cleanup", "--cohorts", done, "--runner", "direct", "--why", "verified", "--dry_run=false")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("deleted=%d", want)) || !strings.Contains(out, fmt.Sprintf("audit version 2: cleanup of cohorts %s (done)", done)) || !strings.Contains(out, ": verified") {
		t.Errorf("cleanup: exit %d\n%s", code, out)
	}
	if n := rows(); n != 90-want {
		t.Errorf("%d rows left, want %d", n, 90-want)
	}
	if out, code := cli("cohort", "log"); code != 0 || !strings.Contains(out, "(cleanup)") || !strings.Contains(out, "verified") {
		t.Errorf("log: exit %d\n%s", code, out)
	}
}
