package pipeline

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/transforms/sink"
	"github.com/rekeyio/rekey/transforms/source"
)

func readDatastore(s beam.Scope, p *Plan) (beam.PCollection, []beam.PCollection, error) {
	src := p.Config.Source
	var batches, deads []beam.PCollection
	for _, kind := range append([]string{src.Kind}, p.Config.Interleaved...) {
		b, d := source.Datastore(s.Scope(kind), source.DatastoreConfig{Project: src.Project, Database: src.Database, Namespace: src.Namespace, Kind: kind})
		batches = append(batches, b)
		deads = append(deads, d)
	}
	if len(batches) == 1 {
		return batches[0], deads, nil
	}
	return beam.Flatten(s, batches...), deads, nil
}

func writeDatastore(s beam.Scope, p *Plan, batches beam.PCollection) []beam.PCollection {
	tgt := p.Config.Target
	cfg := sink.DatastoreSinkConfig{Project: tgt.Project, Database: tgt.Database, Mode: p.Config.Write.Mode,
		MaxEntities: p.Config.Write.BatchMutations, MaxBytes: p.Config.Write.BatchBytes,
		CommitPerElement: true, Parallelism: p.Config.Write.Parallelism, Guard: p.Guard()} // one planned batch, one commit
	return []beam.PCollection{sink.Datastore(s, cfg, batches)}
}
