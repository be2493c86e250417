package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
)

// TestCohortOps moves cohorts with `rekey cohort advance` and `rollback`
// on the Spanner emulator, and reads them back with status and log.
func TestCohortOps(t *testing.T) {
	ddl := append([]string{"CREATE TABLE S (Id INT64 NOT NULL) PRIMARY KEY (Id)", "CREATE TABLE T (Id INT64 NOT NULL) PRIMARY KEY (Id)"}, phases.SpannerDDL...)
	c := emulator.TestDB(t, ddl...)
	db := c.DatabaseName()[strings.LastIndex(c.DatabaseName(), "/")+1:]
	cfg := writeTestConfig(t, fmt.Sprintf(`
source: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: S}
target: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: T}
rewrite: {strategy: none}
cohort: {user: Id, buckets: 100}
`, emulator.SpannerProject(), emulator.SpannerInstance(), db))
	rekey := func(args ...string) (string, error) {
		var out, errw bytes.Buffer
		err := run(context.Background(), append(args, "-c", cfg, "--migration", "m"), strings.NewReader(""), &out, &errw)
		return out.String() + errw.String(), err
	}
	// A first step of 11% is refused (at most 1%: one cohort of 100)
	// unless forced.
	if out, err := rekey("cohort", "advance", "--cohorts", "0-9,20", "--to", "dual_write", "--why", "first ten"); err == nil || !strings.Contains(err.Error(), "cohorts 0-9,20 would put 11.00% of the users at dual_write at once, and none are there yet: a first step moves at most 1% (1 cohort, e.g. --cohorts 0 or --percent 1); --force") || strings.Contains(out, "moved") {
		t.Fatalf("advance of 11%% at once: %v\n[%s]", err, out)
	}
	if out, err := rekey("cohort", "advance", "--cohorts", "0-9,20", "--to", "dual_write", "--why", "first ten", "--force"); err != nil || !strings.Contains(out, "moved cohorts 0-9,20 from old to dual_write (version 1)") {
		t.Fatalf("advance: %v\n[%s]", err, out)
	}
	// Each later step at most --max-growth times the share there.
	if out, err := rekey("cohort", "advance", "--cohorts", "30-99", "--to", "dual_write", "--max-growth", "2"); err == nil || !strings.Contains(err.Error(), "would take the users at dual_write or beyond from 11.00% to 81.00% in one step, more than 2 times as many (--max-growth): at most 11 more cohorts now") || strings.Contains(out, "moved") {
		t.Errorf("advance growing 7x with --max-growth 2: %v\n%s", err, out)
	}
	if out, err := rekey("cohort", "advance", "--cohorts", "0-9", "--to", "read_new"); err == nil || !strings.Contains(out+err.Error(), "read_new needs verified or shadow") {
		t.Errorf("advance past the rules: %v\n%s", err, out)
	}
	if out, err := rekey("cohort", "rollback", "--cohorts", "5-9", "--to", "old"); err != nil || !strings.Contains(out, "version 2") {
		t.Fatalf("rollback: %v\n%s", err, out)
	}
	out, err := rekey("cohort", "status")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"0-4", "dual_write", "5-9 ", "10-19 ", "20 ", "21-99", "5.00%", "version 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	// The rolled-back cohorts and those never moved are both old, apart.
	if !regexp.MustCompile(`(?m)^5-9 +old +5 +5\.00% +\d{4}-\S+ +\S+ +rolled back from dual_write$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^10-19 +old +10 +10\.00% +- +- +never moved$`).MatchString(out) {
		t.Errorf("status does not show 5-9 rolled back and 10-19 never moved apart:\n%s", out)
	}
	out, err = rekey("cohort", "log")
	if err != nil || !strings.Contains(out, "first ten") || !strings.Contains(out, "5-9") || strings.Count(out, "\n") != 3 {
		t.Errorf("log: %v\n%s", err, out)
	}
	// --percent moves the next cohorts in order, growing gradually.
	if out, err := rekey("cohort", "advance", "--percent", "8", "--to", "dual_write"); err == nil || !strings.Contains(err.Error(), "dwell") {
		t.Errorf("advance --percent within the dwell time: %v\n%s", err, out)
	}
	if out, err := rekey("cohort", "advance", "--percent", "20", "--to", "dual_write", "--dwell", "0s"); err == nil || !strings.Contains(err.Error(), "more than 2 times") {
		t.Errorf("advance --percent quadrupling: %v\n%s", err, out)
	}
	if out, err := rekey("cohort", "advance", "--percent", "12", "--to", "dual_write", "--dwell", "0s"); err != nil || !strings.Contains(out, "moved cohorts 5-10 from old to dual_write") {
		t.Errorf("advance --percent doubling: %v\n%s", err, out)
	}
	if out, err := rekey("cohort", "advance", "--percent", "5", "--to", "verified", "--dwell", "0s"); err == nil || !strings.Contains(err.Error(), "at most 1%") {
		t.Errorf("a first step of 5%%: %v\n%s", err, out)
	}
	if _, err := rekey("cohort", "rollback", "--cohorts", "1", "--to", "verified"); err == nil || !isUsage(err) {
		t.Errorf("rollback to verified: %v, want a usage error", err)
	}
}

// Completing `cohort advance --to` lists the phases after old, in order;
// `cohort rollback --to` dual_write and old.
func TestCohortCompleteTo(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		want []phases.Phase
	}{
		{"advance", phases.Phases[1:]},
		{"rollback", []phases.Phase{phases.DualWrite, phases.Old}},
	} {
		out, errs, code := rekey(t, "", "__complete", "cohort", tc.cmd, "--to", "")
		if code != 0 {
			t.Fatalf("__complete cohort %s --to: exit %d: %s", tc.cmd, code, errs)
		}
		var got []string
		for _, line := range strings.Split(out, "\n") {
			if line != "" && !strings.HasPrefix(line, ":") && !strings.HasPrefix(line, "Completion ended") {
				got = append(got, strings.SplitN(line, "\t", 2)[0])
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("completing cohort %s --to: %q, want %v\n%s", tc.cmd, got, tc.want, out)
		}
		if !strings.Contains(out, ":4\n") { // ShellCompDirectiveNoFileComp
			t.Errorf("completing cohort %s --to offers files:\n%s", tc.cmd, out)
		}
	}
	out, _, _ := rekey(t, "", "__complete", "cohort", "advance", "--to", "re")
	if !strings.Contains(out, "read_new\t") || strings.Contains(out, "shadow") {
		t.Errorf("completing --to re: %s", out)
	}
}
