package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// execCmd runs one command built with a runF seam, as the root would, and
// returns its error and what it printed.
func execCmd(t *testing.T, cmd *cobra.Command, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetFlagErrorFunc(flagError)
	err := cmd.Execute()
	return out.String(), err
}

func isUsage(err error) bool { return exitCode(err, &bytes.Buffer{}) == exitUsage }

func TestRunFlagsAreParsedIntoOptions(t *testing.T) {
	for _, cf := range []string{"-c", "--config"} {
		var got *RunOptions
		cmd := newCmdRun(&factory{}, func(o *RunOptions) error { got = o; return nil })
		_, err := execCmd(t, cmd, cf, "m.yaml", "--runner", "dataflow", "--create-target", "--force", "-v",
			"--project", "p", "--dry_run", "--region=r", "--num_workers", "3")
		if err != nil {
			t.Fatalf("%s: %v", cf, err)
		}
		want := RunOptions{Config: "m.yaml", Runner: "dataflow", CreateTarget: true, Force: true, Verbose: true,
			BeamArgs: []string{"--project=p", "--dry_run=true", "--region=r", "--num_workers=3"}}
		if got.Config != want.Config || got.Runner != want.Runner || got.CreateTarget != want.CreateTarget ||
			got.Force != want.Force || got.Verbose != want.Verbose || got.From != "" || !slices.Equal(got.BeamArgs, want.BeamArgs) {
			t.Errorf("%s: got %+v, want %+v", cf, *got, want)
		}
	}
}

func TestRunDefaults(t *testing.T) {
	var got *RunOptions
	cmd := newCmdRun(&factory{}, func(o *RunOptions) error { got = o; return nil })
	if _, err := execCmd(t, cmd, "-c", "m.yaml"); err != nil {
		t.Fatal(err)
	}
	if got.Runner != "prism" || got.CreateTarget || got.Force || got.Verbose || len(got.BeamArgs) != 0 {
		t.Errorf("defaults: %+v", *got)
	}
}

func TestRedriveFlags(t *testing.T) {
	var got *RunOptions
	cmd := newCmdRedrive(&factory{}, func(o *RunOptions) error { got = o; return nil })
	if _, err := execCmd(t, cmd, "--config", "m.yaml", "--from", "gs://b/dead.jsonl", "--temp_location", "gs://b/tmp"); err != nil {
		t.Fatal(err)
	}
	if got.Config != "m.yaml" || got.From != "gs://b/dead.jsonl" || !slices.Equal(got.BeamArgs, []string{"--temp_location=gs://b/tmp"}) {
		t.Errorf("redrive: %+v", *got)
	}
}

func TestRequiredFlags(t *testing.T) {
	never := func(*RunOptions) error { t.Error("runF called"); return nil }
	for _, tc := range []struct {
		cmd  *cobra.Command
		args []string
		want string
	}{
		{newCmdRun(&factory{}, never), nil, "run: -c FILE is required"},
		{newCmdRun(&factory{}, never), []string{"-c", "m.yaml", "--runner", "spark"}, `--runner must be one of prism, direct, dataflow, universal, got "spark"`},
		{newCmdRedrive(&factory{}, never), []string{"-c", "m.yaml"}, "redrive: --from DEAD_LETTERS is required"},
		{newCmdRedrive(&factory{}, never), []string{"--from", "d.jsonl"}, "redrive: -c FILE is required"},
		{newCmdValidate(&factory{}, func(*ValidateOptions) error { t.Error("runF called"); return nil }), nil, "validate: -c FILE is required"},
		{newCmdRewrite(&factory{}, func(*RewriteOptions) error { t.Error("runF called"); return nil }), nil, "--strategy is required"},
		{newCmdDemo(&factory{}, func(*DemoOptions) error { t.Error("runF called"); return nil }), []string{"--runner", "dataflow"}, "--runner must be prism or direct"},
	} {
		_, err := execCmd(t, tc.cmd, tc.args...)
		if !isUsage(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: %v; want a usage error with %q", tc.cmd.Name(), tc.args, err, tc.want)
		}
	}
}

func TestValidateConfigFlag(t *testing.T) {
	for _, cf := range []string{"-c", "--config"} {
		var got *ValidateOptions
		cmd := newCmdValidate(&factory{}, func(o *ValidateOptions) error { got = o; return nil })
		if _, err := execCmd(t, cmd, cf, "m.yaml"); err != nil || got.Config != "m.yaml" {
			t.Errorf("%s: %v, %+v", cf, err, got)
		}
	}
	out, errs, code := rekey(t, "", "validate", "--config", "../../configs/chain.yaml")
	if code != 0 || !strings.Contains(out, ": ok") {
		t.Errorf("validate --config: exit %d, %s%s", code, out, errs)
	}
}

func TestRewriteFlags(t *testing.T) {
	var got *RewriteOptions
	cmd := newCmdRewrite(&factory{}, func(o *RewriteOptions) error { got = o; return nil })
	_, err := execCmd(t, cmd, "--strategy", "swap", "--param", "order=B,A", "--param", "n=3", "--key", "A INT64, B INT64", "--table", "X", "--invert", "--keep-going", "--store", "spanner")
	if err != nil {
		t.Fatal(err)
	}
	if got.Strategy != "swap" || got.Key != "A INT64, B INT64" || got.Table != "X" || !got.Invert || got.Explain || !got.KeepGoing || got.Store != "spanner" ||
		len(got.Params) != 2 || got.Params["order"] != "B,A" || got.Params["n"] != "3" || got.Config != "" {
		t.Errorf("rewrite: %+v", *got)
	}
	for _, cf := range []string{"-c", "--config"} {
		got = nil
		cmd := newCmdRewrite(&factory{}, func(o *RewriteOptions) error { got = o; return nil })
		if _, err := execCmd(t, cmd, cf, "m.yaml", "--invert"); err != nil || got.Config != "m.yaml" || !got.Invert || got.Strategy != "" {
			t.Errorf("%s: %v, %+v", cf, err, got)
		}
	}
}

func TestDemoFlags(t *testing.T) {
	var got *DemoOptions
	cmd := newCmdDemo(&factory{}, func(o *DemoOptions) error { got = o; return nil })
	if _, err := execCmd(t, cmd, "--runner", "direct", "--files"); err != nil {
		t.Fatal(err)
	}
	if got.Runner != "direct" || !got.Files || got.KeysOnly {
		t.Errorf("demo: %+v", *got)
	}
}

// An unknown flag is a short usage error naming the nearest flag, rekey's
// or Beam's.
func TestUnknownFlagIsShort(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-c", "m.yaml", "--projct", "p"}, "did you mean --project?"},
		{[]string{"run", "-c", "m.yaml", "-project", "p"}, "did you mean --project?"},
		{[]string{"run", "-c", "m.yaml", "--staging-location", "gs://b"}, "did you mean --staging_location?"},
		{[]string{"run", "-c", "m.yaml", "--creat-target"}, "did you mean --create-target?"},
		{[]string{"redrive", "--form", "d.jsonl"}, "did you mean --from?"},
		{[]string{"rewrite", "--strategi", "shard"}, "did you mean --strategy?"},
		{[]string{"run", "--zzzzzz"}, "flag provided but not defined: --zzzzzz"},
	} {
		out, errs, code := rekey(t, "", tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, errs, tc.want)
		}
		if n := strings.Count(errs, "\n"); n > 2 {
			t.Errorf("%v: %d lines on stderr:\n%s", tc.args, n, errs)
		}
	}
	_, errs, _ := rekey(t, "", "run", "--zzzzzz")
	if strings.Contains(errs, "did you mean") {
		t.Errorf("a suggestion for a flag near none: %s", errs)
	}
}

func TestBadBeamValueIsAUsageError(t *testing.T) {
	_, errs, code := rekey(t, "", "run", "-c", "m.yaml", "--num_workers=abc")
	if code != exitUsage || !strings.Contains(errs, `invalid value "abc" for flag -num_workers`) || strings.Count(errs, "\n") > 2 {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

func TestHelpGoesToStdout(t *testing.T) {
	runHelp, errs, code := rekey(t, "", "run", "--help")
	if code != 0 || errs != "" {
		t.Fatalf("run --help: exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{"rekey run -c FILE", "--create-target", "--runner", "-c, --config", "rekey run --help-beam"} {
		if !strings.Contains(runHelp, want) {
			t.Errorf("run --help lacks %q:\n%s", want, runHelp)
		}
	}
	for _, beamFlag := range []string{"--project", "--staging_location", "--dry_run "} {
		if strings.Contains(runHelp, "  "+beamFlag) {
			t.Errorf("run --help lists Beam's %s:\n%s", beamFlag, runHelp)
		}
	}
	if out, _, code := rekey(t, "", "help", "run"); code != 0 || out != runHelp {
		t.Errorf("help run: exit %d, differs from run --help:\n%s", code, out)
	}
	if out, _, code := rekey(t, "", "run", "-h"); code != 0 || out != runHelp {
		t.Errorf("run -h: exit %d:\n%s", code, out)
	}
	beamHelp, errs, code := rekey(t, "", "run", "--help-beam")
	if code != 0 || errs != "" {
		t.Fatalf("run --help-beam: exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{"--project string", "--staging_location string", "--dry_run ", "--temp_location string"} {
		if !strings.Contains(beamHelp, want) {
			t.Errorf("run --help-beam lacks %q:\n%s", want, beamHelp)
		}
	}
	if strings.Contains(beamHelp, "--create-target") || strings.Contains(beamHelp, "test.") {
		t.Errorf("run --help-beam lists more than Beam's flags:\n%s", beamHelp)
	}
	for _, cmd := range []string{"demo", "redrive", "strategies", "rewrite", "validate", "version", "completion"} {
		out, errs, code := rekey(t, "", "help", cmd)
		if code != 0 || errs != "" || !strings.Contains(out, "rekey "+cmd) {
			t.Errorf("help %s: exit %d, stderr %q:\n%s", cmd, code, errs, out)
		}
	}
	out, _, code := rekey(t, "", "--help")
	if code != 0 || !strings.Contains(out, "Available Commands:") {
		t.Errorf("--help: exit %d:\n%s", code, out)
	}
}

func TestVersionFlag(t *testing.T) {
	want, _, _ := rekey(t, "", "version")
	out, errs, code := rekey(t, "", "--version")
	if code != 0 || errs != "" || out != want {
		t.Errorf("--version: %q (exit %d, %q), want %q", out, code, errs, want)
	}
}

func TestUnknownCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rn"}, "Did you mean this?\n\trun"},
		{[]string{"valdate"}, "Did you mean this?\n\tvalidate"},
		{[]string{"help", "rn"}, "Did you mean this?\n\trun"},
		{[]string{"completion", "fsh"}, "\tfish"},
		{[]string{"version", "now"}, "version: unexpected arguments: now"},
	} {
		out, errs, code := rekey(t, "", tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, errs, tc.want)
		}
	}
}

func TestCompletion(t *testing.T) {
	for shell, prefix := range map[string]string{"bash": "# bash completion V2 for rekey", "fish": "# fish completion for rekey", "zsh": "#compdef rekey"} {
		out, errs, code := rekey(t, "", "completion", shell)
		if code != 0 || errs != "" || !strings.HasPrefix(out, prefix) {
			t.Errorf("completion %s: exit %d, stderr %q, starts %.60q", shell, code, errs, out)
		}
	}
	out, _, code := rekey(t, "", "__complete", "run", "--ru")
	if code != 0 || !strings.Contains(out, "--runner") {
		t.Errorf("completing run --ru: exit %d: %s", code, out)
	}
	out, _, _ = rekey(t, "", "__complete", "run", "--runner", "")
	for _, r := range []string{"prism", "dataflow"} {
		if !strings.Contains(out, r+"\n") {
			t.Errorf("completing --runner lacks %s: %s", r, out)
		}
	}
	out, _, _ = rekey(t, "", "__complete", "rewrite", "--strategy", "")
	if !strings.Contains(out, "hashprefix\t") {
		t.Errorf("completing --strategy: %s", out)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"form", "from", 1}, {"kitten", "sitting", 3}, {"", "abc", 3}, {"dry-run", "dry_run", 1}, {"run", "run", 0}} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
