package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/rekeyio/rekey/internal/suggest"
)

// Origin says where a setting's value came from. The layers override one
// another in this order: a flag over the environment over the file; a
// default fills in what none of them gives (or gives as zero).
type Origin string

// Origins.
const (
	FromFlag    Origin = "flag"
	FromEnv     Origin = "env"
	FromFile    Origin = "file"
	FromDefault Origin = "default"
)

// Setting is one value of an effective config.
type Setting struct {
	// Key is the value's path, e.g. "write.batch_rows" or
	// "rewrite.steps[0].params.n".
	Key string `json:"key"`
	// Value is the value a run uses: a string, number, boolean or list;
	// durations as text ("1s", "15m").
	Value  any    `json:"value"`
	Origin Origin `json:"source"`
	// From names the origin: the file and line ("rekey.yaml:12"), the
	// variable ("REKEY_WRITE_BATCH_ROWS") or the flag ("--set
	// write.batch_rows=7"); empty for a default.
	From string `json:"from,omitempty"`
}

// Effective is a config as a run would use it, value by value.
type Effective struct {
	// Config is the decoded config, defaults filled in; where a value
	// could not be decoded it is the default.
	Config *Config
	// Settings are the values the config sets, in the order Config
	// declares them: every value given by a flag, the environment or the
	// file, and every default that is not empty.
	Settings []Setting
	// Problems is what LoadFile reports for the config (nil if none):
	// every problem at once, errors.Join of *FieldError.
	Problems error
}

// Explain loads v as LoadFile loads a file (decode, defaults, validation)
// and says where each value came from. flags maps keys to the flags that
// set them on v (see ApplySets). The error is for a config that cannot be
// read at all; the config's own problems are in Effective.Problems.
func Explain(v *viper.Viper, flags map[string]string) (*Effective, error) {
	l, err := decodeViper(v)
	if err != nil {
		return nil, err
	}
	e := &Effective{Config: l.cfg, Problems: errors.Join(l.allProblems()...)}
	for _, s := range settingsOf(l.cfg) {
		origin, from := l.origin(s.path, s.value, flags)
		if origin == "" {
			continue
		}
		e.Settings = append(e.Settings, Setting{Key: s.path, Value: plainValue(s.value), Origin: origin, From: from})
	}
	return e, nil
}

// ApplySets sets each "key=value" of sets on v, as a flag overrides the
// file and the environment, and returns the keys with the flag that set
// them (for Explain). key must be a key of Config that holds a value, or a
// rewrite parameter (rewrite.params.NAME); value is read as the
// environment's values are (lists comma-separated).
func ApplySets(v *viper.Viper, flag string, sets []string) (map[string]string, error) {
	known := leafKeys(reflect.TypeFor[Config](), "")
	out := map[string]string{}
	var errs []error
	for _, s := range sets {
		k, val, ok := strings.Cut(s, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		switch {
		case !ok || k == "":
			errs = append(errs, fmt.Errorf("%s %s: want KEY=VALUE, e.g. write.batch_rows=100", flag, s))
			continue
		case !slices.Contains(known, k) && !strings.HasPrefix(k, "rewrite.params."):
			msg := fmt.Sprintf("%s %s: %s is not a config key that holds a value", flag, s, k)
			if c := suggest.Closest(k, known); c != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", c)
			}
			errs = append(errs, errors.New(msg))
			continue
		}
		v.Set(k, val)
		out[k] = fmt.Sprintf("%s %s=%s", flag, k, val)
	}
	return out, errors.Join(errs...)
}

// origin says where the value at path came from: a default when the
// value as decoded was empty, else the highest layer that gives it. ""
// means nothing set it (and it is empty).
func (l *loaded) origin(path string, value reflect.Value, flags map[string]string) (Origin, string) {
	switch {
	case isZero(l.given[path]) && !value.IsZero():
		return FromDefault, ""
	case flags[path] != "":
		return FromFlag, flags[path]
	}
	if !strings.Contains(path, "[") {
		if name, ok := envValue(path); ok {
			return FromEnv, name
		}
	}
	if line := l.file.line(path); line > 0 {
		return FromFile, fmt.Sprintf("%s:%d", l.file.file, line)
	}
	if !value.IsZero() {
		return FromDefault, ""
	}
	return "", ""
}

func isZero(v reflect.Value) bool { return !v.IsValid() || v.IsZero() }

// setting is one value of a Config, found by settingsOf.
type setting struct {
	path  string
	value reflect.Value
}

// settingsOf lists the values of c that hold a value (not sections), with
// their paths, in the order Config declares them: lists of sections by
// index, rewrite parameters by name.
func settingsOf(c *Config) []setting {
	var out []setting
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		switch {
		case v.Kind() == reflect.Struct && v.Type() != reflect.TypeFor[time.Duration]():
			for i := range v.NumField() {
				name := v.Type().Field(i).Tag.Get("mapstructure")
				if name != "" && name != "-" {
					walk(joinPath(path, name), v.Field(i))
				}
			}
		case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
			for i := range v.Len() {
				walk(fmt.Sprintf("%s[%d]", path, i), v.Index(i))
			}
		case v.Kind() == reflect.Map:
			keys := v.MapKeys()
			slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
			for _, k := range keys {
				out = append(out, setting{path + "." + k.String(), v.MapIndex(k).Elem()})
			}
		default:
			out = append(out, setting{path, v})
		}
	}
	walk("", reflect.ValueOf(c).Elem())
	return out
}

// givenValues records the values of c as decoded, before defaults.
func givenValues(c *Config) map[string]reflect.Value {
	out := map[string]reflect.Value{}
	for _, s := range settingsOf(c) {
		if !s.value.IsValid() {
			continue
		}
		// Copy: SetDefaults changes c afterwards.
		cp := reflect.New(s.value.Type()).Elem()
		cp.Set(s.value)
		out[s.path] = cp
	}
	return out
}

// plainValue is v as Setting.Value holds it.
func plainValue(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	if d, ok := v.Interface().(time.Duration); ok {
		return FormatDuration(d)
	}
	return v.Interface()
}

// FormatDuration writes d as a config would: "1s", "500ms", "15m", "2h30m".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// WriteYAML writes the settings as a YAML config, each value followed by a
// comment saying where it came from. The output is itself a config that
// gives the same values (relative local paths appear resolved against the
// config file's folder).
func WriteYAML(w io.Writer, settings []Setting, head string) error {
	root := &yaml.Node{Kind: yaml.MappingNode}
	for _, s := range settings {
		n, err := insert(root, s.Key)
		if err != nil {
			return err
		}
		*n = *valueNode(s.Value)
		n.LineComment = string(s.Origin)
		if s.From != "" {
			n.LineComment += " " + s.From
		}
	}
	doc := &yaml.Node{Kind: yaml.DocumentNode, HeadComment: head, Content: []*yaml.Node{root}}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return err
	}
	return enc.Close()
}

// WriteJSON writes the settings as a JSON array of {key, value, source,
// from} objects.
func WriteJSON(w io.Writer, settings []Setting) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if settings == nil {
		settings = []Setting{}
	}
	return enc.Encode(settings)
}

// insert returns the node at path under root (a mapping), making the
// sections and list elements on the way.
func insert(root *yaml.Node, path string) (*yaml.Node, error) {
	n := root
	for _, seg := range strings.Split(path, ".") {
		name, indexes, _ := strings.Cut(seg, "[")
		n = mappingChild(n, name)
		for indexes != "" {
			var idx string
			idx, indexes, _ = strings.Cut(indexes, "]")
			indexes = strings.TrimPrefix(indexes, "[")
			i, err := strconv.Atoi(idx)
			if err != nil {
				return nil, fmt.Errorf("bad key path %q", path)
			}
			if n.Kind == 0 {
				n.Kind = yaml.SequenceNode
			}
			for len(n.Content) <= i {
				n.Content = append(n.Content, &yaml.Node{})
			}
			n = n.Content[i]
		}
	}
	return n, nil
}

// mappingChild returns the value node of key in n, adding it (n becomes a
// mapping if it is still empty).
func mappingChild(n *yaml.Node, key string) *yaml.Node {
	if n.Kind == 0 {
		n.Kind = yaml.MappingNode
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	v := &yaml.Node{}
	n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
	return v
}

// valueNode is the YAML node of a setting's value.
func valueNode(v any) *yaml.Node {
	scalar := func(tag, s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: s} }
	switch x := v.(type) {
	case nil:
		return scalar("!!null", "null")
	case string:
		return scalar("!!str", x)
	case bool:
		return scalar("!!bool", strconv.FormatBool(x))
	case int, int64, int32:
		return scalar("!!int", fmt.Sprint(x))
	case float64:
		// Plain: 1000 reads back as the number it is.
		return scalar("", strconv.FormatFloat(x, 'g', -1, 64))
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Slice {
		list := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle, Content: []*yaml.Node{}}
		for i := range rv.Len() {
			list.Content = append(list.Content, valueNode(rv.Index(i).Interface()))
		}
		return list
	}
	n := &yaml.Node{}
	if err := n.Encode(v); err != nil {
		return scalar("!!str", fmt.Sprint(v))
	}
	return n
}
