package record

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/rekeyio/rekey/rewrite"
)

// JSON Lines format of a record, one object per line:
//
//	{"__key__": {"path": ["Customer", "Customer1"]}, "Name": "Ann", ...}   an entity
//	{"__table__": "UserAccessLogs", "UserId": "u1", ...}                 a row
//
// "__key__" holds a Datastore key in rewrite's notation; "__table__" is
// optional (the config names the table). Plain JSON values map to the
// obvious kinds: integers (no '.' or exponent) to int, other numbers to
// float, strings, booleans, null, arrays, objects to embedded entities.
// Kinds JSON cannot express are wrapped in a one-member object:
//
//	{"$timestamp": "2024-01-31T12:00:00Z"}  {"$date": "2024-01-31"}
//	{"$bytes": "<base64>"}                 {"$numeric": "1.50"}
//	{"$json": "<JSON text>"}               {"$key": {"path": [...]}}
//	{"$geo": [lat, lng]}                   {"$float": "NaN"}
//	{"$noindex": <value>}                  (a Datastore property left out of indexes)
//
// Encoding writes floats so that they read back as floats (1.0, not 1) and
// every kind with its wrapper, so a record written and read back is equal
// to the original.

const (
	keyField   = "__key__"
	tableField = "__table__"
)

// ParseJSON parses one JSON Lines record.
func ParseJSON(line []byte) (Record, error) { return ParseJSONCap(line, 8) }

// ParseJSONCap is ParseJSON with room for fieldsCap fields in the record's
// Fields before they grow: a reader that knows the shape of its records
// sizes each once, with room for the fields a rewrite will add to it.
func ParseJSONCap(line []byte, fieldsCap int) (Record, error) {
	p := parser{b: line}
	p.space()
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return Record{}, p.errf("a record must be a JSON object")
	}
	var r Record
	err := p.object(func(name string) error {
		switch name {
		case keyField:
			if k, ok := p.datastoreKey(); ok {
				r.Key = &k
				if r.Table == "" {
					r.Table = k.Leaf().Kind
				}
				return nil
			}
			start := p.i
			if err := p.skip(); err != nil {
				return err
			}
			pk, err := rewrite.ParseKey(string(p.b[start:p.i]), nil)
			if err != nil {
				return fmt.Errorf("__key__: %w", err)
			}
			if !pk.IsDatastore {
				return fmt.Errorf(`__key__ must be a Datastore key {"path": [...]}`)
			}
			k := pk.Datastore
			r.Key = &k
			if r.Table == "" {
				r.Table = k.Leaf().Kind
			}
			return nil
		case tableField:
			v, err := p.value()
			if err != nil {
				return err
			}
			if v.Kind != KindString {
				return fmt.Errorf("__table__ must be a string")
			}
			r.Table = v.Str
			return nil
		}
		v, noIndex, err := p.property()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if r.Fields == nil {
			r.Fields = make([]Field, 0, max(fieldsCap, 1))
		}
		r.Fields = append(r.Fields, Field{Name: name, Value: v, NoIndex: noIndex})
		return nil
	})
	if err != nil {
		return Record{}, err
	}
	p.space()
	if p.i != len(p.b) {
		return Record{}, p.errf("unexpected text after the record")
	}
	return r, nil
}

type parser struct {
	b []byte
	i int
}

// datastoreKey parses the usual form of a key, {"path": [kind, id or
// name, ...]} with optional "namespace" and "database" strings, without
// going through encoding/json. On anything else (or an error) it leaves
// p where it was and returns false: rewrite.ParseKey then parses the key
// and reports what is wrong.
func (p *parser) datastoreKey() (k rewrite.DatastoreKey, ok bool) {
	start := p.i
	defer func() {
		if !ok {
			p.i = start
		}
	}()
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return k, false
	}
	err := p.object(func(name string) error {
		switch name {
		case "namespace", "database":
			if p.i >= len(p.b) || p.b[p.i] != '"' {
				return errSlowKey
			}
			s, err := p.str()
			if err != nil {
				return err
			}
			if name == "namespace" {
				k.Namespace = s
			} else {
				k.Database = s
			}
			return nil
		case "path":
			if k.Path != nil || p.i >= len(p.b) || p.b[p.i] != '[' {
				return errSlowKey
			}
			p.i++
			for {
				p.space()
				if p.i >= len(p.b) || p.b[p.i] != '"' {
					return errSlowKey
				}
				kind, err := p.str()
				if err != nil {
					return err
				}
				p.space()
				if p.i >= len(p.b) || p.b[p.i] != ',' {
					return errSlowKey
				}
				p.i++
				p.space()
				e := rewrite.PathElement{Kind: kind}
				switch {
				case p.i < len(p.b) && p.b[p.i] == '"':
					if e.Name, err = p.str(); err != nil {
						return err
					}
				default:
					n := p.i
					for n < len(p.b) && (p.b[n] == '-' || ('0' <= p.b[n] && p.b[n] <= '9')) {
						n++
					}
					digits := p.b[p.i:n]
					if len(digits) > 0 && digits[0] == '-' {
						digits = digits[1:]
					}
					id, err := strconv.ParseInt(string(p.b[p.i:n]), 10, 64)
					if err != nil || (len(digits) > 1 && digits[0] == '0') || (n < len(p.b) && (p.b[n] == '.' || p.b[n] == 'e' || p.b[n] == 'E')) {
						return errSlowKey // not JSON, or not an INT64: ParseKey says why
					}
					e.ID, p.i = id, n
				}
				k.Path = append(k.Path, e)
				p.space()
				if p.i < len(p.b) && p.b[p.i] == ',' {
					p.i++
					continue
				}
				if p.i < len(p.b) && p.b[p.i] == ']' {
					p.i++
					return nil
				}
				return errSlowKey
			}
		}
		return errSlowKey
	})
	return k, err == nil && len(k.Path) > 0
}

// errSlowKey sends a key to rewrite.ParseKey.
var errSlowKey = errors.New("not the usual key form")

func (p *parser) errf(format string, args ...any) error {
	return fmt.Errorf("column %d: %s", p.i+1, fmt.Sprintf(format, args...))
}

func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// object parses {"name": value, ...}, calling member for each name with the
// parser positioned at the value.
func (p *parser) object(member func(name string) error) error {
	p.i++ // '{'
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return nil
	}
	for {
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return p.errf("want a member name")
		}
		name, err := p.str()
		if err != nil {
			return err
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return p.errf("want ':' after %q", name)
		}
		p.i++
		p.space()
		if err := member(name); err != nil {
			return err
		}
		p.space()
		if p.i >= len(p.b) {
			return p.errf("unterminated object")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return nil
		default:
			return p.errf("want ',' or '}'")
		}
	}
}

// property parses a value that may be wrapped in {"$noindex": ...}.
func (p *parser) property() (Value, bool, error) {
	v, err := p.value()
	if err != nil {
		return v, false, err
	}
	if v.Kind == KindEntity && len(v.Entity) == 1 && v.Entity[0].Name == "$noindex" {
		return v.Entity[0].Value, true, nil
	}
	return v, false, nil
}

func (p *parser) value() (Value, error) {
	p.space()
	if p.i >= len(p.b) {
		return Value{}, p.errf("want a value")
	}
	switch c := p.b[p.i]; {
	case c == '"':
		s, err := p.str()
		return String(s), err
	case c == '{':
		var fields []Field
		err := p.object(func(name string) error {
			v, noIndex, err := p.property()
			if err != nil {
				return err
			}
			fields = append(fields, Field{Name: name, Value: v, NoIndex: noIndex})
			return nil
		})
		if err != nil {
			return Value{}, err
		}
		if len(fields) == 1 && len(fields[0].Name) > 1 && fields[0].Name[0] == '$' && fields[0].Name != "$noindex" {
			return unwrap(fields[0].Name, fields[0].Value)
		}
		return Value{Kind: KindEntity, Entity: fields}, nil
	case c == '[':
		p.i++
		arr := []Value{}
		p.space()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return Value{Kind: KindArray, Array: arr}, nil
		}
		for {
			v, err := p.value()
			if err != nil {
				return Value{}, err
			}
			arr = append(arr, v)
			p.space()
			if p.i >= len(p.b) {
				return Value{}, p.errf("unterminated array")
			}
			if p.b[p.i] == ']' {
				p.i++
				return Value{Kind: KindArray, Array: arr}, nil
			}
			if p.b[p.i] != ',' {
				return Value{}, p.errf("want ',' or ']'")
			}
			p.i++
		}
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []struct {
			s string
			v Value
		}{{"true", Bool(true)}, {"false", Bool(false)}, {"null", Value{}}} {
			if len(p.b)-p.i >= len(lit.s) && string(p.b[p.i:p.i+len(lit.s)]) == lit.s {
				p.i += len(lit.s)
				return lit.v, nil
			}
		}
		return Value{}, p.errf("bad literal")
	case c == '-' || c >= '0' && c <= '9':
		start := p.i
		isFloat := false
		for p.i < len(p.b) {
			c := p.b[p.i]
			if c == '.' || c == 'e' || c == 'E' {
				isFloat = true
			} else if !(c == '-' || c == '+' || c >= '0' && c <= '9') {
				break
			}
			p.i++
		}
		text := string(p.b[start:p.i])
		if !isFloat {
			if n, err := strconv.ParseInt(text, 10, 64); err == nil {
				return Int(n), nil
			}
		}
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return Value{}, p.errf("bad number %q", text)
		}
		return Float(f), nil
	}
	return Value{}, p.errf("unexpected %q", p.b[p.i])
}

// skip moves past one value without building it.
func (p *parser) skip() error {
	_, err := p.value()
	return err
}

func (p *parser) str() (string, error) {
	p.i++ // opening quote
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '"' {
			if !utf8.Valid(p.b[start:p.i]) {
				return "", p.errf("string is not valid UTF-8")
			}
			s := string(p.b[start:p.i])
			p.i++
			return s, nil
		}
		if c == '\\' {
			return p.strSlow(start)
		}
		if c < 0x20 {
			return "", p.errf("control character in string")
		}
		p.i++
	}
	return "", p.errf("unterminated string")
}

func (p *parser) strSlow(start int) (string, error) {
	out := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.Valid(out) {
				return "", p.errf("string is not valid UTF-8")
			}
			return string(out), nil
		case c < 0x20:
			return "", p.errf("control character in string")
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			break
		}
		esc := p.b[p.i+1]
		p.i += 2
		switch esc {
		case '"', '\\', '/':
			out = append(out, esc)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.errf("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
					p.i += 2
					if lo, ok := p.hex4(); ok {
						r2 = lo
					}
				}
				r = utf16.DecodeRune(r, r2)
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", p.errf("bad escape \\%c", esc)
		}
	}
	return "", p.errf("unterminated string")
}

func (p *parser) hex4() (rune, bool) {
	if p.i+4 > len(p.b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(p.b[p.i:p.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	p.i += 4
	return rune(n), true
}

func decodeBase64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

// unwrap turns {"$kind": v} into a typed value.
func unwrap(tag string, v Value) (Value, error) {
	bad := func() (Value, error) { return Value{}, fmt.Errorf("%s: bad value %s", tag, v.String()) }
	switch tag {
	case "$timestamp":
		if v.Kind == KindString {
			if ts, err := time.Parse(time.RFC3339Nano, v.Str); err == nil {
				return Time(ts), nil
			}
		}
	case "$date":
		if v.Kind == KindString {
			if d, err := rewrite.ParseDate(v.Str); err == nil {
				return Value{Kind: KindDate, Int: d.Int}, nil
			}
		}
	case "$bytes":
		if v.Kind == KindString {
			if b, err := decodeBase64(v.Str); err == nil {
				return Bytes(b), nil
			}
		}
	case "$numeric":
		if v.Kind == KindString {
			if n, err := rewrite.Numeric(v.Str); err == nil {
				return Value{Kind: KindNumeric, Str: n.Str}, nil
			}
		}
	case "$json":
		if v.Kind == KindString {
			return Value{Kind: KindJSON, Str: v.Str}, nil
		}
	case "$float":
		return Coerce(v, rewrite.TypeFloat64)
	case "$key":
		if v.Kind == KindEntity {
			text := AppendJSONValue(nil, v)
			pk, err := rewrite.ParseKey(string(text), nil)
			if err == nil && pk.IsDatastore {
				return Key(pk.Datastore), nil
			}
		}
	case "$geo":
		if v.Kind == KindArray && len(v.Array) == 2 {
			lat, e1 := Coerce(v.Array[0], rewrite.TypeFloat64)
			lng, e2 := Coerce(v.Array[1], rewrite.TypeFloat64)
			if e1 == nil && e2 == nil {
				return Value{Kind: KindGeoPoint, Lat: lat.Float, Lng: lng.Float}, nil
			}
		}
	default:
		return Value{Kind: KindEntity, Entity: []Field{{Name: tag, Value: v}}}, nil
	}
	return bad()
}

// AppendJSON appends r as one JSON object (no newline) to dst.
func AppendJSON(dst []byte, r *Record, withTable bool) []byte {
	dst = append(dst, '{')
	n := 0
	sep := func() {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
	}
	if r.Key != nil {
		sep()
		dst = append(dst, `"__key__":`...)
		dst = append(dst, rewrite.FormatDatastoreKey(*r.Key)...)
	} else if withTable && r.Table != "" {
		sep()
		dst = append(dst, `"__table__":`...)
		dst = appendJSONString(dst, r.Table)
	}
	for _, f := range r.Fields {
		sep()
		dst = appendJSONString(dst, f.Name)
		dst = append(dst, ':')
		if f.NoIndex {
			dst = append(dst, `{"$noindex":`...)
			dst = AppendJSONValue(dst, f.Value)
			dst = append(dst, '}')
		} else {
			dst = AppendJSONValue(dst, f.Value)
		}
	}
	return append(dst, '}')
}

// AppendJSONValue appends one value in the record JSON format.
func AppendJSONValue(dst []byte, v Value) []byte {
	wrap := func(tag string, s string) []byte {
		dst = append(dst, `{"`...)
		dst = append(dst, tag...)
		dst = append(dst, `":`...)
		dst = appendJSONString(dst, s)
		return append(dst, '}')
	}
	switch v.Kind {
	case KindNull:
		return append(dst, "null"...)
	case KindInt:
		return strconv.AppendInt(dst, v.Int, 10)
	case KindFloat:
		if math.IsNaN(v.Float) || math.IsInf(v.Float, 0) {
			s := "NaN"
			if math.IsInf(v.Float, 1) {
				s = "Infinity"
			} else if math.IsInf(v.Float, -1) {
				s = "-Infinity"
			}
			return wrap("$float", s)
		}
		start := len(dst)
		dst = strconv.AppendFloat(dst, v.Float, 'g', -1, 64)
		for _, c := range dst[start:] {
			if c == '.' || c == 'e' {
				return dst
			}
		}
		return append(dst, ".0"...)
	case KindString:
		return appendJSONString(dst, v.Str)
	case KindBool:
		if v.Int != 0 {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case KindBytes:
		return wrap("$bytes", base64.StdEncoding.EncodeToString(v.Bytes))
	case KindTimestamp:
		return wrap("$timestamp", v.Time.UTC().Format(time.RFC3339Nano))
	case KindDate:
		return wrap("$date", rewrite.DateString(v.Int))
	case KindNumeric:
		return wrap("$numeric", v.Str)
	case KindJSON:
		return wrap("$json", v.Str)
	case KindKey:
		dst = append(dst, `{"$key":`...)
		if v.Key != nil {
			dst = append(dst, rewrite.FormatDatastoreKey(*v.Key)...)
		} else {
			dst = append(dst, "null"...)
		}
		return append(dst, '}')
	case KindGeoPoint:
		dst = append(dst, `{"$geo":[`...)
		dst = AppendJSONValue(dst, Float(v.Lat))
		dst = append(dst, ',')
		dst = AppendJSONValue(dst, Float(v.Lng))
		return append(dst, "]}"...)
	case KindArray:
		dst = append(dst, '[')
		for i, e := range v.Array {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendJSONValue(dst, e)
		}
		return append(dst, ']')
	case KindEntity:
		r := Record{Fields: v.Entity}
		return AppendJSON(dst, &r, false)
	}
	return append(dst, "null"...)
}

const hexChars = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 bytes are
// written as \ufffd, as encoding/json does.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexChars[c>>4], hexChars[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
