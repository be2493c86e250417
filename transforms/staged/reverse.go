package staged

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
	"github.com/rekeyio/rekey/transforms"
)

func init() {
	register.DoFn4x1[context.Context, record.Batch, func(record.Batch), func(string), error](&InvertFn{})
}

// InvertFn turns new records back into old ones (rekeyer.Invert), in the
// source's namespace and database.
type InvertFn struct {
	Spec      rekeyer.Text `json:"spec"`
	Namespace string       `json:"namespace"`
	Database  string       `json:"database"`

	rk *rekeyer.Rekeyer
}

func (f *InvertFn) Setup() error {
	var err error
	f.rk, err = f.Spec.Build()
	return err
}

func (f *InvertFn) ProcessElement(ctx context.Context, batch record.Batch, emit func(record.Batch), dead func(string)) error {
	// The input is read-only (record.Batch): the inverted records are new
	// ones, with fields and keys of their own.
	recs := batch.Recs
	out := make([]record.Record, 0, len(recs))
	for i := range recs {
		nr := recs[i]
		r := nr
		r.Fields = append([]record.Field(nil), nr.Fields...)
		if err := f.rk.Invert(&r); err != nil {
			transforms.CountDeadLettered(ctx, 1)
			dead(record.NewDeadLetter(record.StageRewrite, nr.Table, &nr, fmt.Errorf("reverse backfill: %w", err)))
			continue
		}
		if r.Key != nil {
			k := r.Key.Clone()
			k.Namespace, k.Database = f.Namespace, f.Database
			r.Key = &k
		}
		out = append(out, r)
	}
	transforms.CountRewritten(ctx, int64(len(out)))
	if len(out) > 0 {
		emit(record.Batch{Recs: out})
	}
	return nil
}
