package rewrite

import (
	"fmt"
	"math/bits"
	"strconv"
)

// BitReverse reverses the bits of an INT64 key column or of Datastore ids,
// so sequential ids spread evenly over the key space:
//
//	PreserveSign (default): the sign bit stays, the other 63 bits are
//	reversed: bit i goes to bit 62-i. Equals Spanner's BIT_REVERSE(x, true).
//	Without it all 64 bits are reversed: BIT_REVERSE(x, false).
//
// Both are their own inverse. With PreserveSign a positive id stays
// positive, which Datastore requires; Datastore names are refused.
type BitReverse struct {
	Column       string // Spanner: the INT64 key column (default: the first)
	PreserveSign bool
	scope        scope
}

func init() {
	register(Info{
		Name: "bitreverse", Summary: "reverse the bits of an INT64 key or Datastore id (equals Spanner's BIT_REVERSE(x, true)); its own inverse",
		Invertible: true, Deterministic: true, Spanner: true, Datastore: true,
		Params: []ParamDoc{
			{Name: "column", Doc: "Spanner: the INT64 key column to reverse; empty: the first key column"},
			{Name: "preserve_sign", Doc: "true: keep the sign bit and reverse the other 63, BIT_REVERSE(x, true), so positive ids stay positive; false: reverse all 64 bits, BIT_REVERSE(x, false) (no Datastore form)"},
			elementsParam,
		},
	}, func(p *paramReader, _ []StepConfig) (Strategy, error) {
		b := &BitReverse{
			Column:       p.str("column", ""),
			PreserveSign: p.boolean("preserve_sign", true),
			scope:        readScope(p, "all"),
		}
		return b, nil
	})
}

// ReverseBits is BIT_REVERSE(x, preserveSign).
func ReverseBits(x int64, preserveSign bool) int64 {
	if !preserveSign {
		return int64(bits.Reverse64(uint64(x)))
	}
	u := uint64(x)
	sign := u & (1 << 63)
	return int64(sign | bits.Reverse64(u&^(1<<63))>>1)
}

// Info describes the strategy.
// Without PreserveSign it has no Datastore form (ids would turn negative).
func (b *BitReverse) Info() Info {
	i := registry["bitreverse"].info
	i.Datastore = b.PreserveSign
	return i
}

// Spec returns the canonical spec.
func (b *BitReverse) Spec() Spec {
	return Spec{Strategy: "bitreverse", Params: map[string]string{
		"column": b.Column, "preserve_sign": strconv.FormatBool(b.PreserveSign), "elements": string(b.scope),
	}}
}

// Spanner binds the strategy to a source key.
func (b *BitReverse) Spanner(in KeySchema) (*SpannerRewriter, error) {
	i, err := columnIndex("bitreverse", in, b.Column, TypeInt64)
	if err != nil {
		return nil, err
	}
	f := func(dst, key []Value) ([]Value, error) {
		dst = append(dst, key...)
		v := &dst[len(dst)-len(key)+i]
		if !v.Null {
			v.Int = ReverseBits(v.Int, b.PreserveSign)
		}
		return dst, nil
	}
	name := QuoteIdent(in.Columns[i].Name)
	return &SpannerRewriter{in: in, out: in, fwd: f, inv: f,
		explain: []string{fmt.Sprintf("%s = BIT_REVERSE(%s, %t)", name, name, b.PreserveSign)}}, nil
}

// Datastore returns the Datastore form: ids are bit-reversed, names refused.
func (b *BitReverse) Datastore() (*DatastoreRewriter, error) {
	if !b.PreserveSign {
		return nil, fmt.Errorf("bitreverse: preserve_sign=false would turn Datastore ids negative; use preserve_sign=true")
	}
	f := func(k DatastoreKey) (DatastoreKey, error) {
		return mapElements(k, b.scope, func(e PathElement) (PathElement, error) {
			if e.IsName() {
				return PathElement{}, fmt.Errorf("bitreverse: has name %q; bitreverse needs integer ids (use hashprefix for names)", e.Name)
			}
			e.ID = ReverseBits(e.ID, true)
			return e, nil
		})
	}
	return &DatastoreRewriter{fwd: f, inv: f}, nil
}
