package rekeyer

import (
	"encoding/json"
	"fmt"

	"github.com/rekeyio/rekey/rewrite"
)

// Spec is the serialisable form of Options: plain data (JSON) from which
// any process rebuilds the same Rekeyer — a Beam worker, the verify job,
// or an application's dual-write path through the cutover library.
type Spec struct {
	Strategy        rewrite.StepConfig `json:"strategy"`
	SourceStore     string             `json:"source_store"`
	TargetStore     string             `json:"target_store"`
	Table           string             `json:"table"`
	Key             string             `json:"key"`      // key schema text, rewrite.KeySchema.Text
	Children        map[string]string  `json:"children"` // child table -> key schema text
	TargetTable     string             `json:"target_table"`
	Kind            string             `json:"kind"`
	TargetKind      string             `json:"target_kind"`
	TargetNamespace string             `json:"target_namespace"`
	SourceNamespace string             `json:"source_namespace,omitempty"`
	DescendantKinds []string           `json:"descendant_kinds"`
	References      []string           `json:"references"`
	KeepOriginalKey string             `json:"keep_original_key"`
	ReferencesTo    []ReferenceToSpec  `json:"references_to,omitempty"`
	StrictColumns   bool               `json:"strict_columns,omitempty"`
}

// ReferenceToSpec is the serialisable form of ReferenceTo.
type ReferenceToSpec struct {
	Property        string             `json:"property"`
	Kind            string             `json:"kind"`
	Strategy        rewrite.StepConfig `json:"strategy"`
	TargetKind      string             `json:"target_kind,omitempty"`
	TargetNamespace string             `json:"target_namespace,omitempty"`
	SourceNamespace string             `json:"source_namespace,omitempty"`
}

// UninvertibleReferencesTo names the references_to properties whose
// other run's strategy has no inverse: Invert could not give their keys
// back (a read of new in the application library, a reverse backfill).
func (sp Spec) UninvertibleReferencesTo() []string {
	var out []string
	for _, r := range sp.ReferencesTo {
		if st, err := rewrite.New(r.Strategy); err == nil && !st.Info().Invertible {
			out = append(out, fmt.Sprintf("%s (%s's strategy %s)", r.Property, r.Kind, st.Info().Name))
		}
	}
	return out
}

// Build makes the Rekeyer the spec describes.
func (sp Spec) Build() (*Rekeyer, error) {
	st, err := rewrite.New(sp.Strategy)
	if err != nil {
		return nil, err
	}
	o := Options{
		Strategy: st, SourceStore: sp.SourceStore, TargetStore: sp.TargetStore,
		Table: sp.Table, TargetTable: sp.TargetTable, Kind: sp.Kind, TargetKind: sp.TargetKind,
		TargetNamespace: sp.TargetNamespace, SourceNamespace: sp.SourceNamespace, DescendantKinds: sp.DescendantKinds, References: sp.References, KeepOriginalKey: sp.KeepOriginalKey,
		StrictColumns: sp.StrictColumns,
	}
	for _, r := range sp.ReferencesTo {
		st, err := rewrite.New(r.Strategy)
		if err != nil {
			return nil, fmt.Errorf("reference %s to %s: %w", r.Property, r.Kind, err)
		}
		o.ReferencesTo = append(o.ReferencesTo, ReferenceTo{Property: r.Property, Kind: r.Kind, Strategy: st, TargetKind: r.TargetKind, TargetNamespace: r.TargetNamespace, SourceNamespace: r.SourceNamespace})
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
	return New(o)
}

// Text is a Spec as JSON text: how a Beam DoFn carries it (strategy
// parameters are free-form values, which Beam's schema coder cannot
// describe). A job's spec is encoded once, where its graph is built
// (Spec.Text), and each DoFn builds its Rekeyer from it in Setup
// (Text.Build).
type Text string

// Text encodes the spec.
func (sp Spec) Text() Text {
	b, err := json.Marshal(sp)
	if err != nil {
		panic(fmt.Sprintf("rekeyer.Spec is not serialisable: %v", err)) // plain data: cannot happen
	}
	return Text(b)
}

// Build decodes the spec and builds its Rekeyer.
func (t Text) Build() (*Rekeyer, error) {
	var sp Spec
	if err := json.Unmarshal([]byte(t), &sp); err != nil {
		return nil, fmt.Errorf("rewrite spec: %w", err)
	}
	return sp.Build()
}
