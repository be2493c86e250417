package migration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
)

// fakeRunner records the job it was given.
type fakeRunner struct {
	got *Job
	err error
}

func (f *fakeRunner) Name() string         { return "fake" }
func (f *fakeRunner) Describe(*Job) string { return "writes as they come" }
func (f *fakeRunner) Migrate(_ context.Context, j *Job) (*Result, error) {
	f.got = j
	return &Result{Counters: Counters{Read: 3, Written: 3}}, f.err
}

func filesConfig(t *testing.T, key string) *config.Config {
	t.Helper()
	cfg := &config.Config{
		Source:     config.Endpoint{Type: config.TypeJSONL, Path: "in.jsonl", Key: key, Table: "Logs"},
		Target:     config.Endpoint{Type: config.TypeJSONL, Path: "out.jsonl"},
		Rewrite:    config.RewriteConfig{Strategy: "hashprefix"},
		DeadLetter: "dead.jsonl",
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestRunIsResolvePrepareRedriveRun(t *testing.T) {
	var notes []Note
	r := &fakeRunner{}
	j, res, err := Run(context.Background(), filesConfig(t, "Id STRING(MAX)"), Options{RedriveFrom: "dead.jsonl", Notes: func(n Note) { notes = append(notes, n) }}, r)
	if err != nil {
		t.Fatal(err)
	}
	if r.got != j || res.Counters[Written] != 3 {
		t.Fatalf("runner got %p, Run returned %p; result %v", r.got, j, res)
	}
	// A redrive of the dead-letter file itself writes its dead letters
	// next to it, never over the file it reads.
	if j.RedriveFrom != "dead.jsonl" || j.DeadLetterPath != "dead.redrive.jsonl" {
		t.Errorf("redrive from %q, dead letters to %q", j.RedriveFrom, j.DeadLetterPath)
	}
	if j.Spec.SourceStore != record.Spanner || j.Spec.Key != "Id STRING(MAX)" || j.Spec.Table != "Logs" {
		t.Errorf("spec %+v", j.Spec)
	}
	want := []Note{Redriving{From: "dead.jsonl"}, Starting{What: "the dead letters in dead.jsonl (of jsonl Logs) -> jsonl out.jsonl with hashprefix", Runner: "fake"}, WritePlan{Text: "writes as they come"}}
	if !reflect.DeepEqual(notes, want) {
		t.Errorf("notes %#v, want %#v", notes, want)
	}
}

func TestRunReturnsTheJobWhenTheRunFails(t *testing.T) {
	boom := errors.New("boom")
	j, _, err := Run(context.Background(), filesConfig(t, ""), Options{}, &fakeRunner{err: boom})
	if !errors.Is(err, boom) || j == nil || j.DeadLetterPath != "dead.jsonl" {
		t.Errorf("got job %v, err %v", j, err)
	}
	if IsConfigError(err) {
		t.Error("a failed run is reported as a config error")
	}
}

func TestResolveRefusesABadRewriteAsAConfigError(t *testing.T) {
	// Not through filesConfig: its Validate refuses this config already.
	cfg := &config.Config{
		Source:     config.Endpoint{Type: config.TypeJSONL, Path: "in.jsonl", Key: "Id FLOAT64", Table: "Logs"},
		Target:     config.Endpoint{Type: config.TypeJSONL, Path: "out.jsonl"},
		Rewrite:    config.RewriteConfig{Strategy: "shard", Params: map[string]any{"n": 4}},
		DeadLetter: "dead.jsonl",
	}
	cfg.SetDefaults()
	r := &fakeRunner{}
	_, _, err := Run(context.Background(), cfg, Options{}, r)
	if !IsConfigError(err) || r.got != nil {
		t.Fatalf("err %v (config error: %v); runner called: %v", err, IsConfigError(err), r.got != nil)
	}
	if !strings.Contains(err.Error(), "rewrite:") {
		t.Errorf("error %q does not say which part of the config", err)
	}
}

func TestCountersString(t *testing.T) {
	c := Counters{Written: 2, Read: 3, "split": 1, "backoff_ms": 40}
	if got, want := c.String(), "read=3 rewritten=0 written=2 dead_lettered=0 retried=0 backoff_ms=40 split=1"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestRunDryRunMarksTheJobAndSaysSo(t *testing.T) {
	var notes []Note
	r := &fakeRunner{}
	j, _, err := Run(context.Background(), filesConfig(t, ""), Options{DryRun: true, Notes: func(n Note) { notes = append(notes, n) }}, r)
	if err != nil {
		t.Fatal(err)
	}
	if !r.got.DryRun || !j.DryRun {
		t.Error("the runner got a job that is not a dry run")
	}
	if !slices.Contains(notes, Note(DryRunning{DeadLetters: "dead.jsonl"})) {
		t.Errorf("the notes do not say it is a dry run: %#v", notes)
	}
}

func TestSamePath(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	t.Chdir(real)
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"dead.jsonl", filepath.Join(real, "dead.jsonl"), true},   // relative and absolute
		{filepath.Join(link, "dead.jsonl"), "./dead.jsonl", true}, // through a symlinked folder, file not there yet
		{filepath.Join(real, "x", "..", "dead.jsonl"), "dead.jsonl", true},
		{"dead.jsonl", "other.jsonl", false},
		{"gs://b/dead.jsonl", "gs://b/dead.jsonl", true},
		{"gs://b/dead.jsonl", "dead.jsonl", false},
	} {
		if got := SamePath(tc.a, tc.b); got != tc.same {
			t.Errorf("SamePath(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}

// A redrive whose config names the dead-letter file it reads, by another
// spelling of the same path, writes what still fails next to it.
func TestRedriveNeverRewritesTheFileItReads(t *testing.T) {
	t.Chdir(t.TempDir())
	abs, _ := filepath.Abs("dead.jsonl")
	j := &Job{DeadLetterPath: abs}
	j.Redrive("dead.jsonl")
	if j.DeadLetterPath != RedriveDeadLetterPath(abs) || !strings.HasSuffix(j.DeadLetterPath, "dead.redrive.jsonl") {
		t.Errorf("dead letters to %q while reading dead.jsonl", j.DeadLetterPath)
	}
}

// A references_to entry that names another run's config takes that run's
// rewrite, ancestors and renames.
func TestReferencesToAnotherRunsConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("customers.yaml", `
source: {type: datastore, project: p, kind: Customer}
target: {type: datastore, project: p, namespace: v2, kind: Customer}
rewrite: {strategy: hashprefix, params: {n: 6}}
ancestors: root
dead_letter: gs://b/dead`)
	invoices := write("invoices.yaml", `
source: {type: jsonl, path: invoices.jsonl}
target: {type: datastore, project: p, namespace: v2, kind: Invoice}
rewrite: {strategy: none}
references_to: [{property: customer, config: customers.yaml}]
dead_letter: gs://b/dead`)
	v, err := config.NewViper(invoices)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	j, err := Resolve(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Spec.ReferencesTo) != 1 {
		t.Fatalf("references_to %+v", j.Spec.ReferencesTo)
	}
	r := j.Spec.ReferencesTo[0]
	if r.Property != "customer" || r.Kind != "Customer" || r.Strategy.Strategy != "hashprefix" || r.Strategy.Params["elements"] != "root" || r.TargetNamespace != "v2" {
		t.Errorf("reference %+v", r)
	}
	if _, err := j.Spec.Build(); err != nil {
		t.Errorf("the spec does not build: %v", err)
	}
}

// TestRampRun: a job's ramp-up is the run its pipeline names, unless
// ramp.run names one that several jobs share; without a ramp-up there is
// none, whatever the name.
func TestRampRun(t *testing.T) {
	cfg := filesConfig(t, "UserId STRING(36)")
	if r := (&Job{Config: cfg}).Ramp("r1"); !r.Off() || r.Run != "" {
		t.Errorf("no ramp-up configured: got %+v", r)
	}
	cfg.Ramp = config.RampConfig{Profile: config.RampDatastore}
	cfg.SetDefaults()
	j := &Job{Config: cfg}
	if r := j.Ramp("r1"); r.Off() || r.Run != "r1" || r.Base != 500 {
		t.Errorf("the pipeline's run: got %+v", r)
	}
	cfg.Ramp.Run = "nightly-1"
	if a, b := j.Ramp("r1"), j.Ramp("r2"); a.Run != "nightly-1" || a != b {
		t.Errorf("ramp.run shared by two pipelines' runs: got %+v and %+v", a, b)
	}
}

// TestStrictColumnsForStagedDatastoreToSpanner: a Datastore → Spanner
// migration with cohort.user (a staged one, whose new rows the library
// reads back as entities) refuses what a column keeps only as text; the
// same migration without it, or Datastore → Datastore, flattens as ever.
func TestStrictColumnsForStagedDatastoreToSpanner(t *testing.T) {
	for _, c := range []struct {
		target, user string
		want         bool
	}{{config.TypeSpanner, "User", true}, {config.TypeSpanner, "", false}, {config.TypeDatastore, "User", false}} {
		cfg := &config.Config{
			Source:     config.Endpoint{Type: config.TypeDatastore, Project: "p", Kind: "Log", Key: "LogId INT64"},
			Target:     config.Endpoint{Type: c.target, Project: "p", Instance: "i", Database: "d", Table: "LogsX", Kind: "Log", Namespace: "v2"},
			Rewrite:    config.RewriteConfig{Strategy: "bitreverse"},
			Cohort:     config.CohortConfig{User: c.user},
			DeadLetter: "dead.jsonl",
		}
		cfg.SetDefaults()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		j, err := ResolveOffline(ctx, cfg)
		cancel()
		if err != nil {
			t.Fatalf("%s, user %q: %v", c.target, c.user, err)
		}
		if j.Spec.StrictColumns != c.want {
			t.Errorf("%s, user %q: StrictColumns %v, want %v", c.target, c.user, j.Spec.StrictColumns, c.want)
		}
	}
}
