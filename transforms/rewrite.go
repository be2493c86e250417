package transforms

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
)

func init() {
	register.DoFn4x1[context.Context, []byte, func([]byte), func(string), error](&rewriteFn{})
	register.Emitter1[[]byte]()
	register.Emitter1[string]()
}

// Rewrite rewrites the keys of every record (see rekeyer). A record whose
// key cannot be rewritten becomes a dead letter ("rewrite") with the reason;
// the others go on, in batches.
func Rewrite(s beam.Scope, spec rekeyer.Spec, batches beam.PCollection) (rewritten, deadLetters beam.PCollection) {
	s = s.Scope("Rewrite")
	text, err := json.Marshal(spec)
	if err != nil {
		panic(fmt.Sprintf("rekey spec is not serializable: %v", err)) // plain data; cannot happen
	}
	return beam.ParDo2(s, &rewriteFn{Spec: string(text)}, batches)
}

// rewriteFn carries its spec as JSON text: strategy parameters are free-form
// values, which Beam's schema coder cannot describe.
type rewriteFn struct {
	Spec string `json:"spec"`
	rk   *rekeyer.Rekeyer
}

func (f *rewriteFn) Setup() error {
	var spec rekeyer.Spec
	if err := json.Unmarshal([]byte(f.Spec), &spec); err != nil {
		return fmt.Errorf("rewrite spec: %w", err)
	}
	var err error
	f.rk, err = spec.Build()
	return err
}

func (f *rewriteFn) ProcessElement(ctx context.Context, batch []byte, emit func([]byte), dead func(string)) error {
	if err := ctx.Err(); err != nil {
		return err // the job was cancelled (the direct runner does not stop on its own)
	}
	recs, err := record.DecodeBatch(batch)
	if err != nil {
		return err
	}
	out := recs[:0]
	unmapped := 0
	for i := range recs {
		orig := recs[i]
		rec := recs[i]
		unmapped += f.rk.Unmapped(&orig)
		if err := f.rk.Rewrite(&rec); err != nil {
			CountDeadLettered(ctx, 1)
			dead(record.NewDeadLetter(record.StageRewrite, orig.Table, &orig, err))
			continue
		}
		out = append(out, rec)
	}
	CountRewritten(ctx, int64(len(out)))
	if unmapped > 0 {
		CountUnmapped(ctx, int64(unmapped))
	}
	if len(out) > 0 {
		emit(record.EncodeBatch(out))
	}
	return nil
}
