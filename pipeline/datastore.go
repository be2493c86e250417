package pipeline

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/progress"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/plan/sim"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms/sink"
	"github.com/rekeyio/rekey/transforms/source"
)

// datastoreKind is a Datastore database as a source and as a target.
type datastoreKind struct{}

// read reads the source's kind and each descendant kind whole (a query
// cannot tell a cohort), or samples o.sample entities by key
// (samplesByKeys).
func (k datastoreKind) read(s beam.Scope, j *migration.Job, o readOptions) (beam.PCollection, []beam.PCollection, error) {
	if k.samplesByKeys(j, o.sample) {
		src := j.Source
		b, d := source.DatastoreSample(s, source.DatastoreConfig{Project: src.Project, Database: src.Database, Namespace: src.Namespace, Kind: src.Kind}, o.sample)
		return b, []beam.PCollection{d}, nil
	}
	var batches, deads []beam.PCollection
	for _, cfg := range datastoreSources(j) {
		b, d := source.Datastore(s.Scope(cfg.Kind), cfg)
		batches = append(batches, b)
		deads = append(deads, d)
	}
	if len(batches) == 1 {
		return batches[0], deads, nil
	}
	return beam.Flatten(s, batches...), deads, nil
}

// samplesByKeys reports whether a plan samples n entities by their keys
// (source.DatastoreSample): a sample of one kind. A migration that
// carries descendant kinds along reads them all and samples as it reads,
// so that children keep their proportions.
func (datastoreKind) samplesByKeys(j *migration.Job, n int) bool {
	return n > 0 && len(j.Descendants) == 0
}

// estimate is the count of the kind and of each descendant kind
// (source.CountDatastore).
func (datastoreKind) estimate(ctx context.Context, j *migration.Job) (progress.Total, bool) {
	var n int64
	var from string
	for _, cfg := range datastoreSources(j) {
		m, f, err := source.CountDatastore(ctx, cfg)
		if err != nil {
			return progress.Total{}, false
		}
		n, from = n+m, f
	}
	return progress.Total{N: n, From: from}, true
}

func (datastoreKind) peek(ctx context.Context, j *migration.Job, n int) ([]record.Record, error) {
	src := j.Source
	return source.PeekDatastore(ctx, source.DatastoreConfig{Project: src.Project, Database: src.Database, Namespace: src.Namespace, Kind: src.Kind}, n)
}

func (datastoreKind) describe(e config.Endpoint) string {
	s := "Datastore kind " + e.Kind
	if e.Namespace != "" {
		s += " (namespace " + e.Namespace + ")"
	}
	return s
}

// readNew reads the target's kind (the source's when it keeps the name)
// and each descendant kind (they keep theirs) whole.
func (datastoreKind) readNew(s beam.Scope, j *migration.Job, _ *phases.Backfill) (beam.PCollection, []beam.PCollection) {
	t := j.Target
	kind := t.Kind
	if kind == "" {
		kind = j.Source.Kind
	}
	var batches, deads []beam.PCollection
	for _, k := range append([]string{kind}, j.Descendants...) {
		b, d := source.Datastore(s.Scope(k), source.DatastoreConfig{Project: t.Project, Database: t.Database, Namespace: t.Namespace, Kind: k})
		batches, deads = append(batches, b), append(deads, d)
	}
	if len(batches) == 1 {
		return batches[0], deads
	}
	return beam.Flatten(s, batches...), deads
}

// simDefaults are Firestore's, with nodes > 0 nodes.
func (datastoreKind) simDefaults(nodes int) sim.Params {
	p := sim.FirestoreDefaults()
	if nodes > 0 {
		p.Nodes = nodes
	}
	return p
}

func (datastoreKind) entities() bool { return true }

// datastoreSources are the reads of a Datastore source: its kind, then
// each descendant kind, all at the job's read time.
func datastoreSources(j *migration.Job) []source.DatastoreConfig {
	src := j.Source
	var out []source.DatastoreConfig
	for _, kind := range append([]string{src.Kind}, j.Descendants...) {
		out = append(out, source.DatastoreConfig{Project: src.Project, Database: src.Database, Namespace: src.Namespace, Kind: kind, ReadTime: j.ReadTime})
	}
	return out
}

// write writes to the target's database, or deletes from the
// source's: each key in its own namespace (the rewrite gives the
// target's; a delete's key is the source's, as read).
func (datastoreKind) write(s beam.Scope, w writes, batches beam.PCollection) ([]beam.PCollection, error) {
	tgt, wc := w.endpoint(), w.job.Write
	cfg := sink.DatastoreSinkConfig{Project: tgt.Project, Database: tgt.Database, LeaseNamespace: tgt.Namespace, Mode: wc.Mode,
		MaxEntities: wc.BatchMutations, MaxBytes: wc.BatchBytes,
		CommitPerElement: true, Parallelism: wc.Parallelism, Guard: w.guard()} // one planned batch, one commit
	if cfg.MaxEntities > datastoredb.MaxCommitEntities {
		// write.batch_mutations sized for a Spanner target: a cleanup
		// or a reverse backfill of a Datastore source commits at most
		// Datastore's most.
		cfg.MaxEntities = datastoredb.MaxCommitEntities
	}
	if w.deletes {
		cfg.Mode = storewrite.ModeDelete
	}
	if w.backfill != nil {
		b := *w.backfill
		if b.Namespace == "" {
			b.Namespace = tgt.Namespace
		}
		cfg.Backfill = &b
	}
	return []beam.PCollection{sink.Datastore(s, cfg, batches)}, nil
}
