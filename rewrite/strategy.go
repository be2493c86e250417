package rewrite

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rekeyio/rekey/internal/suggest"
)

// Info describes a strategy.
type Info struct {
	Name    string
	Summary string // one line, for `rekey strategies`
	// Invertible: the strategy can compute the old key from the new one.
	Invertible bool
	// Deterministic: the same old key always gives the same new key.
	Deterministic bool
	// Spanner and Datastore say which stores the strategy can rewrite.
	Spanner, Datastore bool
	// Params are the strategy's parameters. A strategy declares each
	// one's Name and Doc; register fills in Type and Default from what
	// the strategy reads when given no parameters, so they are the ones
	// the code uses.
	Params []ParamDoc
}

// ParamDoc describes one parameter of a strategy.
type ParamDoc struct {
	Name string
	// Type is the values the parameter takes, in words: "string",
	// "integer 1..32", "true or false", "one of md5, farm", ...
	Type string
	// Default is the value used when the parameter is not given, in its
	// canonical form (as in Spec); "" when the default is empty.
	Default string
	Doc     string
}

// Strategy is a configured key rewrite. Spanner binds it to a source key
// schema; Datastore returns its Datastore form. Either returns an error
// wrapping ErrUnsupported where the strategy has no such form.
type Strategy interface {
	Info() Info
	// Spec is the canonical, fully-defaulted description of the strategy,
	// recorded in a target's manifest to refuse mixing two key schemes.
	Spec() Spec
	Spanner(in KeySchema) (*SpannerRewriter, error)
	Datastore() (*DatastoreRewriter, error)
}

// ErrUnsupported is returned for a store a strategy cannot rewrite.
var ErrUnsupported = errors.New("not supported")

// ErrNotInvertible is returned by Invert on a strategy that cannot invert.
var ErrNotInvertible = errors.New("strategy is not invertible")

// Spec is a strategy's canonical description.
type Spec struct {
	Strategy string
	Params   map[string]string
	Steps    []Spec
}

// String renders the spec deterministically, e.g.
// "hashprefix(hash=md5,n=4,sep=-)" or "chain(generation(...),shard(...))".
func (s Spec) String() string {
	var b strings.Builder
	b.WriteString(s.Strategy)
	b.WriteByte('(')
	if len(s.Steps) > 0 {
		for i, st := range s.Steps {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(st.String())
		}
	} else {
		keys := make([]string, 0, len(s.Params))
		for k := range s.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(k + "=" + strconv.Quote(s.Params[k]))
		}
	}
	b.WriteByte(')')
	return b.String()
}

type factory struct {
	info  Info
	build func(p *paramReader, steps []StepConfig) (Strategy, error)
}

var registry = map[string]factory{}

// register adds a strategy. It builds the strategy once with no
// parameters to learn the type and default of each parameter it reads;
// a parameter read but not declared in info.Params is listed with no
// Doc, and one declared but not read with no Type (a test refuses both).
func register(info Info, build func(p *paramReader, steps []StepConfig) (Strategy, error)) {
	p := newParamReader("", nil)
	_, _ = build(p, nil)
	declared := info.Params
	info.Params = nil
	for _, d := range declared {
		d.Type, d.Default = p.types[d.Name], p.canon[d.Name]
		info.Params = append(info.Params, d)
	}
	for _, name := range p.read {
		if !slices.ContainsFunc(declared, func(d ParamDoc) bool { return d.Name == name }) {
			info.Params = append(info.Params, ParamDoc{Name: name, Type: p.types[name], Default: p.canon[name]})
		}
	}
	registry[info.Name] = factory{info: info, build: build}
}

// Strategies lists every strategy, sorted by name.
func Strategies() []Info {
	out := make([]Info, 0, len(registry))
	for _, f := range registry {
		out = append(out, f.info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// StepConfig is one strategy with its parameters, as written in a config.
type StepConfig struct {
	Strategy string
	Params   Params
	Steps    []StepConfig // only for chain
}

// New builds a strategy from its configuration. Every problem is reported at
// once (errors.Join of *ParamError, paths relative to the step).
func New(c StepConfig) (Strategy, error) { return newAt("", c) }

func newAt(prefix string, c StepConfig) (Strategy, error) {
	f, ok := registry[strings.ToLower(c.Strategy)]
	if !ok {
		names := make([]string, 0, len(registry))
		for n := range registry {
			names = append(names, n)
		}
		sort.Strings(names)
		msg := fmt.Sprintf("unknown strategy %q", c.Strategy)
		if s := suggest.Closest(strings.ToLower(c.Strategy), names); s != "" {
			msg += fmt.Sprintf("; did you mean %s?", s)
		}
		return nil, &ParamError{Path: prefix + "strategy", Msg: fmt.Sprintf("%s (known: %s)", msg, strings.Join(names, ", "))}
	}
	if len(c.Steps) > 0 && f.info.Name != "chain" {
		return nil, &ParamError{Path: prefix + "steps", Msg: "only the chain strategy takes steps"}
	}
	p := newParamReader(prefix, c.Params)
	s, err := f.build(p, c.Steps)
	if perr := p.done(); perr != nil {
		return nil, errors.Join(err, perr)
	}
	return s, err
}

// SpannerRewriter rewrites keys of one source schema (In) into keys of the
// target schema (Out). It is safe for concurrent use.
type SpannerRewriter struct {
	in, out KeySchema
	fwd     func(dst, key []Value) ([]Value, error)
	inv     func(dst, key []Value) ([]Value, error) // nil: not invertible
	explain []string
}

// In is the source key schema.
func (r *SpannerRewriter) In() KeySchema { return r.in }

// Out is the target key schema.
func (r *SpannerRewriter) Out() KeySchema { return r.out }

// Explain describes how each new key column is computed, in GoogleSQL where
// the column can be declared as a STORED generated column.
func (r *SpannerRewriter) Explain() []string { return r.explain }

// Invertible reports whether Invert works.
func (r *SpannerRewriter) Invertible() bool { return r.inv != nil }

// Rewrite appends the new key for key to dst and returns it. The old key
// must match In; the new key is checked against Out and Spanner's limits,
// and refused with a *KeyError if it breaks one.
func (r *SpannerRewriter) Rewrite(dst, key []Value) ([]Value, error) {
	return r.apply(r.fwd, r.in, r.out, dst, key)
}

// Invert appends the old key for a new key to dst and returns it.
func (r *SpannerRewriter) Invert(dst, key []Value) ([]Value, error) {
	if r.inv == nil {
		return dst, ErrNotInvertible
	}
	return r.apply(r.inv, r.out, r.in, dst, key)
}

func (r *SpannerRewriter) apply(f func(dst, key []Value) ([]Value, error), from, to KeySchema, dst, key []Value) ([]Value, error) {
	if len(key) != len(from.Columns) {
		return dst, &KeyError{Key: FormatSpannerKey(from, key), Rule: fmt.Sprintf("has %d values, %s has %d key columns", len(key), from.Table, len(from.Columns))}
	}
	for i := range from.Columns {
		if c := &from.Columns[i]; key[i].Type != c.Type {
			return dst, &KeyError{Key: FormatSpannerKey(from, key), Rule: fmt.Sprintf("column %s is %s, got a %s value", c.Name, c.SQLType(), key[i].Type)}
		}
	}
	n := len(dst)
	out, err := f(dst, key)
	if err != nil {
		return dst, err
	}
	if err := ValidateSpannerKey(to, out[n:]); err != nil {
		var ke *KeyError
		if errors.As(err, &ke) {
			return dst, &KeyError{Key: FormatSpannerKey(from, key), Rule: "rewritten key " + ke.Key + ": " + ke.Rule}
		}
		return dst, err
	}
	return out, nil
}

// DatastoreRewriter rewrites Datastore keys. It is safe for concurrent use.
type DatastoreRewriter struct {
	fwd, inv func(DatastoreKey) (DatastoreKey, error)
}

// Invertible reports whether Invert works.
func (r *DatastoreRewriter) Invertible() bool { return r.inv != nil }

// Rewrite returns the new key for k (a new path; k is not modified). The
// new key is checked against Datastore's rules and refused with a *KeyError
// if it breaks one.
func (r *DatastoreRewriter) Rewrite(k DatastoreKey) (DatastoreKey, error) { return dsApply(r.fwd, k) }

// Invert returns the old key for a new key.
func (r *DatastoreRewriter) Invert(k DatastoreKey) (DatastoreKey, error) {
	if r.inv == nil {
		return DatastoreKey{}, ErrNotInvertible
	}
	return dsApply(r.inv, k)
}

func dsApply(f func(DatastoreKey) (DatastoreKey, error), k DatastoreKey) (DatastoreKey, error) {
	out, err := f(k)
	if err != nil {
		return DatastoreKey{}, err
	}
	if err := ValidateDatastoreKey(out); err != nil {
		var ke *KeyError
		if errors.As(err, &ke) {
			return DatastoreKey{}, &KeyError{Key: k.String(), Rule: "rewritten key " + ke.Key + ": " + ke.Rule}
		}
		return DatastoreKey{}, err
	}
	return out, nil
}

// unsupported builds the error for a store a strategy cannot rewrite.
func unsupported(strategy, store, hint string) error {
	return fmt.Errorf("%s: %s keys %w; %s", strategy, store, ErrUnsupported, hint)
}

// Scope says which Datastore path elements an element-wise strategy
// rewrites: "all" (default for most), "root" (keeps entity groups together:
// children keep their ids/names under the rewritten root) or "leaf".
type scope string

// elementsParam documents the elements parameter (readScope) of the
// strategies that read it.
var elementsParam = ParamDoc{Name: "elements", Doc: "Datastore: which elements of a key path are rewritten: all, the root (children keep their ids and names under the rewritten root, so entity groups stay together) or the leaf"}

func readScope(p *paramReader, def string) scope {
	return scope(p.enum("elements", def, "all", "root", "leaf"))
}

func (s scope) includes(i, n int) bool {
	switch s {
	case "root":
		return i == 0
	case "leaf":
		return i == n-1
	}
	return true
}

// mapElements applies f to the elements of k chosen by s.
func mapElements(k DatastoreKey, s scope, f func(PathElement) (PathElement, error)) (DatastoreKey, error) {
	out := k
	out.Path = make([]PathElement, len(k.Path))
	for i, e := range k.Path {
		if !s.includes(i, len(k.Path)) {
			out.Path[i] = e
			continue
		}
		ne, err := f(e)
		if err != nil {
			return DatastoreKey{}, &KeyError{Key: k.String(), Rule: fmt.Sprintf("path element %d (%s): %v", i+1, e, err)}
		}
		out.Path[i] = ne
	}
	return out, nil
}

// Text forms of Datastore ids and names.
//
// Strategies that turn an element into a name work on its text: an id is
// its decimal digits; a name is itself, except that a name made only of
// ASCII digits, or starting with a single quote, gets a leading single quote.
// This keeps the text of id 42 ("42") apart from that of name "42" ("'42"),
// so such rewrites stay injective on kinds that mix ids and names, and makes
// the text decodable back to the element.

func needsQuote(s string) bool {
	return strings.HasPrefix(s, "'") || allDigits(s)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// ElementText returns a path element's text form (see above): an id's
// digits, or the name, quoted with a leading ' when it is all digits or
// starts with '. Distinct elements of one kind have distinct texts.
func ElementText(e PathElement) string { return string(appendElementText(nil, e)) }

// ElementFromText decodes a text form back into an element of kind.
func ElementFromText(kind, t string) (PathElement, error) { return elementFromText(kind, t) }

// appendElementText appends e's text form.
func appendElementText(dst []byte, e PathElement) []byte {
	if !e.IsName() {
		return strconv.AppendInt(dst, e.ID, 10)
	}
	if needsQuote(e.Name) {
		dst = append(dst, '\'')
	}
	return append(dst, e.Name...)
}

// elementFromText decodes a text form back into an element of kind.
func elementFromText(kind, t string) (PathElement, error) {
	switch {
	case strings.HasPrefix(t, "'"):
		return PathElement{Kind: kind, Name: t[1:]}, nil
	case allDigits(t):
		id, err := strconv.ParseInt(t, 10, 64)
		if err != nil || id <= 0 || strconv.FormatInt(id, 10) != t {
			return PathElement{}, fmt.Errorf("text %q is not a canonical positive id", t)
		}
		return PathElement{Kind: kind, ID: id}, nil
	case t == "":
		return PathElement{}, fmt.Errorf("empty text")
	}
	return PathElement{Kind: kind, Name: t}, nil
}

// columnIndex resolves a column parameter (a name, or empty for the first
// key column) and checks its type.
func columnIndex(strategy string, in KeySchema, name string, types ...Type) (int, error) {
	i := 0
	if name != "" {
		if i = in.Index(name); i < 0 {
			return 0, fmt.Errorf("%s: table %s has no key column %q (key: %s)", strategy, in.Table, name, in)
		}
	}
	if len(in.Columns) == 0 {
		return 0, fmt.Errorf("%s: table %s has no key columns", strategy, in.Table)
	}
	if len(types) > 0 && !slices.Contains(types, in.Columns[i].Type) {
		names := make([]string, len(types))
		for j, t := range types {
			names[j] = t.String()
		}
		return 0, fmt.Errorf("%s: key column %s is %s; this strategy needs %s", strategy, in.Columns[i].Name, in.Columns[i].SQLType(), strings.Join(names, " or "))
	}
	return i, nil
}

// prependColumn returns in with c as a new first key column, refusing a
// name clash.
func prependColumn(strategy string, in KeySchema, c Column) (KeySchema, error) {
	if in.Index(c.Name) >= 0 {
		return KeySchema{}, fmt.Errorf("%s: table %s already has a key column %q; choose another with the name parameter", strategy, in.Table, c.Name)
	}
	out := KeySchema{Table: in.Table, Columns: make([]Column, 0, len(in.Columns)+1)}
	out.Columns = append(out.Columns, c)
	out.Columns = append(out.Columns, in.Columns...)
	return out, nil
}
