package main

import (
	"strings"
	"testing"
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
