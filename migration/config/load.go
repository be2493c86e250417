package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"

	"github.com/rekeyio/rekey/internal/suggest"
)

// EnvPrefix prefixes the environment variables NewViper reads:
// REKEY_TARGET_TABLE overrides target.table.
const EnvPrefix = "REKEY"

// FieldError is one problem with one key of a config.
type FieldError struct {
	// Path is the key's path in the file, e.g. "target.table" or
	// "rewrite.steps[1].params.n"; empty for the config as a whole.
	Path string
	Msg  string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// NewViper returns a fresh viper instance (never the global one) that reads
// the YAML file file, if file is not empty, and lets environment variables
// override any key: REKEY_ followed by the key path in upper case with "."
// replaced by "_", e.g. REKEY_TARGET_TABLE or REKEY_WRITE_BATCH_ROWS. Lists
// may be given as comma-separated values (REKEY_SOURCE_COLUMNS=a,b).
func NewViper(file string) (*viper.Viper, error) {
	v := viper.New()
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	if file != "" {
		v.SetConfigFile(file)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("read config %s: %w", file, yamlLineFixed(err))
		}
	}
	registerKeys(v)
	return v, nil
}

// yamlParserProblems are the YAML library's parser errors (not its
// scanner's): for them it reports the 0-based line of the problem, or of
// the collection it was in, where its scanner errors give 1-based lines.
var yamlParserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected key",
	"did not find expected node content",
}

var yamlLineRE = regexp.MustCompile(`yaml: line (\d+): (.*)$`)

// yamlLineFixed returns err with the line of a YAML parser error made
// 1-based, like the editor's and every other line rekey reports.
func yamlLineFixed(err error) error {
	m := yamlLineRE.FindStringSubmatchIndex(err.Error())
	if m == nil {
		return err
	}
	msg := err.Error()
	if !slices.Contains(yamlParserProblems, msg[m[4]:m[5]]) {
		return err
	}
	n, convErr := strconv.Atoi(msg[m[2]:m[3]])
	if convErr != nil {
		return err
	}
	return errors.New(msg[:m[2]] + strconv.Itoa(n+1) + msg[m[3]:])
}

// LoadFile reads a config file with its REKEY_* environment overrides
// (NewViper), decodes it (Load) and validates it (Validate): the config
// as a run uses it. Every problem is reported at once: unknown keys, keys
// given twice, values of the wrong type, REKEY_* variables that name no
// key, and what Validate finds in the rest.
func LoadFile(file string) (*Config, error) {
	v, err := NewViper(file)
	if err != nil {
		return nil, err
	}
	l, err := decodeViper(v)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(l.allProblems()...); err != nil {
		return nil, err
	}
	return l.cfg, nil
}

// Load decodes the settings of v (file, environment, flags, as the caller
// set it up) into a Config and fills in defaults (SetDefaults). Unknown
// keys, keys of the file that differ only in case, values of the wrong
// type and REKEY_* environment variables that name no key (NonConfigEnv
// aside) are reported together, each as a *FieldError with its path,
// joined with errors.Join. Load does not call Validate.
//
// So that environment variables reach keys the file does not mention, Load
// registers every key of Config with v (an unset default, which changes no
// value). Parameters under rewrite.params are free-form (rewrite.New checks
// them), and can be overridden from the environment only when the file
// names them.
func Load(v *viper.Viper) (*Config, error) {
	l, err := decodeViper(v)
	if err != nil {
		return nil, err
	}
	if len(l.problems) > 0 {
		return nil, errors.Join(l.problems...)
	}
	return l.cfg, nil
}

// loaded is a config decoded as far as it could be, with what decoding
// found on the way.
type loaded struct {
	// cfg has its defaults filled in and its paths resolved.
	cfg *Config
	// given are cfg's values as decoded, before defaults (settingsOf).
	given map[string]reflect.Value
	// file is what the config file says, nil without one.
	file *fileKeys
	// problems are Load's.
	problems []error
	// failed are the paths whose values could not be decoded.
	failed []string
}

func decodeViper(v *viper.Viper) (*loaded, error) {
	registerKeys(v)
	l := &loaded{cfg: &Config{}}
	if file := v.ConfigFileUsed(); file != "" {
		fk, err := readFileKeys(file)
		if err != nil {
			return nil, err
		}
		l.file = fk
	}
	err := v.Unmarshal(l.cfg,
		viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
			stringToListHook,
			durationHook,
			mapstructure.TextUnmarshallerHookFunc(),
		)),
		func(dc *mapstructure.DecoderConfig) { dc.ErrorUnused = true },
	)
	if err != nil {
		l.problems, l.failed = decodeProblems(err)
	}
	if l.file != nil {
		l.problems = append(l.problems, l.file.dups...)
	}
	slices.SortStableFunc(l.problems, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	l.problems = append(l.problems, envProblems(v, os.Environ())...)
	l.given = givenValues(l.cfg)
	l.cfg.SetDefaults()
	if file := v.ConfigFileUsed(); file != "" {
		l.cfg.resolvePaths(filepath.Dir(file))
	}
	return l, nil
}

// allProblems are Load's problems and then Validate's, leaving out what
// Validate says of a value that could not be decoded (Load said it).
func (l *loaded) allProblems() []error {
	out := slices.Clone(l.problems)
	for _, e := range leaves(l.cfg.Validate()) {
		var fe *FieldError
		if e == nil || errors.As(e, &fe) && l.undecoded(fe.Path) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// undecoded reports whether path is, or is inside, a value that could not
// be decoded.
func (l *loaded) undecoded(path string) bool {
	return slices.ContainsFunc(l.failed, func(f string) bool {
		return path == f || strings.HasPrefix(path, f+".") || strings.HasPrefix(path, f+"[")
	})
}

// resolvePaths makes the config's relative local paths relative to dir,
// the config file's folder, so a config means the same files whatever
// the working directory (gs:// paths and absolute ones stay).
func (c *Config) resolvePaths(dir string) {
	paths := []*string{&c.Source.Path, &c.Target.Path, &c.Source.Schema, &c.DeadLetter}
	for i := range c.ReferencesTo {
		paths = append(paths, &c.ReferencesTo[i].Config)
	}
	for _, p := range paths {
		if *p != "" && !strings.Contains(*p, "://") && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

// registerKeys makes every key of Config known to v, so that AutomaticEnv
// applies to it in Unmarshal. A key v already knows is left alone.
func registerKeys(v *viper.Viper) {
	known := map[string]bool{}
	for _, k := range v.AllKeys() {
		known[k] = true
	}
	for _, k := range leafKeys(reflect.TypeFor[Config](), "") {
		if !known[k] {
			v.SetDefault(k, nil)
		}
	}
}

// leafKeys lists the key paths of t's fields that hold a single value or a
// list of values: not maps (free-form) and not lists of sections.
func leafKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("mapstructure")
		if name == "" || name == "-" {
			continue
		}
		path := prefix + name
		switch {
		case f.Type.Kind() == reflect.Struct:
			out = append(out, leafKeys(f.Type, path+".")...)
		case f.Type.Kind() == reflect.Map:
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
		default:
			out = append(out, path)
		}
	}
	return out
}

// durationHook decodes a duration from Go's notation ("1s", "500ms",
// "15m"), naming the value it cannot read. A bare number other than 0 is
// refused: it would be nanoseconds, which is never what a config means.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeFor[time.Duration]() {
		return data, nil
	}
	const hint = "(e.g. 1s, 500ms)"
	v := reflect.ValueOf(data)
	switch from.Kind() {
	case reflect.String:
		s := strings.TrimSpace(v.String())
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a duration %s", v.String(), hint)
		}
		return d, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		if v.IsZero() {
			return time.Duration(0), nil
		}
		return nil, fmt.Errorf("%v is not a duration: give it a unit (e.g. %vs, %vms)", data, data, data)
	}
	return data, nil
}

// stringToListHook turns "a, b,,c" into [a b c], for lists given in the
// environment or on the command line.
func stringToListHook(from, to reflect.Type, data any) (any, error) {
	if from.Kind() != reflect.String || to != reflect.TypeFor[[]string]() {
		return data, nil
	}
	var out []string
	for _, s := range strings.Split(reflect.ValueOf(data).String(), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// decodeProblems turns mapstructure's errors into FieldErrors; failed
// are the paths of the values that could not be decoded (not the unknown
// keys).
func decodeProblems(err error) (out []error, failed []string) {
	var walk func(error)
	walk = func(e error) {
		var de *mapstructure.DecodeError
		switch x := e.(type) {
		case *mapstructure.DecodeError:
			de = x
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				walk(e)
			}
			return
		case interface{ Unwrap() error }:
			if errors.As(e, &de) {
				walk(x.Unwrap())
				return
			}
			out = append(out, &FieldError{Msg: e.Error()})
			return
		default:
			out = append(out, &FieldError{Msg: e.Error()})
			return
		}
		inner := de.Unwrap()
		if _, ok := inner.(interface{ Unwrap() []error }); ok {
			walk(inner)
			return
		}
		if keys, ok := strings.CutPrefix(inner.Error(), "has invalid keys: "); ok {
			for _, k := range strings.Split(keys, ", ") {
				out = append(out, unknownKey(de.Name(), k))
			}
			return
		}
		out = append(out, &FieldError{Path: de.Name(), Msg: describeDecodeError(inner)})
		failed = append(failed, de.Name())
	}
	walk(err)
	return out, failed
}

func describeDecodeError(err error) string {
	var pe *mapstructure.ParseError
	if errors.As(err, &pe) {
		return fmt.Sprintf("must be %s, got %s", typeName(pe.Expected.Type()), describeValue(pe.Value))
	}
	var ue *mapstructure.UnconvertibleTypeError
	if errors.As(err, &ue) {
		return fmt.Sprintf("must be %s, got %s", typeName(ue.Expected.Type()), describeValue(ue.Value))
	}
	return err.Error()
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "a section of keys"
	}
	return t.String()
}

func describeValue(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case map[string]any:
		return "a section of keys"
	case []any:
		return "a list"
	}
	return fmt.Sprint(v)
}

// unknownKey reports key under the section at parent, listing the keys the
// section knows.
func unknownKey(parent, key string) error {
	path := key
	if parent != "" {
		path = parent + "." + key
	}
	msg := "unknown key"
	if known := sectionKeys(parent); len(known) > 0 {
		if s := suggest.Closest(key, known); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		msg += " (known: " + strings.Join(known, ", ") + ")"
	}
	return &FieldError{Path: path, Msg: msg}
}

// sectionKeys lists the keys of the section at path, e.g. "source" or
// "rewrite.steps[0]", in the order Config declares them.
func sectionKeys(path string) []string {
	t := reflect.TypeFor[Config]()
	if path != "" {
		for _, seg := range strings.Split(path, ".") {
			if i := strings.IndexByte(seg, '['); i >= 0 {
				seg = seg[:i]
			}
			f, ok := fieldByTag(t, seg)
			if !ok {
				return nil
			}
			t = f.Type
			for t.Kind() == reflect.Slice {
				t = t.Elem()
			}
			if t.Kind() != reflect.Struct {
				return nil
			}
		}
	}
	var out []string
	for i := range t.NumField() {
		if name := t.Field(i).Tag.Get("mapstructure"); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

func fieldByTag(t reflect.Type, tag string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); f.Tag.Get("mapstructure") == tag {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
