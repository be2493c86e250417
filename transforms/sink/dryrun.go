package sink

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/record"
)

func init() {
	register.DoFn3x1[context.Context, record.Batch, func(string), error](&dryRunFn{})
}

// DryRun is the sink of a dry run: it writes nothing and counts the
// records of each planned batch by table (Spanner) or kind (Datastore), as
// "rekey" counters named prefix + the table or kind. It returns an empty
// dead-letter PCollection, so it stands where a sink stands.
func DryRun(s beam.Scope, prefix string, batches beam.PCollection) (deadLetters beam.PCollection) {
	s = s.Scope("sink.DryRun")
	return beam.ParDo(s, &dryRunFn{Prefix: prefix}, batches)
}

type dryRunFn struct {
	Prefix string `json:"prefix"`
}

func (f *dryRunFn) ProcessElement(ctx context.Context, batch record.Batch, _ func(string)) error {
	recs := batch.Recs
	n := map[string]int64{}
	for i := range recs {
		n[recs[i].Table]++
	}
	for table, c := range n {
		beam.NewCounter("rekey", f.Prefix+table).Inc(ctx, c)
	}
	return nil
}
