package pipeline

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/transforms/sink"
	"github.com/rekeyio/rekey/transforms/source"
)

func readDatastore(s beam.Scope, j *migration.Job) (beam.PCollection, []beam.PCollection, error) {
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

// datastoreSources are the reads of a Datastore source: its kind, then
// each descendant kind, all at the job's read time.
func datastoreSources(j *migration.Job) []source.DatastoreConfig {
	src := j.Config.Source
	var out []source.DatastoreConfig
	for _, kind := range append([]string{src.Kind}, j.Config.DescendantKinds()...) {
		out = append(out, source.DatastoreConfig{Project: src.Project, Database: src.Database, Namespace: src.Namespace, Kind: kind, ReadTime: j.ReadTime})
	}
	return out
}

// datastore writes to the target's database, or deletes from the
// source's: each key in its own namespace (the rewrite gives the
// target's; a delete's key is the source's, as read).
func (w writes) datastore(s beam.Scope, batches beam.PCollection) []beam.PCollection {
	tgt, wc := w.endpoint(), w.job.Config.Write
	cfg := sink.DatastoreSinkConfig{Project: tgt.Project, Database: tgt.Database, LeaseNamespace: tgt.Namespace, Mode: wc.Mode,
		MaxEntities: wc.BatchMutations, MaxBytes: wc.BatchBytes,
		CommitPerElement: true, Parallelism: wc.Parallelism, Guard: w.guard()} // one planned batch, one commit
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
	return []beam.PCollection{sink.Datastore(s, cfg, batches)}
}
