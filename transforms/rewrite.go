package transforms

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/internal/record"
	"github.com/rekeyio/rekey/internal/rekeyer"
	"github.com/rekeyio/rekey/rewrite"
)

// RekeySpec is the serializable form of rekeyer.Options: what a worker
// needs to rebuild the Rekeyer.
type RekeySpec struct {
	Strategy        rewrite.StepConfig `json:"strategy"`
	SourceStore     string             `json:"source_store"`
	TargetStore     string             `json:"target_store"`
	Table           string             `json:"table"`
	Key             string             `json:"key"`      // key schema text, rewrite.ParseKeySchema
	Children        map[string]string  `json:"children"` // child table -> key schema text
	TargetTable     string             `json:"target_table"`
	Kind            string             `json:"kind"`
	TargetKind      string             `json:"target_kind"`
	TargetNamespace string             `json:"target_namespace"`
	DescendantKinds []string           `json:"descendant_kinds"`
	References      []string           `json:"references"`
	KeepOriginalKey string             `json:"keep_original_key"`
}

// SchemaText renders a key schema in the text form RekeySpec carries.
func SchemaText(s rewrite.KeySchema) string {
	parts := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		parts[i] = c.Name + " " + c.SQLType()
		if c.Desc {
			parts[i] += " DESC"
		}
	}
	return strings.Join(parts, ", ")
}

// Build makes the Rekeyer the spec describes.
func (sp RekeySpec) Build() (*rekeyer.Rekeyer, error) {
	st, err := rewrite.New(sp.Strategy)
	if err != nil {
		return nil, err
	}
	o := rekeyer.Options{
		Strategy: st, SourceStore: sp.SourceStore, TargetStore: sp.TargetStore,
		Table: sp.Table, TargetTable: sp.TargetTable, Kind: sp.Kind, TargetKind: sp.TargetKind,
		TargetNamespace: sp.TargetNamespace, DescendantKinds: sp.DescendantKinds, References: sp.References, KeepOriginalKey: sp.KeepOriginalKey,
	}
	if sp.Key != "" {
		if o.Key, err = rewrite.ParseKeySchema(sp.Table, sp.Key); err != nil {
			return nil, err
		}
	}
	if len(sp.Children) > 0 {
		o.Children = map[string]rewrite.KeySchema{}
		for name, text := range sp.Children {
			if o.Children[name], err = rewrite.ParseKeySchema(name, text); err != nil {
				return nil, fmt.Errorf("child table %s: %w", name, err)
			}
		}
	}
	return rekeyer.New(o)
}

func init() {
	register.DoFn4x1[context.Context, []byte, func([]byte), func(string), error](&rewriteFn{})
	register.Emitter1[[]byte]()
	register.Emitter1[string]()
}

// Rewrite rewrites the keys of every record (see rekeyer). A record whose
// key cannot be rewritten becomes a dead letter ("rewrite") with the reason;
// the others go on, in batches.
func Rewrite(s beam.Scope, spec RekeySpec, batches beam.PCollection) (rewritten, deadLetters beam.PCollection) {
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
	var spec RekeySpec
	if err := json.Unmarshal([]byte(f.Spec), &spec); err != nil {
		return fmt.Errorf("rewrite spec: %w", err)
	}
	var err error
	f.rk, err = spec.Build()
	return err
}

func (f *rewriteFn) ProcessElement(ctx context.Context, batch []byte, emit func([]byte), dead func(string)) error {
	recs, err := record.DecodeBatch(batch)
	if err != nil {
		return err
	}
	out := recs[:0]
	for i := range recs {
		orig := recs[i]
		rec := recs[i]
		if err := f.rk.Rewrite(&rec); err != nil {
			CountDeadLettered(ctx, 1)
			dead(record.NewDeadLetter(record.StageRewrite, orig.Table, &orig, err))
			continue
		}
		out = append(out, rec)
	}
	CountRewritten(ctx, int64(len(out)))
	if len(out) > 0 {
		emit(record.EncodeBatch(out))
	}
	return nil
}
