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
	register.DoFn4x1[context.Context, []byte, func([]byte), func(string), error](&InvertFn{})
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

func (f *InvertFn) ProcessElement(ctx context.Context, batch []byte, emit func([]byte), dead func(string)) error {
	recs, err := record.DecodeBatch(batch)
	if err != nil {
		return err
	}
	out := recs[:0]
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
			r.Key.Namespace, r.Key.Database = f.Namespace, f.Database
		}
		out = append(out, r)
	}
	transforms.CountRewritten(ctx, int64(len(out)))
	if len(out) > 0 {
		emit(record.EncodeBatch(out))
	}
	return nil
}
