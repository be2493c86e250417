package rewrite

import (
	"fmt"
	"strconv"
	"strings"
)

// Generation prepends a generation number G (≥ 1), a counter the operator
// bumps periodically, so a whole old generation can be deleted at once and
// queries stay on the live one. It goes before every other key part (chain
// it last: generation, then shard or timestamp). As:
//
//	column  (Spanner, default) a new leading INT64 key column Name = G
//	prefix  a name (Datastore) or STRING column (Spanner) becomes
//	        "<G><Sep><text>", text as in HashPrefix; Sep must hold no digit
//	parent  (Datastore, default) a new root element Kind=Name, ID=G, so the
//	        generation is an ancestor of every entity
//
// Invert removes the generation after checking it is G; a key of another
// generation is refused.
type Generation struct {
	G      int64
	As     string
	Name   string
	Sep    string
	Column string // prefix on Spanner: the STRING key column (default: the first)
	scope  scope
}

func init() {
	register(Info{
		Name: "generation", Summary: "prepend a generation number (leading INT64 column, name prefix, or parent key element)",
		Invertible: true, Deterministic: true, Spanner: true, Datastore: true,
		Params: []ParamDoc{
			{Name: "g", Doc: "the generation number, which the operator bumps"},
			{Name: "as", Doc: "column: a new leading INT64 key column (Spanner); prefix: \"<g><sep><text>\" in place of a name (Datastore) or STRING column (Spanner); parent: a new root element of kind name and id g (Datastore); empty: column on Spanner, parent on Datastore"},
			{Name: "name", Doc: "as column: the new key column's name; as parent: the new root element's kind"},
			{Name: "sep", Doc: "as prefix: the text between the generation and the key; not empty, and no digits"},
			{Name: "column", Doc: "as prefix on Spanner: the STRING key column; empty: the first key column"},
			elementsParam,
		},
	}, func(p *paramReader, _ []StepConfig) (Strategy, error) {
		g := &Generation{
			G:      p.integer("g", 1, 1, 1<<62),
			As:     p.enum("as", "", "", "column", "prefix", "parent"),
			Name:   p.str("name", "Generation"),
			Sep:    p.str("sep", "-"),
			Column: p.str("column", ""),
			scope:  readScope(p, "root"),
		}
		if g.Sep == "" || strings.ContainsAny(g.Sep, "0123456789") {
			p.fail("sep", "must be non-empty and hold no digit, got %q", g.Sep)
		}
		if g.Name == "" {
			p.fail("name", "must not be empty")
		}
		return g, nil
	})
}

// Info describes the strategy.
// As "column" has no Datastore form and "parent" no Spanner form.
func (g *Generation) Info() Info {
	i := registry["generation"].info
	i.Spanner = g.As != "parent"
	i.Datastore = g.As != "column"
	return i
}

// Spec returns the canonical spec.
func (g *Generation) Spec() Spec {
	return Spec{Strategy: "generation", Params: map[string]string{
		"g": strconv.FormatInt(g.G, 10), "as": g.As, "name": g.Name, "sep": g.Sep, "column": g.Column, "elements": string(g.scope),
	}}
}

func (g *Generation) appendPrefix(dst []byte) []byte {
	return append(strconv.AppendInt(dst, g.G, 10), g.Sep...)
}

func (g *Generation) strip(s string) (string, error) {
	p := string(g.appendPrefix(nil))
	if !strings.HasPrefix(s, p) {
		return "", fmt.Errorf("generation: %q does not start with %q (generation %d)", s, p, g.G)
	}
	return s[len(p):], nil
}

// Spanner binds the strategy to a source key.
func (g *Generation) Spanner(in KeySchema) (*SpannerRewriter, error) {
	switch g.As {
	case "", "column":
		out, err := prependColumn("generation", in, Column{Name: g.Name, Type: TypeInt64})
		if err != nil {
			return nil, err
		}
		fwd := func(dst, key []Value) ([]Value, error) {
			return append(append(dst, Int64(g.G)), key...), nil
		}
		inv := func(dst, key []Value) ([]Value, error) {
			if err := checkPrefixColumn(out, key, func() (int64, error) { return g.G, nil }); err != nil {
				return dst, err
			}
			return append(dst, key[1:]...), nil
		}
		return &SpannerRewriter{in: in, out: out, fwd: fwd, inv: inv,
			explain: []string{fmt.Sprintf("%s = %d", g.Name, g.G)}}, nil
	case "prefix":
		i, err := columnIndex("generation", in, g.Column, TypeString)
		if err != nil {
			return nil, err
		}
		out := in.Clone()
		if out.Columns[i].MaxLen > 0 {
			out.Columns[i].MaxLen += len(g.appendPrefix(nil))
		}
		fwd := func(dst, key []Value) ([]Value, error) {
			dst = append(dst, key...)
			v := &dst[len(dst)-len(key)+i]
			if !v.Null {
				*v = String(string(append(g.appendPrefix(nil), v.Str...)))
			}
			return dst, nil
		}
		inv := func(dst, key []Value) ([]Value, error) {
			dst = append(dst, key...)
			v := &dst[len(dst)-len(key)+i]
			if !v.Null {
				s, err := g.strip(v.Str)
				if err != nil {
					return dst[:len(dst)-len(key)], &KeyError{Key: FormatSpannerKey(out, key), Rule: err.Error()}
				}
				*v = String(s)
			}
			return dst, nil
		}
		name := QuoteIdent(in.Columns[i].Name)
		return &SpannerRewriter{in: in, out: out, fwd: fwd, inv: inv,
			explain: []string{fmt.Sprintf("%s = CONCAT('%d%s', %s)", name, g.G, g.Sep, name)}}, nil
	}
	return nil, unsupported("generation", "Spanner", "as=parent is for Datastore; use as=column or as=prefix")
}

// Datastore returns the Datastore form.
func (g *Generation) Datastore() (*DatastoreRewriter, error) {
	switch g.As {
	case "", "parent":
		fwd := func(k DatastoreKey) (DatastoreKey, error) {
			out := k
			out.Path = make([]PathElement, 0, len(k.Path)+1)
			out.Path = append(out.Path, PathElement{Kind: g.Name, ID: g.G})
			out.Path = append(out.Path, k.Path...)
			return out, nil
		}
		inv := func(k DatastoreKey) (DatastoreKey, error) {
			if len(k.Path) < 2 || k.Path[0] != (PathElement{Kind: g.Name, ID: g.G}) {
				return DatastoreKey{}, &KeyError{Key: k.String(), Rule: fmt.Sprintf("generation: root is not %s:%d", g.Name, g.G)}
			}
			out := k
			out.Path = append([]PathElement(nil), k.Path[1:]...)
			return out, nil
		}
		return &DatastoreRewriter{fwd: fwd, inv: inv}, nil
	case "prefix":
		fwd := func(k DatastoreKey) (DatastoreKey, error) {
			return mapElements(k, g.scope, func(e PathElement) (PathElement, error) {
				return PathElement{Kind: e.Kind, Name: string(appendElementText(g.appendPrefix(nil), e))}, nil
			})
		}
		inv := func(k DatastoreKey) (DatastoreKey, error) {
			return mapElements(k, g.scope, func(e PathElement) (PathElement, error) {
				if !e.IsName() {
					return PathElement{}, fmt.Errorf("generation: has id %d, want a name with a generation prefix", e.ID)
				}
				t, err := g.strip(e.Name)
				if err != nil {
					return PathElement{}, err
				}
				return elementFromText(e.Kind, t)
			})
		}
		return &DatastoreRewriter{fwd: fwd, inv: inv}, nil
	}
	return nil, unsupported("generation", "Datastore", "as=column is for Spanner; use as=parent or as=prefix")
}
