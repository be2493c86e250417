// Package migration is rekey's migration core, free of Beam: it resolves a
// config against the live databases into one Job — the source and target
// schemas and key schemas, the serialisable rewrite (rekeyer.Spec), the
// target DDL and the manifest text — prepares the target (DDL, manifest),
// and runs the one sequence every caller uses:
//
//	job, res, err := migration.Run(ctx, cfg, migration.Options{...}, runner)
//
// Resolve → Prepare → (Redrive) → runner. `rekey run`, `rekey redrive`,
// the demo, the benchmarks and the integration tests all go through Run.
// A Runner builds and runs the job's pipeline (pipeline.Runner does, on
// Beam); this package neither imports Beam nor knows how records move.
//
// A Job is resolved once and then only read: the pipeline builds its graph
// from its resolved values (never from Job.Config), and the same values
// are printed before a run. Nothing in it
// depends on when it is used (the ramp-up's run is named by whoever
// builds the pipeline, see Job.Ramp).
package migration

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/write/throttle"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
	"github.com/rekeyio/rekey/rewrite"
)

// DefaultDeadLetterPath is where dead letters go when the config names no
// path: nothing is ever dropped silently.
const DefaultDeadLetterPath = "rekey-dead-letters.jsonl"

// Job is a resolved migration: what the pipeline is built from.
//
// Config is the config as given, for whoever resolves the job again (a
// worker in another process, see Portable). The stages of a pipeline take
// the resolved values below instead (Source, Target, Cohort, Write,
// Descendants, Spec, WriteOrder, Ramp), never Config: a job derived from
// another (Reversed) changes them in one place.
type Job struct {
	Config *config.Config
	Spec   rekeyer.Spec
	// Source and Target are the endpoints read and written.
	Source, Target config.Endpoint
	// Cohort says who each record's user is and how many cohorts there
	// are (cohort.*), for a staged cutover's jobs.
	Cohort config.CohortConfig
	// Write are the write settings (write.*); WriteOrder resolves how
	// writes are planned from them.
	Write config.WriteConfig
	// Descendants are the kinds of a Datastore source's descendant
	// entities migrated with it (config.Config.DescendantKinds).
	Descendants []string
	// Strategy is the rewrite as configured (rewrite.*), before the
	// job's own settings (ancestors) are folded into Spec.Strategy.
	Strategy rewrite.StepConfig
	// SourceKey and TargetKey are the main table's key before and after
	// (Spanner targets); Children the interleaved child tables' new keys.
	SourceKey, TargetKey rewrite.KeySchema
	Children             map[string]rewrite.KeySchema
	// TargetDDL creates the target tables (Spanner targets), parents first.
	TargetDDL []string
	// DeadLetterPath is where refused records are written.
	DeadLetterPath string
	// RedriveFrom, if set, is a dead-letter file whose records are
	// re-submitted instead of reading the source (see Redrive).
	RedriveFrom string
	// Spanner holds the Spanner schemas read (nil when neither end is a
	// Spanner database).
	Spanner *SpannerSchemas
	// DryRun builds the job up to, not including, the writes: the source
	// is read, every key rewritten and the writes planned, then records
	// are only counted per target table or kind. Nothing is written but
	// the dead letters: no DDL, no manifest, no commit, no target file.
	DryRun bool
	// TargetUnread is why the target database could not be read while the
	// job was resolved for a runner that only translates it (nil when it
	// was read): its tables are then taken to be missing.
	TargetUnread error
	// Overwrite lets the run replace an existing JSON Lines target file
	// (Options.Overwrite).
	Overwrite bool
	// TranslateOnly is set for a runner that only translates the job
	// (Options.TranslateOnly).
	TranslateOnly bool
	// ReadTime is when a Datastore or Spanner source is read
	// (source.read_time, chosen when the job is resolved: a snapshot at
	// that moment); zero for a read at no single time (source.read_time:
	// none; a Spanner table is then read at the moment its read starts),
	// and for other sources.
	ReadTime time.Time
	// ScratchDir, if set, is a local directory that every worker of the
	// run shares, set by the runner while the job runs when the workers
	// run in its process: write planning keeps the records it shuffles
	// there instead of in the runner's memory (writeorder.Options.Spill).
	ScratchDir string

	// offline resolves for a runner that only translates the job: schema
	// reads are bounded by offlineTimeout, an unreadable target is noted
	// (TargetUnread) instead of failing.
	offline bool
	// keysOnly resolves only the rewrite of keys (ResolveKeys): a Spanner
	// source's key is source.key when given, and no target is read.
	keysOnly bool
}

// SpannerSchemas are the Spanner tables a job involves.
type SpannerSchemas struct {
	// Source is the main source table (Spanner sources), Children its
	// interleaved child tables migrated with it, by name.
	Source   *spannerdb.Table
	Children map[string]*spannerdb.Table
	// Targets are the target tables, parents before children.
	Targets []*spannerdb.Table
	// SourceIndexes are the secondary indexes of the source tables (main
	// and children) as its DDL declares them.
	SourceIndexes []spannerdb.Index
	// TargetIndexes are those indexes as the target gets them (rewritten,
	// see targetIndexes); IndexNotes say which could not be carried over
	// and why.
	TargetIndexes []spannerdb.Index
	IndexNotes    []string
	// DatabaseMissing says the target database does not exist: Prepare
	// creates it with the tables (--create-target).
	DatabaseMissing bool
	// exists says which target tables already exist (lower-case names),
	// indexes which target indexes do.
	exists  map[string]bool
	indexes map[string]bool
}

// FromConfig is the Job of cfg's settings alone, nothing read from a
// database and no rewrite bound (Resolve starts from it): for code that
// needs a job's settings and no schema, such as tests.
func FromConfig(cfg *config.Config) *Job {
	j := &Job{Config: cfg, DeadLetterPath: cfg.DeadLetter,
		Source: cfg.Source, Target: cfg.Target, Cohort: cfg.Cohort, Write: cfg.Write,
		Descendants: cfg.DescendantKinds(), Strategy: cfg.Rewrite.Step()}
	if j.DeadLetterPath == "" {
		j.DeadLetterPath = DefaultDeadLetterPath
	}
	return j
}

// Resolve reads what the pipeline needs to know before it is built: the
// source schema (Spanner sources), the target tables (Spanner targets),
// and binds the strategy to the key, so a bad rewrite is refused before
// any data moves. Errors in what the config asks for are *config.Error
// (see IsConfigError); a database that cannot be reached is not.
func Resolve(ctx context.Context, cfg *config.Config) (*Job, error) {
	return resolve(ctx, cfg, false)
}

// ResolveOffline is Resolve for a job that writes nothing (`rekey
// plan`): a target database that cannot be read is noted in TargetUnread
// and its tables are taken to be missing, so a plan can be made before
// the target exists.
func ResolveOffline(ctx context.Context, cfg *config.Config) (*Job, error) {
	return resolve(ctx, cfg, true)
}

// ResolveKeys resolves a job for rewriting keys alone (`rekey rewrite
// -c`): a Spanner source's key is source.key when the config gives it, so
// no store is contacted; without it the key is read from source.schema or
// the source database. No target is read.
func ResolveKeys(ctx context.Context, cfg *config.Config) (*Job, error) {
	return resolveAs(ctx, cfg, true, true)
}

func resolve(ctx context.Context, cfg *config.Config, offline bool) (*Job, error) {
	return resolveAs(ctx, cfg, offline, false)
}

func resolveAs(ctx context.Context, cfg *config.Config, offline, keysOnly bool) (*Job, error) {
	j := FromConfig(cfg)
	j.offline, j.keysOnly = offline, keysOnly
	src, tgt := cfg.Source, cfg.Target
	j.Spec = rekeyer.Spec{
		Strategy:        cfg.Rewrite.Step(),
		SourceStore:     storeOf(src.Type, tgt.Type, src.Key),
		TargetStore:     storeOf(tgt.Type, src.Type, src.Key),
		References:      cfg.References,
		KeepOriginalKey: cfg.KeepOriginalKey,
	}
	injectAncestors(&j.Spec.Strategy, cfg.Ancestors, j.Spec.TargetStore)
	// A staged migration from Datastore to Spanner reads new rows back
	// as entities: an entity it could not give back is refused, not
	// flattened (rekeyer.Options.StrictColumns).
	j.Spec.StrictColumns = cfg.Cohort.User != "" && kindOf(src.Type).datastoreDB() && kindOf(tgt.Type).spannerDB()

	// The key schema of the main table.
	switch {
	case kindOf(src.Type).spannerDB() && !(keysOnly && src.Key != ""):
		if err := j.resolveSpannerSource(ctx); err != nil {
			if keysOnly && src.Schema == "" && !IsConfigError(err) {
				return nil, fmt.Errorf("the rewrite needs the source table's key, which the config does not give (source.key) and the source database did not answer with: %w", err)
			}
			return nil, err
		}
	case src.Key != "":
		table := src.Table
		if holdsRows(tgt.Type) || table == "" {
			table = firstNonEmpty(tgt.Table, src.Table)
		}
		ks, err := rewrite.ParseKeySchema(table, src.Key)
		if err != nil {
			return nil, configErrorf("source.key: %w", err)
		}
		j.SourceKey = ks
	}
	j.Spec.Table = firstNonEmpty(src.Table, j.SourceKey.Table, tgt.Table)
	j.Spec.Key = j.SourceKey.Text()
	if holdsRows(tgt.Type) && tgt.Table != "" && !strings.EqualFold(tgt.Table, j.Spec.Table) {
		j.Spec.TargetTable = tgt.Table
	}
	if kindOf(src.Type).datastoreDB() {
		j.Spec.DescendantKinds = cfg.DescendantKinds()
	}
	if kindOf(src.Type).database {
		rt, ok, err := cfg.SourceReadTime(time.Now())
		if err != nil {
			return nil, configErrorf("source.read_time: %w", err)
		}
		if ok {
			j.ReadTime = rt
		}
	}
	if kindOf(tgt.Type).datastoreDB() {
		j.Spec.Kind = firstNonEmpty(src.Kind, tgt.Kind)
		if src.Kind != "" && tgt.Kind != "" && src.Kind != tgt.Kind {
			j.Spec.TargetKind = tgt.Kind
		}
		if tgt.Namespace != src.Namespace {
			j.Spec.TargetNamespace, j.Spec.SourceNamespace = tgt.Namespace, src.Namespace
		}
	} else if kindOf(src.Type).datastoreDB() {
		j.Spec.Kind = src.Kind // the kind a row goes back into (Rekeyer.Invert)
	}
	for i, r := range cfg.ReferencesTo {
		rs, err := referenceSpec(r)
		if err != nil {
			return nil, configErrorf("references_to[%d]: %w", i, err)
		}
		j.Spec.ReferencesTo = append(j.Spec.ReferencesTo, rs)
	}
	rk, err := j.Spec.Build()
	if err != nil {
		return nil, configErrorf("rewrite: %w", err)
	}
	if j.Spec.TargetStore == record.Spanner {
		j.TargetKey = rk.SpannerOut()
		j.Children = map[string]rewrite.KeySchema{}
		for name := range j.Spec.Children {
			j.Children[name], _ = rk.ChildOut(name)
		}
		if holdsRows(tgt.Type) && !keysOnly {
			if err := j.resolveSpannerTarget(ctx); err != nil {
				return nil, err
			}
		}
	}
	return j, nil
}

// Redrive sets the job up to re-submit the records of a dead-letter file
// written by an earlier run of the same config (after the cause was
// fixed): records refused at the read or rewrite stage are rewritten and
// written, records refused at the write stage (already rewritten) are
// written again. What still fails is dead-lettered again, to the job's
// dead-letter path, or next to from if that is the same file.
func (j *Job) Redrive(from string) {
	j.RedriveFrom = from
	if SamePath(j.DeadLetterPath, from) {
		j.DeadLetterPath = RedriveDeadLetterPath(j.DeadLetterPath)
	}
}

// RedriveDeadLetterPath is where a redrive of from writes what still
// fails when the config's dead-letter file is from itself: from with
// ".redrive.jsonl" in place of a ".jsonl" ending (dead.jsonl ->
// dead.redrive.jsonl).
func RedriveDeadLetterPath(from string) string {
	return strings.TrimSuffix(from, ".jsonl") + ".redrive.jsonl"
}

// SamePath reports whether two paths name the same file: equal as
// written, or, for local paths, after making them absolute and resolving
// symbolic links (as far as they exist).
func SamePath(a, b string) bool {
	if a == b {
		return true
	}
	if strings.Contains(a, "://") || strings.Contains(b, "://") {
		return false
	}
	return canonical(a) == canonical(b)
}

func canonical(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	// The file may not exist yet: resolve its folder.
	if d, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(d, filepath.Base(abs))
	}
	return abs
}

// Ramp is the job's ramp-up for run (zero when there is none): whoever
// builds the pipeline names the run once and gives the same ramp to every
// sink; the ramp starts at the run's first data commit (see throttle).
// A ramp.run in the config names it instead, for every job that gives
// it: those jobs' processes share one budget.
func (j *Job) Ramp(run string) throttle.Ramp {
	r := j.Config.Ramp
	ramp := throttle.Ramp{Profile: r.Profile, Base: r.Base, Growth: r.Growth, IntervalSeconds: r.IntervalSeconds}
	if ramp.Off() {
		return throttle.Ramp{}
	}
	ramp.Run = run
	if r.Run != "" {
		ramp.Run = r.Run
	}
	return ramp
}

// Scatters reports whether the job's rewrite scatters the target keys
// (rewrite.Scatters), so write planning can skip the global shuffle: the
// source and target hold the same kind of key, and the strategy hashes
// or bit-reverses its leading part.
func (j *Job) Scatters() bool {
	if j.Spec.SourceStore != j.Spec.TargetStore {
		return false
	}
	st, err := rewrite.New(j.Spec.Strategy)
	if err != nil {
		return false
	}
	return rewrite.Scatters(st, j.SourceKey, j.Spec.TargetStore == record.Datastore)
}

// Describe is the one-line summary `rekey run` prints before a run.
func (j *Job) Describe() string {
	src, tgt := j.Source, j.Target
	from := src.Type + " " + src.Name()
	if j.RedriveFrom != "" {
		// A redrive reads the dead letters, not the source.
		from = fmt.Sprintf("the dead letters in %s (of %s)", j.RedriveFrom, from)
	}
	return fmt.Sprintf("%s -> %s %s with %s", from, tgt.Type, tgt.Name(), j.Spec.Strategy.Strategy)
}

// referenceSpec is the rewrite of the kind a references_to entry points
// at: given inline, or the one of the config that migrated it (its
// rewrite and ancestors, and its kind and namespace renames).
func referenceSpec(r config.ReferenceTo) (rekeyer.ReferenceToSpec, error) {
	rs := rekeyer.ReferenceToSpec{Property: r.Property, Kind: r.Kind}
	if r.Config == "" {
		rs.Strategy = r.Rewrite.Step()
		injectAncestors(&rs.Strategy, r.Ancestors, record.Datastore)
		return rs, nil
	}
	oc, err := config.LoadFile(r.Config)
	if err != nil {
		return rs, fmt.Errorf("config %s: %w", r.Config, err)
	}
	kind := firstNonEmpty(oc.Source.Kind, oc.Target.Kind)
	if !kindOf(oc.Target.Type).datastoreDB() || kind == "" {
		return rs, fmt.Errorf("config %s does not migrate a Datastore kind", r.Config)
	}
	if r.Kind != "" && r.Kind != kind {
		return rs, fmt.Errorf("config %s migrates kind %s, not %s", r.Config, kind, r.Kind)
	}
	rs.Kind = kind
	rs.Strategy = oc.Rewrite.Step()
	injectAncestors(&rs.Strategy, oc.Ancestors, record.Datastore)
	if oc.Source.Kind != "" && oc.Target.Kind != "" && oc.Source.Kind != oc.Target.Kind {
		rs.TargetKind = oc.Target.Kind
	}
	if oc.Target.Namespace != oc.Source.Namespace {
		rs.TargetNamespace, rs.SourceNamespace = oc.Target.Namespace, oc.Source.Namespace
	}
	return rs, nil
}

// holdsRows reports whether a target of type t holds Spanner tables: a
// database, or an avro target (a Spanner export).
func holdsRows(t string) bool { return kindOf(t).tables }

// storeOf is the store whose record shape an endpoint of type t carries:
// an entity-json file holds entities; another file holds records shaped
// for the store at the other end; between files, rows (Spanner) when a
// key schema is given, else entities (Datastore).
func storeOf(t, other, key string) string {
	if sh := kindOf(t).shape; sh != "" {
		return sh
	}
	if sh := kindOf(other).shape; sh != "" {
		return sh
	}
	if key != "" {
		return record.Spanner
	}
	return record.Datastore
}

// injectAncestors applies the config's ancestors setting to strategies
// that rewrite Datastore path elements, unless a step sets elements itself.
func injectAncestors(step *rewrite.StepConfig, ancestors, store string) {
	if store != record.Datastore || ancestors == "" {
		return
	}
	for i := range step.Steps {
		injectAncestors(&step.Steps[i], ancestors, store)
	}
	switch step.Strategy {
	case "hashprefix", "reverse", "bitreverse", "uuid":
		if _, ok := step.Params["elements"]; !ok {
			p := rewrite.Params{}
			for k, v := range step.Params {
				p[k] = v
			}
			p["elements"] = ancestors
			step.Params = p
		}
	}
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// Reversed is the job turned around for writing old (a reverse
// backfill): its target is the source (endpoint, key, Spanner tables,
// parents before children as new's are), without a ramp-up (the old store
// has no ramp table, and a reverse backfill is a rollback, which should
// not wait).
func (j *Job) Reversed() *Job {
	jr := *j
	cfg := *j.Config
	cfg.Target = cfg.Source
	cfg.Ramp = config.RampConfig{}
	jr.Config = &cfg
	jr.Target = j.Source
	jr.TargetKey = j.SourceKey
	if j.Spanner != nil && j.Spanner.Source == nil {
		jr.Spanner = nil // new's tables: old is not Spanner (Datastore → Spanner)
	} else if j.Spanner != nil {
		sp := *j.Spanner
		sp.Targets = []*spannerdb.Table{j.Spanner.Source}
		for _, t := range j.Spanner.Targets[min(1, len(j.Spanner.Targets)):] {
			if ot := j.Spanner.Children[t.Name]; ot != nil {
				sp.Targets = append(sp.Targets, ot)
			}
		}
		jr.Spanner = &sp
	}
	return &jr
}

// Portable is the job as a worker in another process resolves it again:
// its config, as JSON (see ResolvePortable).
func (j *Job) Portable() (string, error) {
	b, err := json.Marshal(j.Config)
	return string(b), err
}

// ResolvePortable resolves the job of a Portable text.
func ResolvePortable(ctx context.Context, text string) (*Job, error) {
	var cfg config.Config
	if err := json.Unmarshal([]byte(text), &cfg); err != nil {
		return nil, fmt.Errorf("the job's config: %w", err)
	}
	return Resolve(ctx, &cfg)
}
