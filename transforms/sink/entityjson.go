package sink

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms"
)

func init() {
	register.DoFn4x1[context.Context, record.Batch, func([]byte), func(string), error](&entityLinesFn{})
}

// EntityJSON writes record batches to one file at path (local or gs://)
// of Datastore entities as Google's Dataflow templates read them ("Cloud
// Storage Text to Datastore"): one Datastore API Entity a line in its
// proto3 JSON form (datastoredb.AppendEntityJSON), with project in every
// key. Lines are in no particular order; the file is made of part files
// as JSONL makes it. A record that is no entity Datastore can hold (a row
// without a Datastore key, a value Datastore has no type for) is a dead
// letter. It returns the number of lines written (complete when the file
// is) and the dead letters.
func EntityJSON(s beam.Scope, path, project string, batches beam.PCollection) (written, deadLetters beam.PCollection) {
	s = s.Scope("sink.EntityJSON")
	lines, dead := beam.ParDo2(s, &entityLinesFn{Path: path, Project: project}, batches)
	parts := beam.ParDo(s, &writeLinesPartFn{Path: path}, lines)
	keyed := beam.ParDo(s, keyPart, parts)
	return beam.ParDo(s, &joinPartsFn{Path: path}, beam.GroupByKey(s, keyed)), dead
}

// entityLinesFn encodes a batch of records as entity JSON lines, emitted
// together; records that cannot be encoded are dead letters.
type entityLinesFn struct {
	Path    string `json:"path"`
	Project string `json:"project"`
}

func (f *entityLinesFn) ProcessElement(ctx context.Context, batch record.Batch, emit func([]byte), dead func(string)) error {
	recs := batch.Recs
	var out []byte
	for i := range recs {
		line, err := datastoredb.AppendEntityJSON(out, &recs[i], f.Project)
		if err != nil {
			transforms.CountDeadLettered(ctx, 1)
			dead(record.NewDeadLetter(record.StageWrite, f.Path, &recs[i], err))
			continue
		}
		out = append(line, '\n')
	}
	if len(out) > 0 {
		emit(out)
	}
	return nil
}
