package main

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/rewrite"
)

// section is one table of the config reference: the keys of one section
// of a config file.
type section struct {
	path string // "" for the top level; lists of sections end in "[]"
	doc  string
	keys []key
}

type key struct {
	path, typ, def, env, doc string
}

// variant is a config in which some defaults differ from an empty
// config's, with the words that say when.
type variant struct {
	when string
	set  func(*config.Config)
}

var variants = []variant{
	{"", func(*config.Config) {}},
	{"with a datastore target", func(c *config.Config) { c.Target.Type = config.TypeDatastore }},
	{"for a csv source or target", func(c *config.Config) { c.Source.Type, c.Target.Type = config.TypeCSV, config.TypeCSV }},
	{"with ramp.profile datastore", func(c *config.Config) { c.Ramp.Profile = config.RampDatastore }},
	{"with ramp.profile gcs", func(c *config.Config) { c.Ramp.Profile = config.RampGCS }},
}

// defaulted is a variant's config before and after SetDefaults.
type defaulted struct{ before, after reflect.Value }

// defaults are the variants' configs, with and without their defaults.
func defaults() []defaulted {
	var out []defaulted
	for _, v := range variants {
		c := &config.Config{}
		v.set(c)
		before := *c
		c.SetDefaults()
		out = append(out, defaulted{reflect.ValueOf(before), reflect.ValueOf(*c)})
	}
	return out
}

// walker builds the sections of the reference.
type walker struct {
	docs     map[string]typeDocs
	defaults []defaulted
	sections []*section
	// sectionOf is the path of the first section of each type.
	sectionOf map[reflect.Type]string
	missing   []string // keys without a doc comment
}

func (w *walker) walk(t reflect.Type, path string, index []int, inList bool, stack []reflect.Type) {
	s := &section{path: path, doc: markdown(w.docs[t.Name()].doc)}
	w.sections = append(w.sections, s)
	if _, ok := w.sectionOf[t]; !ok {
		w.sectionOf[t] = path
	}
	type sub struct {
		t      reflect.Type
		path   string
		index  []int
		inList bool
	}
	var subs []sub
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("mapstructure")
		if name == "" || name == "-" {
			continue
		}
		p := joinPath(path, name)
		doc := oneLine(w.docs[t.Name()].fields[f.Name])
		if doc == "" {
			w.missing = append(w.missing, fmt.Sprintf("%s (%s.%s)", p, t.Name(), f.Name))
		}
		k := key{path: p, doc: doc}
		idx := append(slices.Clone(index), i)
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Duration]():
			k.typ = "section"
			subs = append(subs, sub{ft, p, idx, inList})
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			k.typ = "list of sections"
			if slices.Contains(stack, ft.Elem()) || ft.Elem() == t {
				k.typ = "list of sections like `" + w.sectionOf[ft.Elem()] + "`"
			} else {
				subs = append(subs, sub{ft.Elem(), p + "[]", nil, true})
			}
		case ft.Kind() == reflect.Map:
			k.typ = "map: name to value"
			if !inList {
				k.env = EnvCell(p + ".NAME")
				k.env += " (only for names the file gives)"
			}
		default:
			k.typ = typeName(p, ft)
			if !inList {
				k.def = w.defaultOf(idx)
				k.env = EnvCell(p)
			}
		}
		s.keys = append(s.keys, k)
	}
	for _, sb := range subs {
		w.walk(sb.t, sb.path, sb.index, sb.inList, append(slices.Clone(stack), t))
	}
}

// EnvCell is the environment variable of a key, as a table cell.
func EnvCell(path string) string { return "`" + config.EnvName(path) + "`" }

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func typeName(path string, t reflect.Type) string {
	if vals, ok := config.Enums[path]; ok {
		return "one of " + strings.Join(vals, ", ")
	}
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "duration (e.g. 500ms, 15s, 15m)"
	case t.Kind() == reflect.String:
		return "string"
	case t.Kind() == reflect.Int:
		return "integer"
	case t.Kind() == reflect.Float64:
		return "number"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return "list of strings (or one comma-separated string)"
	}
	return t.String()
}

// defaultOf describes the default of the field at index: the empty
// config's, and where another variant's differs, that one with when.
func (w *walker) defaultOf(index []int) string {
	var parts []string
	base := w.defaults[0].after.FieldByIndex(index)
	if stated(base) {
		parts = append(parts, formatValue(base))
	}
	for i, d := range w.defaults[1:] {
		v := d.after.FieldByIndex(index)
		if reflect.DeepEqual(v.Interface(), d.before.FieldByIndex(index).Interface()) {
			continue // the variant's own setting, not a default
		}
		if !reflect.DeepEqual(v.Interface(), base.Interface()) {
			parts = append(parts, formatValue(v)+" "+variants[i+1].when)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// stated reports whether a default is worth stating: a zero number,
// boolean or duration is; an empty string or list is no default.
func stated(v reflect.Value) bool {
	return !v.IsZero() || v.Kind() != reflect.String && v.Kind() != reflect.Slice
}

func formatValue(v reflect.Value) string {
	var s string
	switch x := v.Interface().(type) {
	case time.Duration:
		s = config.FormatDuration(x)
	case float64:
		s = strconv.FormatFloat(x, 'g', -1, 64)
	default:
		s = fmt.Sprint(x)
	}
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}

const configHead = `# Config reference

<!-- Generated by ` + "`" + Regenerate + "`" + ` from migration/config; do not edit. -->

A config is a YAML file (` + "`rekey run -c FILE`" + `). Every value can also be given by an
environment variable, ` + "`REKEY_`" + ` and the key's path in upper case with ` + "`.`" + ` as ` + "`_`" + `
(` + "`REKEY_WRITE_BATCH_ROWS=100`" + ` for ` + "`write.batch_rows`" + `; lists comma-separated), which
overrides the file. What is given neither way takes the default below.
` + "`rekey config show -c FILE`" + ` prints the values a run uses, each with where it came
from (file and line, environment variable, flag, default).

- Keys are case-insensitive; two keys of one section that differ only in case are refused.
- Every problem is reported at once, each with its path: unknown keys (with the nearest known
  one), values of the wrong type, durations that do not parse, ` + "`REKEY_*`" + ` variables that
  name no key, and what validation finds.
- Durations are Go durations: ` + "`500ms`, `15s`, `15m`, `1h30m`" + `; a bare number other than 0 is refused.
- Relative file paths are relative to the config file's folder.
- Strategy parameters (` + "`rewrite.params`" + `) are listed in [strategies.md](strategies.md).
`

// configReference renders docs/config.md.
func configReference(docs map[string]typeDocs) (string, error) {
	w := &walker{docs: docs, defaults: defaults(), sectionOf: map[reflect.Type]string{}}
	w.walk(reflect.TypeFor[config.Config](), "", nil, false, nil)
	if len(w.missing) > 0 {
		return "", fmt.Errorf("config keys without a doc comment in migration/config: %s", strings.Join(w.missing, ", "))
	}
	var b strings.Builder
	b.WriteString(configHead)
	for _, s := range w.sections {
		title := s.path
		if title == "" {
			title = "Top level"
		}
		fmt.Fprintf(&b, "\n## %s\n\n", title)
		if s.doc != "" {
			b.WriteString(s.doc + "\n\n")
		}
		b.WriteString("| Key | Type | Default | Environment | Description |\n|---|---|---|---|---|\n")
		for _, k := range s.keys {
			def, env := k.def, k.env
			if def == "" {
				def = "none"
			}
			if env == "" {
				env = "—"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", k.path, k.typ, def, env, k.doc)
		}
	}
	b.WriteString("\n## Other environment variables\n\nThese `REKEY_*` variables are read by rekey's tests and scripts, not by a config; they are not reported as unknown.\n\n| Variable | Use |\n|---|---|\n")
	names := make([]string, 0, len(config.NonConfigEnv))
	for n := range config.NonConfigEnv {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "| `%s` | %s |\n", n, config.NonConfigEnv[n])
	}
	return b.String(), nil
}

const strategiesHead = `# Rewrite strategies

<!-- Generated by ` + "`" + Regenerate + "`" + ` from the rewrite package; do not edit. -->

A config's ` + "`rewrite`" + ` section names a strategy and its parameters:

` + "```yaml" + `
rewrite:
  strategy: hashprefix
  params: {n: 4, column: UserId}
` + "```" + `

A ` + "`chain`" + ` applies ` + "`steps`" + `, a list of such sections, in order, instead of taking
parameters. ` + "`rekey strategies`" + ` lists the strategies; ` + "`rekey rewrite --strategy NAME --param KEY=VALUE`" + `
tries one on keys. Parameter names are case-insensitive; an unknown one is refused.
`

// strategiesReference renders docs/strategies.md.
func strategiesReference() string {
	var b strings.Builder
	b.WriteString(strategiesHead)
	yesNo := map[bool]string{true: "yes", false: "no"}
	for _, s := range rewrite.Strategies() {
		var stores []string
		if s.Spanner {
			stores = append(stores, "Spanner")
		}
		if s.Datastore {
			stores = append(stores, "Datastore")
		}
		fmt.Fprintf(&b, "\n## %s\n\n%s.\n\nStores: %s. Invertible: %s. Deterministic: %s.\n\n",
			s.Name, strings.TrimSuffix(s.Summary, "."), strings.Join(stores, ", "), yesNo[s.Invertible], yesNo[s.Deterministic])
		if len(s.Params) == 0 {
			b.WriteString("No parameters.\n")
			continue
		}
		b.WriteString("| Parameter | Type | Default | Description |\n|---|---|---|---|\n")
		for _, p := range s.Params {
			def := "none"
			if p.Default != "" {
				def = "`" + strings.ReplaceAll(p.Default, "|", `\|`) + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", p.Name, p.Type, def, oneLine(p.Doc))
		}
	}
	return b.String()
}
