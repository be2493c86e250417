package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The usage errors of the staged-cutover jobs: verify, repair, load, and
// run's cohort flags.
func TestStagedJobFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"verify", []string{"verify", "-c", "m.yaml", "--cohorts", "1"}, "verify: -c FILE, --migration NAME and --cohorts LIST are required"},
		{"verify examples", []string{"verify", "-c", "m.yaml", "--migration", "m", "--cohorts", "1", "--examples", "0"}, "--examples must be at least 1"},
		{"verify runner", []string{"verify", "-c", "m.yaml", "--migration", "m", "--cohorts", "1", "--runner", "spark"}, `--runner must be one of`},
		{"repair", []string{"repair", "-c", "m.yaml", "--migration", "m"}, "repair: -c FILE, --migration NAME and --cohorts LIST are required"},
		{"repair has no mark", []string{"repair", "-c", "m.yaml", "--migration", "m", "--cohorts", "1", "--mark"}, "--mark"},
		{"load", []string{"load", "-c", "m.yaml", "--migration", "m"}, "load: --migration NAME and --from PATH are required"},
		{"load format", []string{"load", "-c", "m.yaml", "--migration", "m", "--from", "x.jsonl", "--format", "xml"}, `--format must be jsonl, csv or avro, got "xml"`},
		{"run cohorts", []string{"run", "-c", "m.yaml", "--cohorts", "1"}, "--cohorts LIST and --migration NAME go together"},
		{"run reverse", []string{"run", "-c", "m.yaml", "--reverse"}, "--reverse needs --cohorts LIST and --migration NAME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := rekey(t, "", tc.args...)
			if code != exitUsage || !strings.Contains(errs, tc.want) {
				t.Errorf("rekey %v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, errs, tc.want)
			}
		})
	}
}

// verify and repair without --report write it under the OS's temporary
// folder, never in the working folder, and say where; with --runner
// dataflow, whose workers write it, --report is required.
func TestVerifyDefaultReport(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)
	got := defaultReport("verify", "logs/v2 x", at)
	if want := filepath.Join(os.TempDir(), "rekey-reports", "logs_v2_x-verify-20261202T103000.000Z.jsonl"); got != want {
		t.Errorf("defaultReport: %s, want %s", got, want)
	}
	if st, err := os.Stat(filepath.Dir(got)); err != nil || !st.IsDir() {
		t.Errorf("the report's folder: %v", err)
	}
	for _, name := range []string{"verify", "repair"} {
		_, errs, code := rekey(t, "", name, "-c", "m.yaml", "--migration", "m", "--cohorts", "1", "--runner", "dataflow")
		if code != exitUsage || !strings.Contains(errs, name+": --report gs://BUCKET/PATH is required with --runner dataflow") {
			t.Errorf("%s --runner dataflow without --report: exit %d, %s", name, code, errs)
		}
		help, _, _ := rekey(t, "", name, "--help")
		if !strings.Contains(help, "default: a new file under "+filepath.Join(os.TempDir(), "rekey-reports")) || strings.Contains(help, "rekey-"+name+".jsonl") {
			t.Errorf("%s --help does not say where the report goes:\n%s", name, help)
		}
	}
}
