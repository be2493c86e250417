// Package pipeline builds rekey's Beam pipelines from a config: Migrate
// reads the source, rewrites every record's key and writes the target, with
// a dead-letter branch at every step.
package pipeline

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/internal/config"
	"github.com/rekeyio/rekey/rekeyer"
	"github.com/rekeyio/rekey/rewrite"
	"github.com/rekeyio/rekey/transforms"
	"github.com/rekeyio/rekey/transforms/sink"
	"github.com/rekeyio/rekey/transforms/source"
)

// DefaultDeadLetterPath is where dead letters go when the config names no
// path: nothing is ever dropped silently.
const DefaultDeadLetterPath = "rekey-dead-letters.jsonl"

// Plan is what Migrate resolved from the config and the databases: the
// schemas, the rewrite, and the target DDL. It is printed before a run.
type Plan struct {
	Config *config.Config
	Spec   rekeyer.Spec
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

	spanner   *spannerPlan
	rampStart int64 // see Ramp
}

// Resolve reads what the pipeline needs to know before it is built: the
// source schema (for Spanner sources), and binds the strategy to it, so a
// bad rewrite is refused before any data moves.
func Resolve(ctx context.Context, cfg *config.Config) (*Plan, error) {
	p := &Plan{Config: cfg, DeadLetterPath: cfg.DeadLetter}
	if p.DeadLetterPath == "" {
		p.DeadLetterPath = DefaultDeadLetterPath
	}
	src, tgt := cfg.Source, cfg.Target
	p.Spec = rekeyer.Spec{
		Strategy:        cfg.Rewrite.Step(),
		SourceStore:     storeOf(src.Type, tgt.Type, src.Key),
		TargetStore:     storeOf(tgt.Type, src.Type, src.Key),
		References:      cfg.References,
		KeepOriginalKey: cfg.KeepOriginalKey,
	}
	injectAncestors(&p.Spec.Strategy, cfg.Ancestors, p.Spec.TargetStore)

	// The key schema of the main table.
	switch {
	case src.Type == config.TypeSpanner:
		if err := p.resolveSpannerSource(ctx); err != nil {
			return nil, err
		}
	case src.Key != "":
		table := src.Table
		if tgt.Type == config.TypeSpanner || table == "" {
			table = firstNonEmpty(tgt.Table, src.Table)
		}
		ks, err := rewrite.ParseKeySchema(table, src.Key)
		if err != nil {
			return nil, fmt.Errorf("source.key: %w", err)
		}
		p.SourceKey = ks
	}
	p.Spec.Table = firstNonEmpty(src.Table, p.SourceKey.Table, tgt.Table)
	p.Spec.Key = p.SourceKey.Text()
	if tgt.Type == config.TypeSpanner && tgt.Table != "" && !strings.EqualFold(tgt.Table, p.Spec.Table) {
		p.Spec.TargetTable = tgt.Table
	}
	if src.Type == config.TypeDatastore {
		p.Spec.DescendantKinds = cfg.Interleaved
	}
	if tgt.Type == config.TypeDatastore {
		p.Spec.Kind = firstNonEmpty(src.Kind, tgt.Kind)
		if src.Kind != "" && tgt.Kind != "" && src.Kind != tgt.Kind {
			p.Spec.TargetKind = tgt.Kind
		}
		if tgt.Namespace != src.Namespace {
			p.Spec.TargetNamespace = tgt.Namespace
		}
	}
	rk, err := p.Spec.Build()
	if err != nil {
		return nil, fmt.Errorf("rewrite: %w", err)
	}
	if p.Spec.TargetStore == rekeyer.Spanner {
		p.TargetKey = rk.SpannerOut()
		p.Children = map[string]rewrite.KeySchema{}
		for name := range p.Spec.Children {
			p.Children[name], _ = rk.ChildOut(name)
		}
		if tgt.Type == config.TypeSpanner {
			if err := p.resolveSpannerTarget(ctx); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// storeOf is the store whose record shape an endpoint of type t carries: a
// file holds records shaped for the store at the other end; between files,
// rows (Spanner) when a key schema is given, else entities (Datastore).
func storeOf(t, other, key string) string {
	switch t {
	case config.TypeSpanner:
		return rekeyer.Spanner
	case config.TypeDatastore:
		return rekeyer.Datastore
	}
	switch other {
	case config.TypeSpanner:
		return rekeyer.Spanner
	case config.TypeDatastore:
		return rekeyer.Datastore
	}
	if key != "" {
		return rekeyer.Spanner
	}
	return rekeyer.Datastore
}

// injectAncestors applies the config's ancestors setting to strategies
// that rewrite Datastore path elements, unless a step sets elements itself.
func injectAncestors(step *rewrite.StepConfig, ancestors, store string) {
	if store != rekeyer.Datastore || ancestors == "" {
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

// Migrate adds the migration to the pipeline rooted at s: source →
// rewrite → write planning (database targets, transforms/writeplan) → sink,
// every dead letter to the plan's dead-letter file. With p.RedriveFrom
// set, the source is that dead-letter file instead (see Redrive). It
// returns the PCollection of dead-letter file line counts (one element,
// when the run is complete).
func Migrate(s beam.Scope, p *Plan) (beam.PCollection, error) {
	var batches, rewritten, redriven beam.PCollection
	var deads []beam.PCollection
	if p.RedriveFrom != "" {
		var stillDead beam.PCollection
		batches, redriven, stillDead = source.DeadLetters(s, p.RedriveFrom)
		deads = append(deads, stillDead)
	} else {
		var readDead []beam.PCollection
		var err error
		if batches, readDead, err = readSource(s, p); err != nil {
			return beam.PCollection{}, err
		}
		deads = append(deads, readDead...)
	}
	rewritten, rewriteDead := transforms.Rewrite(s, p.Spec, batches)
	deads = append(deads, rewriteDead)
	if p.RedriveFrom != "" {
		rewritten = beam.Flatten(s, rewritten, redriven)
	}
	rewritten = planWrites(s, p, rewritten)
	writeDead, err := writeTarget(s, p, rewritten)
	if err != nil {
		return beam.PCollection{}, err
	}
	deads = append(deads, writeDead...)
	return sink.Lines(s, p.DeadLetterPath, beam.Flatten(s, deads...)), nil
}

// Redrive sets the plan up to re-submit the records of a dead-letter file
// written by an earlier run of the same config (after the cause was
// fixed): records refused at the read or rewrite stage are rewritten and
// written, records refused at the write stage (already rewritten) are
// written again. What still fails is dead-lettered again, to the plan's
// dead-letter path, or next to from if that is the same file.
func (p *Plan) Redrive(from string) {
	p.RedriveFrom = from
	if p.DeadLetterPath == from {
		p.DeadLetterPath = strings.TrimSuffix(from, ".jsonl") + ".redrive.jsonl"
	}
}

func readSource(s beam.Scope, p *Plan) (beam.PCollection, []beam.PCollection, error) {
	src := p.Config.Source
	switch src.Type {
	case config.TypeJSONL, config.TypeCSV, config.TypeAvro:
		b, d := source.Files(s, source.FilesConfig{Path: src.Path, Format: src.Type, Delimiter: src.Delimiter, Table: p.Spec.Table})
		return b, []beam.PCollection{d}, nil
	case config.TypeSpanner:
		return p.readSpanner(s)
	case config.TypeDatastore:
		return readDatastore(s, p)
	}
	return beam.PCollection{}, nil, fmt.Errorf("source.type %q is not supported yet", src.Type)
}

func writeTarget(s beam.Scope, p *Plan, batches beam.PCollection) ([]beam.PCollection, error) {
	tgt := p.Config.Target
	switch tgt.Type {
	case config.TypeJSONL:
		sink.JSONL(s, tgt.Path, batches)
		return nil, nil
	case config.TypeSpanner:
		return p.writeSpanner(s, batches)
	case config.TypeDatastore:
		return writeDatastore(s, p, batches), nil
	}
	return nil, fmt.Errorf("target.type %q is not supported yet", tgt.Type)
}
