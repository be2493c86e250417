package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/cohort"
)

func TestCohortIDFlags(t *testing.T) {
	var got *CohortIDOptions
	cmd := newCmdCohortID(&factory{}, func(o *CohortIDOptions) error { got = o; return nil })
	if _, err := execCmd(t, cmd, "-c", "m.yaml", "--buckets", "100", "alice", "", "bob"); err != nil {
		t.Fatal(err)
	}
	if got.Config != "m.yaml" || got.Buckets != 100 || !got.BucketsSet || !slices.Equal(got.IDs, []string{"alice", "", "bob"}) {
		t.Errorf("cohort id: %+v", *got)
	}
	cmd = newCmdCohortID(&factory{}, func(o *CohortIDOptions) error { got = o; return nil })
	if _, err := execCmd(t, cmd, "--config", "m.yaml"); err != nil {
		t.Fatal(err)
	}
	if got.Config != "m.yaml" || got.BucketsSet || len(got.IDs) != 0 {
		t.Errorf("cohort id defaults: %+v", *got)
	}
}

// cohortLines is what `rekey cohort id` prints for ids.
func cohortLines(buckets int, ids ...string) string {
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%s\t%d\n", id, cohort.Of(id, buckets))
	}
	return b.String()
}

func TestCohortID(t *testing.T) {
	// Spanner's figures, from cohort/testdata/vectors.tsv.
	out, errs, code := rekey(t, "", "cohort", "id", "a", "", "A")
	if want := "a\t2323\n\t5647\nA\t8948\n"; code != 0 || errs != "" || out != want {
		t.Errorf("cohort id a '' A: exit %d, stderr %q, stdout %q; want %q", code, errs, out, want)
	}
	out, _, code = rekey(t, "", "cohort", "id", "--buckets", "7", "a", "")
	if want := "a\t3\n\t4\n"; code != 0 || out != want {
		t.Errorf("--buckets 7: exit %d, %q; want %q", code, out, want)
	}

	// Ids on standard input, one a line: CRLF tolerated, nothing else
	// trimmed, an empty line is the empty id, the last line needs no line
	// feed.
	in := "alice\r\n bob \n\nuser-42\n日本語\r\nlast"
	out, errs, code = rekey(t, in, "cohort", "id", "--buckets", "100")
	if want := cohortLines(100, "alice", " bob ", "", "user-42", "日本語", "last"); code != 0 || errs != "" || out != want {
		t.Errorf("stdin: exit %d, stderr %q, stdout\n%q\nwant\n%q", code, errs, out, want)
	}
	if out, _, code := rekey(t, "a\nb\n", "cohort", "id"); code != 0 || out != cohortLines(10000, "a", "b") {
		t.Errorf("stdin ending in a line feed: exit %d, %q", code, out)
	}
	if out, _, code := rekey(t, "", "cohort", "id"); code != 0 || out != "" {
		t.Errorf("empty stdin: exit %d, %q", code, out)
	}
	long := strings.Repeat("x", 200_000) // longer than bufio.Scanner's default line
	if out, _, code := rekey(t, long+"\n", "cohort", "id"); code != 0 || out != cohortLines(10000, long) {
		t.Errorf("a 200,000-byte id: exit %d, %d bytes out", code, len(out))
	}
	// Arguments win over stdin.
	if out, _, code := rekey(t, "ignored\n", "cohort", "id", "a"); code != 0 || out != "a\t2323\n" {
		t.Errorf("arguments and stdin: exit %d, %q", code, out)
	}
}

// filesConfig is a valid config (a file-to-file migration) without a
// cohort section, for writeTestConfig.
const filesConfig = `
source: {type: jsonl, path: "%s/in.jsonl"}
target: {type: jsonl, path: "%s/out.jsonl"}
rewrite: {strategy: hashprefix}
`

func TestCohortIDBucketsFromConfig(t *testing.T) {
	file := writeTestConfig(t, filesConfig+"cohort: {user: Id, buckets: 100}\n")
	out, errs, code := rekey(t, "", "cohort", "id", "-c", file, "a", "bob")
	if want := cohortLines(100, "a", "bob"); code != 0 || errs != "" || out != want {
		t.Errorf("-c (buckets 100): exit %d, stderr %q, %q; want %q", code, errs, out, want)
	}
	out, _, code = rekey(t, "", "cohort", "id", "-c", file, "--buckets", "7", "a")
	if code != 0 || out != "a\t3\n" {
		t.Errorf("-c and --buckets 7: exit %d, %q; --buckets wins", code, out)
	}
	noCohort := writeTestConfig(t, filesConfig)
	if out, _, code := rekey(t, "", "cohort", "id", "-c", noCohort, "a"); code != 0 || out != "a\t2323\n" {
		t.Errorf("-c without a cohort section: exit %d, %q; want the default 10000", code, out)
	}
}

func TestCohortCLIUsageErrors(t *testing.T) {
	bad := writeTestConfig(t, filesConfig+"cohort: {user: 'key:', buckets: 2000000}\n")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"cohort"}, []string{"cohort: no subcommand given"}},
		{[]string{"cohort", "idd"}, []string{`unknown command "idd" for "rekey cohort"`, "Did you mean this?\n\tid"}},
		{[]string{"cohort", "id", "--buckets", "0", "a"}, []string{"cohort id: --buckets must be 1..1000000, got 0"}},
		{[]string{"cohort", "id", "--buckets", "1000001", "a"}, []string{"cohort id: --buckets must be 1..1000000, got 1000001"}},
		{[]string{"cohort", "id", "--buckets", "-3", "a"}, []string{"cohort id: --buckets must be 1..1000000, got -3"}},
		{[]string{"cohort", "id", "--buckets", "many", "a"}, []string{`invalid argument "many" for "--buckets"`}},
		{[]string{"cohort", "id", "--bukets", "5", "a"}, []string{"flag provided but not defined: --bukets (did you mean --buckets?)"}},
		{[]string{"cohort", "id", "-c", "/nonexistent/rekey.yaml", "a"}, []string{"/nonexistent/rekey.yaml"}},
		{[]string{"cohort", "id", "-c", bad, "a"}, []string{"cohort.buckets: must be 1..1000000, got 2000000", `cohort.user: "key:": key: needs the kind`}},
	} {
		out, errs, code := rekey(t, "", tc.args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", tc.args, code, exitUsage, errs)
		}
		for _, w := range tc.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", tc.args, w, errs)
			}
		}
		if strings.Contains(out, "\t") {
			t.Errorf("%v: printed cohorts: %q", tc.args, out)
		}
	}
}

func TestCohortCLIHelp(t *testing.T) {
	help, errs, code := rekey(t, "", "cohort", "id", "--help")
	if code != 0 || errs != "" {
		t.Fatalf("cohort id --help: exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{"rekey cohort id [--buckets B] [-c FILE] [ID...]", "--buckets int", "-c, --config", "MOD(MOD(FARM_FINGERPRINT(id), B) + B, B)", "ID<TAB>COHORT"} {
		if !strings.Contains(help, want) {
			t.Errorf("cohort id --help lacks %q:\n%s", want, help)
		}
	}
	if out, _, code := rekey(t, "", "help", "cohort", "id"); code != 0 || out != help {
		t.Errorf("help cohort id: exit %d, differs from cohort id --help:\n%s", code, out)
	}
	out, _, code := rekey(t, "", "help", "cohort")
	if code != 0 || !strings.Contains(out, "rekey cohort [command]") || !strings.Contains(out, "  id ") {
		t.Errorf("help cohort: exit %d:\n%s", code, out)
	}
	if out, _, _ := rekey(t, "", "--help"); !strings.Contains(out, "  cohort ") {
		t.Errorf("rekey --help does not list cohort:\n%s", out)
	}
	if out, _, _ := rekey(t, "", "__complete", "cohort", ""); !strings.Contains(out, "id\t") {
		t.Errorf("completing cohort: %s", out)
	}
}
