package rewrite

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Params are a strategy's parameters as they come from a config file, the
// environment or --param flags: strings, numbers, booleans or lists.
type Params map[string]any

// ParamError is one bad parameter. Path is relative to the rewrite section
// of a config, e.g. "params.n" or "steps[1].params.n".
type ParamError struct {
	Path string
	Msg  string
}

func (e *ParamError) Error() string { return e.Path + ": " + e.Msg }

// paramReader reads Params, collecting every problem instead of stopping at
// the first, and remembers the canonical value of each parameter it read.
type paramReader struct {
	prefix string
	raw    Params
	used   map[string]bool
	canon  map[string]string
	errs   []error
	// types are the type of each parameter read, in words, and read the
	// names in the order they were first read: register describes a
	// strategy's parameters from them (Info.Params).
	types map[string]string
	read  []string
}

func newParamReader(prefix string, raw Params) *paramReader {
	lower := Params{}
	for k, v := range raw {
		lower[strings.ToLower(k)] = v
	}
	return &paramReader{prefix: prefix, raw: lower, used: map[string]bool{}, canon: map[string]string{}, types: map[string]string{}}
}

// declare records that the parameter name was read as typ.
func (p *paramReader) declare(name, typ string) {
	if _, ok := p.types[name]; !ok {
		p.read = append(p.read, name)
	}
	p.types[name] = typ
}

func (p *paramReader) fail(name, format string, args ...any) {
	p.errs = append(p.errs, &ParamError{Path: p.prefix + "params." + name, Msg: fmt.Sprintf(format, args...)})
}

func (p *paramReader) get(name string) (any, bool) {
	p.used[name] = true
	v, ok := p.raw[name]
	if ok && v == nil {
		return nil, false
	}
	return v, ok
}

func (p *paramReader) str(name, def string) string {
	p.declare(name, "string")
	v, ok := p.get(name)
	s := def
	if ok {
		switch t := v.(type) {
		case string:
			s = t
		case int, int64, float64, bool:
			s = fmt.Sprint(t)
		default:
			p.fail(name, "must be a string, got %T", v)
		}
	}
	p.canon[name] = s
	return s
}

// integer reads an integer in [lo, hi].
func (p *paramReader) integer(name string, def, lo, hi int64) int64 {
	p.declare(name, fmt.Sprintf("integer %d..%d", lo, hi))
	v, ok := p.get(name)
	n := def
	if ok {
		var err error
		n, err = toInt(v)
		if err != nil {
			p.fail(name, "must be an integer %d..%d, got %v", lo, hi, v)
			return def
		}
	}
	if n < lo || n > hi {
		p.fail(name, "must be %d..%d, got %d", lo, hi, n)
	}
	p.canon[name] = strconv.FormatInt(n, 10)
	return n
}

func toInt(v any) (int64, error) {
	switch t := v.(type) {
	case int:
		return int64(t), nil
	case int64:
		return t, nil
	case int32:
		return int64(t), nil
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
			return int64(t), nil
		}
	case string:
		return strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	}
	return 0, fmt.Errorf("not an integer: %v", v)
}

func (p *paramReader) boolean(name string, def bool) bool {
	p.declare(name, "true or false")
	v, ok := p.get(name)
	b := def
	if ok {
		switch t := v.(type) {
		case bool:
			b = t
		case string:
			var err error
			if b, err = strconv.ParseBool(t); err != nil {
				p.fail(name, "must be true or false, got %q", t)
			}
		default:
			p.fail(name, "must be true or false, got %v", v)
		}
	}
	p.canon[name] = strconv.FormatBool(b)
	return b
}

func (p *paramReader) enum(name, def string, allowed ...string) string {
	s := strings.ToLower(p.str(name, def))
	p.declare(name, enumType(allowed))
	if !slices.Contains(allowed, s) {
		p.fail(name, "must be one of %s, got %q", strings.Join(allowed, ", "), s)
	}
	p.canon[name] = s
	return s
}

// enumType describes the values an enum parameter allows; "" stands for
// leaving it empty.
func enumType(allowed []string) string {
	var vals []string
	empty := false
	for _, a := range allowed {
		if a == "" {
			empty = true
			continue
		}
		vals = append(vals, a)
	}
	s := "one of " + strings.Join(vals, ", ")
	if empty {
		s += " (or empty)"
	}
	return s
}

// list reads a list of strings, given as a YAML list or a comma-separated
// string.
func (p *paramReader) list(name string) []string {
	p.declare(name, "list of strings (or one comma-separated string)")
	v, ok := p.get(name)
	if !ok {
		return nil
	}
	var out []string
	switch t := v.(type) {
	case string:
		for _, s := range strings.Split(t, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	case []string:
		out = t
	case []any:
		for _, e := range t {
			out = append(out, fmt.Sprint(e))
		}
	default:
		p.fail(name, "must be a list, got %v", v)
	}
	p.canon[name] = strings.Join(out, ",")
	return out
}

// done reports unknown parameters and returns every collected error.
func (p *paramReader) done() error {
	var unknown []string
	for k := range p.raw {
		if !p.used[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	known := make([]string, 0, len(p.used))
	for k := range p.used {
		known = append(known, k)
	}
	sort.Strings(known)
	for _, k := range unknown {
		p.fail(k, "unknown parameter (known: %s)", strings.Join(known, ", "))
	}
	return errors.Join(p.errs...)
}
