package rewrite

// None keeps keys as they are: a plain copy, and the baseline the others
// are measured against. It is injective, invertible and supports both
// stores.
type None struct{}

func init() {
	register(Info{
		Name: "none", Summary: "keep keys unchanged (a plain copy; the baseline)",
		Invertible: true, Deterministic: true, Spanner: true, Datastore: true,
	}, func(*paramReader, []StepConfig) (Strategy, error) { return None{}, nil })
}

// Info describes the strategy.
func (None) Info() Info { return registry["none"].info }

// Spec returns the canonical spec.
func (None) Spec() Spec { return Spec{Strategy: "none", Params: map[string]string{}} }

// Spanner binds the strategy to a source key.
func (None) Spanner(in KeySchema) (*SpannerRewriter, error) {
	f := func(dst, key []Value) ([]Value, error) { return append(dst, key...), nil }
	return &SpannerRewriter{in: in, out: in, fwd: f, inv: f, explain: []string{"key unchanged"}}, nil
}

// Datastore returns the Datastore form.
func (None) Datastore() (*DatastoreRewriter, error) {
	f := func(k DatastoreKey) (DatastoreKey, error) { return k.Clone(), nil }
	return &DatastoreRewriter{fwd: f, inv: f}, nil
}
