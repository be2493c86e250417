package rewrite

import (
	"fmt"
	"strconv"
)

// Bucket prepends a new INT64 key column holding a time or integer column
// modulo N:
//
//	Bucket = MOD(MOD(x, N) + N, N)    (always 0..N-1)
//
// where x is the INT64 column itself, or for a TIMESTAMP column
// UNIX_SECONDS, UNIX_MILLIS (default) or UNIX_MICROS of it (Unit s, ms,
// us). Consecutive timestamps fall into different buckets, so a stream of
// "now" keys is spread over N ranges. The original key follows, so Bucket is
// injective and invertible. Explain prints the GoogleSQL expression.
type Bucket struct {
	Column string
	N      int64
	Unit   string
	Name   string
}

func init() {
	register(Info{
		Name: "bucket", Summary: "prepend an INT64 column Bucket = timestamp or integer column modulo N",
		Invertible: true, Deterministic: true, Spanner: true,
		Params: []ParamDoc{
			{Name: "column", Doc: "the TIMESTAMP or INT64 key column bucketed; empty: the first key column"},
			{Name: "n", Doc: "number of buckets: the new column is 0..n-1"},
			{Name: "unit", Doc: "for a TIMESTAMP column, x is UNIX_SECONDS (s), UNIX_MILLIS (ms) or UNIX_MICROS (us) of it"},
			{Name: "name", Doc: "name of the new leading INT64 key column"},
		},
	}, func(p *paramReader, _ []StepConfig) (Strategy, error) {
		b := &Bucket{
			Column: p.str("column", ""),
			N:      p.integer("n", 16, 1, 1<<31),
			Unit:   p.enum("unit", "ms", "s", "ms", "us"),
			Name:   p.str("name", "Bucket"),
		}
		if b.Name == "" {
			p.fail("name", "must not be empty")
		}
		return b, nil
	})
}

// Info describes the strategy.
func (b *Bucket) Info() Info { return registry["bucket"].info }

// Spec returns the canonical spec.
func (b *Bucket) Spec() Spec {
	return Spec{Strategy: "bucket", Params: map[string]string{
		"column": b.Column, "n": strconv.FormatInt(b.N, 10), "unit": b.Unit, "name": b.Name,
	}}
}

// Datastore is not supported.
func (b *Bucket) Datastore() (*DatastoreRewriter, error) {
	return nil, unsupported("bucket", "Datastore", "use hashprefix or generation for Datastore")
}

// Of returns the bucket of v (an INT64 or TIMESTAMP value).
func (b *Bucket) Of(v Value) int64 {
	x := v.Int
	if v.Type == TypeTimestamp {
		switch b.Unit {
		case "s":
			x = v.Time.Unix()
		case "us":
			x = v.Time.UnixMicro()
		default:
			x = v.Time.UnixMilli()
		}
	}
	m := x % b.N
	if m < 0 {
		m += b.N
	}
	return m
}

// Spanner binds the strategy to a source key.
func (b *Bucket) Spanner(in KeySchema) (*SpannerRewriter, error) {
	i, err := columnIndex("bucket", in, b.Column, TypeInt64, TypeTimestamp)
	if err != nil {
		return nil, err
	}
	out, err := prependColumn("bucket", in, Column{Name: b.Name, Type: TypeInt64})
	if err != nil {
		return nil, err
	}
	col := in.Columns[i]
	of := func(key []Value) (int64, error) {
		if key[i].Null {
			return 0, fmt.Errorf("bucket: key column %s is NULL", col.Name)
		}
		return b.Of(key[i]), nil
	}
	fwd := func(dst, key []Value) ([]Value, error) {
		n, err := of(key)
		if err != nil {
			return dst, &KeyError{Key: FormatSpannerKey(in, key), Rule: err.Error()}
		}
		dst = append(dst, Int64(n))
		return append(dst, key...), nil
	}
	inv := func(dst, key []Value) ([]Value, error) {
		if err := checkPrefixColumn(out, key, func() (int64, error) { return of(key[1:]) }); err != nil {
			return dst, err
		}
		return append(dst, key[1:]...), nil
	}
	x := QuoteIdent(col.Name)
	if col.Type == TypeTimestamp {
		x = map[string]string{"s": "UNIX_SECONDS", "ms": "UNIX_MILLIS", "us": "UNIX_MICROS"}[b.Unit] + "(" + x + ")"
	}
	expr := fmt.Sprintf("MOD(MOD(%s, %d) + %d, %d)", x, b.N, b.N, b.N)
	return &SpannerRewriter{in: in, out: out, fwd: fwd, inv: inv, explain: []string{
		fmt.Sprintf("%s = %s", b.Name, expr),
		fmt.Sprintf("DDL: %s INT64 NOT NULL AS (%s) STORED", QuoteIdent(b.Name), expr),
	}}, nil
}
