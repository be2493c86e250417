package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/plan/detect"
	"github.com/rekeyio/rekey/plan/lint"
	"github.com/rekeyio/rekey/plan/rules"
	"github.com/rekeyio/rekey/rewrite"
)

// exitFindings is the exit code of `rekey lint` when a finding is at or
// above --fail-on.
const exitFindings = 3

// findingsError is lint's error when a finding is at or above --fail-on;
// the report was already written.
type findingsError struct {
	n      int
	failOn rules.Severity
}

func (e findingsError) Error() string {
	return fmt.Sprintf("lint: %d findings at or above %s (--fail-on %s)", e.n, e.failOn, e.failOn)
}

// ExitCode is the process's exit code for the error.
func (e findingsError) ExitCode() int { return exitFindings }

// LintOptions are the parsed flags of `rekey lint`.
type LintOptions struct {
	IO     stdio
	DDL    string
	Config string
	// Database is a Spanner database path, or with Datastore the
	// Datastore database id.
	Database  string
	Datastore bool
	Project   string
	Namespace string
	Kinds     []string
	Sample    int
	Nodes     int
	Format    string
	FailOn    string

	failOn *rules.Severity
}

const lintLong = `Lints a schema for keys that will hotspot, before any data moves:
Spanner DDL (a file, a database's, or the Spanner source's and target's of
a config) and a sample of Datastore kinds. Each finding names the rule it
breaks, the evidence, the fix and where the rule comes from.

Inputs (at least one):
  --ddl FILE          Spanner DDL as 'gcloud spanner databases ddl describe' prints it
  --database PATH     a Spanner database, projects/P/instances/I/databases/D
                      (its DDL is read with GetDatabaseDdl)
  --datastore --project P [--database D] [--namespace NS] --kind K [--sample N]
                      a sample of up to N entities of each kind K (with
                      --datastore, --database is the Datastore database id)
  -c FILE             a migration config: the Spanner source's DDL (source.schema
                      if given, else its database), the Spanner target's database
                      (skipped if it does not exist yet), the Datastore source's
                      kinds, and the shard count of a shard rewrite

The DDL checks see the schema only: whether an INT64 key is handed out by
a counter is for 'rekey plan', which samples the values.

Exit status: 0 when no finding is at or above --fail-on (or --fail-on is not
given), 3 when one is, 1 when a schema or sample could not be read, 2 for
bad flags or config.`

func newCmdLint(f *factory) *cobra.Command {
	o := &LintOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "lint [--ddl FILE | --database PATH | -c FILE | --datastore --project P --kind K] [--nodes N] [--format text|json] [--fail-on warning|error]",
		Short: "lint Spanner DDL and Datastore kinds for keys that will hotspot",
		Long:  lintLong,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(); err != nil {
				return err
			}
			return runLint(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.DDL, "ddl", "", "Spanner DDL file")
	fl.StringVarP(&o.Config, "config", "c", "", "migration config file (YAML)")
	fl.StringVar(&o.Database, "database", "", "Spanner database path projects/P/instances/I/databases/D; with --datastore, the Datastore database id")
	fl.BoolVar(&o.Datastore, "datastore", false, "lint a sample of Datastore kinds (--project, --kind)")
	fl.StringVar(&o.Project, "project", "", "Datastore project (default: DATASTORE_PROJECT_ID)")
	fl.StringVar(&o.Namespace, "namespace", "", "Datastore namespace")
	fl.StringSliceVar(&o.Kinds, "kind", nil, "Datastore kind to sample (repeatable)")
	fl.IntVar(&o.Sample, "sample", 1000, "entities to sample per kind (0: all)")
	fl.IntVar(&o.Nodes, "nodes", 0, "Spanner node count, for the shard-count check (0: skip it)")
	fl.StringVar(&o.Format, "format", "text", "output format: text or json")
	fl.StringVar(&o.FailOn, "fail-on", "", "exit 3 if a finding is at or above this severity: info, warning or error")
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
	_ = cmd.MarkFlagFilename("ddl", "sql", "ddl")
	return cmd
}

var spannerDatabasePath = regexp.MustCompile(`^projects/[^/]+/instances/[^/]+/databases/[^/]+$`)

// check validates the flags; every problem is a usage error.
func (o *LintOptions) check() error {
	if o.DDL == "" && o.Config == "" && o.Database == "" && !o.Datastore {
		return usagef("lint: give --ddl FILE, --database PATH, -c FILE or --datastore")
	}
	if o.Config != "" && (o.DDL != "" || o.Database != "" || o.Datastore) {
		return usagef("lint: -c takes its inputs from the config; do not combine it with --ddl, --database or --datastore")
	}
	if o.Datastore && len(o.Kinds) == 0 {
		return usagef("lint: --datastore needs --kind K")
	}
	if !o.Datastore && (len(o.Kinds) > 0 || o.Namespace != "" || o.Project != "") {
		return usagef("lint: --kind, --namespace and --project are for --datastore")
	}
	if !o.Datastore && o.Database != "" && !spannerDatabasePath.MatchString(o.Database) {
		return usagef("lint: --database %q: want projects/P/instances/I/databases/D (with --datastore it is the Datastore database id)", o.Database)
	}
	if o.Sample < 0 || o.Nodes < 0 {
		return usagef("lint: --sample and --nodes must not be negative")
	}
	if o.Format != "text" && o.Format != "json" {
		return usagef("lint: --format must be text or json, got %q", o.Format)
	}
	if o.FailOn != "" {
		s, err := rules.ParseSeverity(o.FailOn)
		if err != nil {
			return usagef("lint: --fail-on: %w", err)
		}
		o.failOn = &s
	}
	return nil
}

// linted gathers the inputs, schemas and findings of a run.
type linted struct {
	inputs   []string
	schemas  []*spannerdb.Schema
	findings []rules.Finding
}

func (l *linted) spanner(what string, s *spannerdb.Schema, o lint.SpannerOptions) {
	l.inputs = append(l.inputs, fmt.Sprintf("%s: %s, %s", what, plural(len(s.Tables), "table"), plural(len(s.Indexes), "index")))
	l.schemas = append(l.schemas, s)
	l.findings = append(l.findings, lint.Spanner(s, o)...)
}

// hasTable reports whether a linted schema has the table.
func (l *linted) hasTable(name string) bool {
	for _, s := range l.schemas {
		if s.Tables[strings.ToLower(name)] != nil {
			return true
		}
	}
	return false
}

func (l *linted) datastore(s lint.Sample) {
	what := "Datastore kind " + s.Kind
	if s.Namespace != "" {
		what += " (namespace " + s.Namespace + ")"
	}
	l.inputs = append(l.inputs, what+": "+s.How)
	l.findings = append(l.findings, lint.Datastore(s)...)
}

func plural(n int, noun string) string { return detect.Count(int64(n), noun) }

func runLint(ctx context.Context, o *LintOptions) error {
	var l linted
	var err error
	if o.Config != "" {
		err = l.fromConfig(ctx, o)
	} else {
		err = l.fromFlags(ctx, o)
	}
	if err != nil {
		return err
	}
	r := lint.NewReport(l.inputs, l.findings, o.failOn)
	if o.Format == "json" {
		err = lint.WriteJSON(o.IO.out, r)
	} else {
		err = lint.WriteText(o.IO.out, r)
	}
	if err != nil {
		return err
	}
	if r.Summary.Failed {
		n := 0
		for _, f := range r.Findings {
			if f.Severity >= *o.failOn {
				n++
			}
		}
		return findingsError{n: n, failOn: *o.failOn}
	}
	return nil
}

func (l *linted) fromFlags(ctx context.Context, o *LintOptions) error {
	so := lint.SpannerOptions{Nodes: o.Nodes}
	if o.DDL != "" {
		s, err := readDDLFile(o.DDL)
		if err != nil {
			return err
		}
		l.spanner("DDL file "+o.DDL, s, so)
	}
	if o.Database != "" && !o.Datastore {
		s, err := lint.ReadDDL(ctx, o.Database)
		if err != nil {
			return err
		}
		l.spanner("Spanner database "+o.Database, s, so)
	}
	if o.Datastore {
		return l.sampleKinds(ctx, o.Project, o.Database, o.Namespace, o.Kinds, o.Sample)
	}
	return nil
}

func readDDLFile(path string) (*spannerdb.Schema, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("lint: %w", err)
	}
	s, err := spannerdb.ParseSchema(string(text))
	if err != nil {
		return nil, usagef("lint: %s: %w", path, err)
	}
	return s, nil
}

func (l *linted) sampleKinds(ctx context.Context, project, database, namespace string, kinds []string, n int) error {
	c, err := datastoredb.Client(ctx, project, database)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, k := range kinds {
		s, err := lint.ReadDatastore(ctx, c, namespace, k, n)
		if err != nil {
			return err
		}
		l.datastore(s)
	}
	return nil
}

func (l *linted) fromConfig(ctx context.Context, o *LintOptions) error {
	cfg, err := loadConfig(o.Config, o.IO.err)
	if err != nil {
		return err
	}
	so := lint.SpannerOptions{Nodes: o.Nodes}
	shards, shardsOK, err := configShards(cfg)
	if err != nil {
		return usagef("%s: %w", o.Config, err)
	}
	if shardsOK {
		so.Shards = map[string]lint.Shards{cfg.Target.Table: shards}
	}
	src, tgt := cfg.Source, cfg.Target
	srcKind, tgtKind := storeKindOf(src.Type), storeKindOf(tgt.Type)
	read := map[string]bool{}
	if srcKind.spannerDB && src.Schema != "" {
		s, err := readDDLFile(src.Schema)
		if err != nil {
			return err
		}
		l.spanner("source DDL file "+src.Schema, s, so)
	} else if srcKind.spannerDB {
		read[spannerPath(src)] = true
		if err := l.spannerDatabase(ctx, "source", spannerPath(src), so, false); err != nil {
			return err
		}
	}
	if tgtKind.spannerDB && !read[spannerPath(tgt)] {
		if err := l.spannerDatabase(ctx, "target", spannerPath(tgt), so, true); err != nil {
			return err
		}
	}
	if shardsOK && !l.hasTable(tgt.Table) {
		if f, ok := lint.ShardFinding(tgt.Table, shards, o.Nodes); ok {
			l.findings = append(l.findings, f)
		}
	}
	if srcKind.datastoreDB {
		kinds := append([]string{src.Kind}, cfg.DescendantKinds()...)
		return l.sampleKinds(ctx, src.Project, src.Database, src.Namespace, kinds, o.Sample)
	}
	return nil
}

// configShards finds the shard count of a config's rewrite into a Spanner
// target: a shard strategy, alone or as a step of a chain.
func configShards(cfg *config.Config) (lint.Shards, bool, error) {
	if !storeKindOf(cfg.Target.Type).spannerDB || cfg.Rewrite.Strategy == "" {
		return lint.Shards{}, false, nil
	}
	st, err := rewrite.New(cfg.Rewrite.Step())
	if err != nil {
		return lint.Shards{}, false, err
	}
	steps := []rewrite.Strategy{st}
	if ch, ok := st.(*rewrite.Chain); ok {
		steps = ch.Steps
	}
	for _, s := range steps {
		if sh, ok := s.(*rewrite.Shard); ok {
			return lint.Shards{Column: sh.Name, N: sh.N, From: fmt.Sprintf("rewrite shard n=%d of the config", sh.N)}, true, nil
		}
	}
	return lint.Shards{}, false, nil
}

func spannerPath(e config.Endpoint) string {
	return fmt.Sprintf("projects/%s/instances/%s/databases/%s", e.Project, e.Instance, e.Database)
}

// spannerDatabase lints the DDL of a database; one that does not exist
// (yet: a target) is noted and skipped when mayBeMissing.
func (l *linted) spannerDatabase(ctx context.Context, role, path string, so lint.SpannerOptions, mayBeMissing bool) error {
	s, err := lint.ReadDDL(ctx, path)
	if mayBeMissing && status.Code(err) == codes.NotFound {
		l.inputs = append(l.inputs, fmt.Sprintf("%s database %s: not found, not linted", role, path))
		return nil
	}
	if err != nil {
		return err
	}
	l.spanner(role+" database "+path, s, so)
	return nil
}
