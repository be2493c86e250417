package rewrite

import (
	"errors"
	"fmt"
)

// Chain applies its steps in order: the output key of one step is the input
// of the next. It is invertible (and deterministic) when every step is;
// Invert applies the steps' inverses in reverse order. For example
// [hashprefix, generation] gives "3-a1b2-Customer1".
type Chain struct {
	Steps []Strategy
}

func init() {
	register(Info{
		Name: "chain", Summary: "apply several strategies in order (invertible when all of them are)",
		Invertible: true, Deterministic: true, Spanner: true, Datastore: true,
	}, func(p *paramReader, steps []StepConfig) (Strategy, error) {
		if len(steps) == 0 {
			return nil, &ParamError{Path: p.prefix + "steps", Msg: "chain needs at least one step"}
		}
		c := &Chain{}
		var errs []error
		for i, st := range steps {
			s, err := newAt(fmt.Sprintf("%ssteps[%d].", p.prefix, i), st)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			c.Steps = append(c.Steps, s)
		}
		return c, errors.Join(errs...)
	})
}

// Info describes the chain: invertible, deterministic and supported on a
// store only when every step is.
func (c *Chain) Info() Info {
	i := registry["chain"].info
	for _, s := range c.Steps {
		si := s.Info()
		i.Invertible = i.Invertible && si.Invertible
		i.Deterministic = i.Deterministic && si.Deterministic
		i.Spanner = i.Spanner && si.Spanner
		i.Datastore = i.Datastore && si.Datastore
	}
	return i
}

// Spec returns the canonical spec.
func (c *Chain) Spec() Spec {
	s := Spec{Strategy: "chain"}
	for _, st := range c.Steps {
		s.Steps = append(s.Steps, st.Spec())
	}
	return s
}

// Spanner binds each step in turn.
func (c *Chain) Spanner(in KeySchema) (*SpannerRewriter, error) {
	rs := make([]*SpannerRewriter, 0, len(c.Steps))
	schema := in
	var explain []string
	invertible := true
	for i, s := range c.Steps {
		r, err := s.Spanner(schema)
		if err != nil {
			return nil, fmt.Errorf("chain step %d: %w", i+1, err)
		}
		rs = append(rs, r)
		schema = r.Out()
		explain = append(explain, r.Explain()...)
		invertible = invertible && r.Invertible()
	}
	fwd := func(dst, key []Value) ([]Value, error) {
		cur := key
		for _, r := range rs {
			next, err := r.Rewrite(nil, cur)
			if err != nil {
				return dst, err
			}
			cur = next
		}
		return append(dst, cur...), nil
	}
	var inv func(dst, key []Value) ([]Value, error)
	if invertible {
		inv = func(dst, key []Value) ([]Value, error) {
			cur := key
			for i := len(rs) - 1; i >= 0; i-- {
				next, err := rs[i].Invert(nil, cur)
				if err != nil {
					return dst, err
				}
				cur = next
			}
			return append(dst, cur...), nil
		}
	}
	return &SpannerRewriter{in: in, out: schema, fwd: fwd, inv: inv, explain: explain}, nil
}

// Datastore composes the steps' Datastore forms.
func (c *Chain) Datastore() (*DatastoreRewriter, error) {
	rs := make([]*DatastoreRewriter, 0, len(c.Steps))
	invertible := true
	for i, s := range c.Steps {
		r, err := s.Datastore()
		if err != nil {
			return nil, fmt.Errorf("chain step %d: %w", i+1, err)
		}
		rs = append(rs, r)
		invertible = invertible && r.Invertible()
	}
	fwd := func(k DatastoreKey) (DatastoreKey, error) {
		for _, r := range rs {
			var err error
			if k, err = r.Rewrite(k); err != nil {
				return DatastoreKey{}, err
			}
		}
		return k, nil
	}
	var inv func(DatastoreKey) (DatastoreKey, error)
	if invertible {
		inv = func(k DatastoreKey) (DatastoreKey, error) {
			for i := len(rs) - 1; i >= 0; i-- {
				var err error
				if k, err = rs[i].Invert(k); err != nil {
					return DatastoreKey{}, err
				}
			}
			return k, nil
		}
	}
	return &DatastoreRewriter{fwd: fwd, inv: inv}, nil
}
