package rewrite

import (
	"fmt"
	"strconv"
	"strings"
)

// Swap reorders Spanner key columns, moving a monotonic column out of first
// place: Order lists columns (by name, or by 0-based position) that move to
// the front in that order; the others follow in their original order. For
// example Order [UserId] turns (LastAccess, UserId) into (UserId, LastAccess).
// Values are unchanged, so Swap is injective and invertible. Datastore keys
// have no columns to reorder.
type Swap struct {
	Order []string
}

func init() {
	register(Info{
		Name: "swap", Summary: "reorder key columns, e.g. (LastAccess, UserId) -> (UserId, LastAccess)",
		Invertible: true, Deterministic: true, Spanner: true,
		Params: []ParamDoc{
			{Name: "order", Doc: "required: the key columns (names, or 0-based positions) moved to the front, in this order; the others follow in their order"},
		},
	}, func(p *paramReader, _ []StepConfig) (Strategy, error) {
		s := &Swap{Order: p.list("order")}
		if len(s.Order) == 0 {
			p.fail("order", "is required: the key columns to move to the front, e.g. [UserId]")
		}
		return s, nil
	})
}

// Info describes the strategy.
func (s *Swap) Info() Info { return registry["swap"].info }

// Spec returns the canonical spec.
func (s *Swap) Spec() Spec {
	return Spec{Strategy: "swap", Params: map[string]string{"order": strings.Join(s.Order, ",")}}
}

// Datastore is not supported.
func (s *Swap) Datastore() (*DatastoreRewriter, error) {
	return nil, unsupported("swap", "Datastore", "Datastore keys have no columns to reorder")
}

// Spanner binds the strategy to a source key.
func (s *Swap) Spanner(in KeySchema) (*SpannerRewriter, error) {
	perm := make([]int, 0, len(in.Columns)) // perm[j] = source index of output column j
	seen := make([]bool, len(in.Columns))
	for _, name := range s.Order {
		i := in.Index(name)
		if i < 0 {
			if n, err := strconv.Atoi(name); err == nil && n >= 0 && n < len(in.Columns) {
				i = n
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("swap: table %s has no key column %q (key: %s)", in.Table, name, in)
		}
		if seen[i] {
			return nil, fmt.Errorf("swap: key column %s is listed twice in order", in.Columns[i].Name)
		}
		seen[i] = true
		perm = append(perm, i)
	}
	for i := range in.Columns {
		if !seen[i] {
			perm = append(perm, i)
		}
	}
	out := KeySchema{Table: in.Table, Columns: make([]Column, len(perm))}
	names := make([]string, len(perm))
	for j, i := range perm {
		out.Columns[j] = in.Columns[i]
		names[j] = in.Columns[i].Name
	}
	fwd := func(dst, key []Value) ([]Value, error) {
		for _, i := range perm {
			dst = append(dst, key[i])
		}
		return dst, nil
	}
	inv := func(dst, key []Value) ([]Value, error) {
		n := len(dst)
		dst = append(dst, key...)
		for j, i := range perm {
			dst[n+i] = key[j]
		}
		return dst, nil
	}
	return &SpannerRewriter{in: in, out: out, fwd: fwd, inv: inv,
		explain: []string{"new key order: " + out.String()}}, nil
}
