package rewrite

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Reverse reverses a key, so keys that share a growing prefix
// ("user1001", "user1002", …) differ in their first character:
//
//	STRING  the characters (code points) in reverse order; invalid UTF-8 is
//	        refused, as Spanner and Datastore refuse it
//	BYTES   the bytes in reverse order
//	INT64   the decimal digits in reverse order, as a STRING (leading zeros
//	        are kept, so 120 → "021" stays distinct from 21 → "12"); a minus
//	        sign stays in front. The column becomes STRING(20).
//
// For a Datastore element the result is a name: an id's digits reversed, or
// a name reversed (quoted with a leading ' when the reversed name is all
// digits or starts with ', so it cannot be mistaken for a reversed id).
// Reverse is injective and invertible.
type Reverse struct {
	Column string
	scope  scope
}

func init() {
	register(Info{
		Name: "reverse", Summary: "reverse a string key (characters) or the decimal digits of an integer id",
		Invertible: true, Deterministic: true, Spanner: true, Datastore: true,
		Params: []ParamDoc{
			{Name: "column", Doc: "Spanner: the key column to reverse; empty: the first key column"},
			elementsParam,
		},
	}, func(p *paramReader, _ []StepConfig) (Strategy, error) {
		return &Reverse{Column: p.str("column", ""), scope: readScope(p, "all")}, nil
	})
}

// Info describes the strategy.
func (r *Reverse) Info() Info { return registry["reverse"].info }

// Spec returns the canonical spec.
func (r *Reverse) Spec() Spec {
	return Spec{Strategy: "reverse", Params: map[string]string{"column": r.Column, "elements": string(r.scope)}}
}

// AppendReversed appends the code points of s in reverse order to dst. It
// reports false, appending nothing, if s is not valid UTF-8.
func AppendReversed(dst []byte, s string) ([]byte, bool) {
	if !utf8.ValidString(s) {
		return dst, false
	}
	for i := len(s); i > 0; {
		_, n := utf8.DecodeLastRuneInString(s[:i])
		dst = append(dst, s[i-n:i]...)
		i -= n
	}
	return dst, true
}

func reverseDigits(dst []byte, n int64) []byte {
	var buf [24]byte
	d := strconv.AppendInt(buf[:0], n, 10)
	start := 0
	if d[0] == '-' {
		dst = append(dst, '-')
		start = 1
	}
	for i := len(d) - 1; i >= start; i-- {
		dst = append(dst, d[i])
	}
	return dst
}

// unreverseDigits parses text written by reverseDigits.
func unreverseDigits(s string) (int64, error) {
	neg := len(s) > 0 && s[0] == '-'
	digits := s
	if neg {
		digits = s[1:]
	}
	if !allDigits(digits) {
		return 0, fmt.Errorf("%q is not reversed decimal digits", s)
	}
	b := make([]byte, 0, len(s))
	if neg {
		b = append(b, '-')
	}
	for i := len(digits) - 1; i >= 0; i-- {
		b = append(b, digits[i])
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != string(b) {
		return 0, fmt.Errorf("%q does not reverse to an INT64", s)
	}
	return n, nil
}

// Spanner binds the strategy to a source key.
func (r *Reverse) Spanner(in KeySchema) (*SpannerRewriter, error) {
	i, err := columnIndex("reverse", in, r.Column, TypeString, TypeBytes, TypeInt64)
	if err != nil {
		return nil, err
	}
	out := in.Clone()
	srcType := in.Columns[i].Type
	if srcType == TypeInt64 {
		out.Columns[i].Type, out.Columns[i].MaxLen = TypeString, 20
	}
	fwd := func(dst, key []Value) ([]Value, error) {
		dst = append(dst, key...)
		v := &dst[len(dst)-len(key)+i]
		if v.Null {
			return dst, nil
		}
		switch srcType {
		case TypeInt64:
			*v = String(string(reverseDigits(nil, v.Int)))
		case TypeString:
			b, ok := AppendReversed(make([]byte, 0, len(v.Str)), v.Str)
			if !ok {
				return dst[:len(dst)-len(key)], &KeyError{Key: FormatSpannerKey(in, key), Rule: fmt.Sprintf("reverse: column %s is not valid UTF-8", in.Columns[i].Name)}
			}
			*v = String(string(b))
		case TypeBytes:
			b := make([]byte, len(v.Bytes))
			for j, c := range v.Bytes {
				b[len(b)-1-j] = c
			}
			*v = Bytes(b)
		}
		return dst, nil
	}
	inv := func(dst, key []Value) ([]Value, error) {
		dst = append(dst, key...)
		v := &dst[len(dst)-len(key)+i]
		if v.Null {
			return dst, nil
		}
		if srcType == TypeInt64 {
			n, err := unreverseDigits(v.Str)
			if err != nil {
				return dst[:len(dst)-len(key)], &KeyError{Key: FormatSpannerKey(out, key), Rule: "reverse: " + err.Error()}
			}
			*v = Int64(n)
			return dst, nil
		}
		return fwd(dst[:len(dst)-len(key)], key)
	}
	name := QuoteIdent(in.Columns[i].Name)
	expr := fmt.Sprintf("REVERSE(%s)", name)
	if srcType == TypeInt64 {
		expr = fmt.Sprintf("REVERSE(CAST(%s AS STRING)) (a minus sign kept in front)", name)
	}
	return &SpannerRewriter{in: in, out: out, fwd: fwd, inv: inv, explain: []string{name + " = " + expr}}, nil
}

// Datastore returns the Datastore form.
func (r *Reverse) Datastore() (*DatastoreRewriter, error) {
	fwd := func(k DatastoreKey) (DatastoreKey, error) {
		return mapElements(k, r.scope, func(e PathElement) (PathElement, error) {
			if !e.IsName() {
				return PathElement{Kind: e.Kind, Name: string(reverseDigits(nil, e.ID))}, nil
			}
			b, ok := AppendReversed(make([]byte, 1, len(e.Name)+1), e.Name)
			if !ok {
				return PathElement{}, fmt.Errorf("reverse: name is not valid UTF-8")
			}
			t := string(b[1:])
			if needsQuote(t) {
				b[0] = '\''
				t = string(b)
			}
			return PathElement{Kind: e.Kind, Name: t}, nil
		})
	}
	inv := func(k DatastoreKey) (DatastoreKey, error) {
		return mapElements(k, r.scope, func(e PathElement) (PathElement, error) {
			if !e.IsName() {
				return PathElement{}, fmt.Errorf("reverse: has id %d, want a reversed name", e.ID)
			}
			t := e.Name
			switch {
			case len(t) > 0 && t[0] == '\'':
				t = t[1:]
			case allDigits(t):
				id, err := unreverseDigits(t)
				if err != nil || id <= 0 {
					return PathElement{}, fmt.Errorf("reverse: %q does not reverse to a positive id", t)
				}
				return PathElement{Kind: e.Kind, ID: id}, nil
			}
			b, ok := AppendReversed(nil, t)
			if !ok {
				return PathElement{}, fmt.Errorf("reverse: name is not valid UTF-8")
			}
			return PathElement{Kind: e.Kind, Name: string(b)}, nil
		})
	}
	return &DatastoreRewriter{fwd: fwd, inv: inv}, nil
}
