package demo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/migration/config"
)

// markFile marks a folder as the demo's: the demo writes its files into a
// folder that is new, empty or holds this file, and nowhere else.
const markFile = ".rekey-demo"

// claimDir makes dir the demo's folder for what flag names (--out,
// --keep-configs): it creates dir if it is missing and marks it, or
// accepts it if it is empty or marked by an earlier demo. A folder holding
// anything else is refused, so the demo never replaces a user's files.
func claimDir(dir, flag string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s %s: %w", flag, dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("%s %s: %w", flag, dir, err)
	}
	if len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, markFile)); err == nil {
			return nil
		}
		held := entries[0].Name()
		if n := len(entries) - 1; n > 0 {
			held += fmt.Sprintf(" and %d more", n)
		}
		return fmt.Errorf("%s %s: the folder holds %s, which the demo did not write; give a new or empty folder (or one an earlier demo wrote: it holds %s)",
			flag, dir, held, markFile)
	}
	mark := "This folder holds what `rekey demo` wrote; the next demo told to use it replaces those files (and only those).\n"
	if err := os.WriteFile(filepath.Join(dir, markFile), []byte(mark), 0o644); err != nil {
		return fmt.Errorf("%s %s: %w", flag, dir, err)
	}
	return nil
}

// tempDir is name in the temporary directory if it is missing or holds
// mark (an earlier demo's, whose files the demo replaces), else a new
// folder next to it: nothing of the user's is replaced.
func tempDir(name, mark string) (string, error) {
	dir := filepath.Join(os.TempDir(), name)
	if _, err := os.Stat(filepath.Join(dir, mark)); err == nil {
		return dir, nil
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return dir, nil
	}
	return os.MkdirTemp("", name+"-")
}

// keepConfig writes cfg, a migration the demo is about to run, as
// name.yaml in the --keep-configs folder, headed by what it does and the
// command that runs it again, and says where it is. Nothing is written
// without --keep-configs.
func (e *demoEnv) keepConfig(name, what string, cfg *config.Config) error {
	if e.keepDir == "" {
		return nil
	}
	path := filepath.Join(e.keepDir, name+".yaml")
	doc, err := configYAML(cfg)
	if err != nil {
		return fmt.Errorf("--keep-configs %s: %w", path, err)
	}
	cmd := runCommand(path, cfg)
	head := fmt.Sprintf("# rekey demo: %s\n# Run it again: %s\n", what, cmd)
	if !cfg.Source.IsFile() || !cfg.Target.IsFile() {
		head += "# against the emulators the demo used:"
		for _, env := range []string{emulator.EnvSpannerHost, emulator.EnvDatastoreHost} {
			head += fmt.Sprintf(" %s=%s", env, os.Getenv(env))
		}
		head += "\n"
	}
	if err := os.WriteFile(path, append([]byte(head), doc...), 0o644); err != nil {
		return fmt.Errorf("--keep-configs: %w", err)
	}
	e.kept = append(e.kept, path)
	fmt.Fprintf(e.w, "  config kept: %s (%s)\n", path, cmd)
	return nil
}

// runCommand is the `rekey run` that repeats the demo's run of the
// config at path: the demo replaces its own JSON Lines output.
func runCommand(path string, cfg *config.Config) string {
	cmd := "rekey run -c " + path
	if cfg.Target.IsFile() {
		cmd += " --overwrite"
	}
	return cmd
}

// configYAML writes cfg as a config file: the values it sets (not the
// zero ones, which the loader fills with defaults), under the config's own
// key names (its mapstructure tags), in the order Config declares them.
// config.LoadFile reads it back to cfg with its defaults.
func configYAML(cfg *config.Config) ([]byte, error) {
	root, err := yamlValue(reflect.ValueOf(cfg).Elem())
	if err != nil {
		return nil, err
	}
	if root == nil {
		root = &yaml.Node{Kind: yaml.MappingNode}
	}
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// yamlValue is v as a YAML node, or nil for a zero value: sections by
// their mapstructure tags, maps by sorted key, durations as a config
// writes them ("1s", "2m").
func yamlValue(v reflect.Value) (*yaml.Node, error) {
	if !v.IsValid() || v.IsZero() {
		return nil, nil
	}
	if d, ok := v.Interface().(time.Duration); ok {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: config.FormatDuration(d)}, nil
	}
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		return yamlValue(v.Elem())
	case reflect.Struct:
		m := &yaml.Node{Kind: yaml.MappingNode}
		for i := range v.NumField() {
			name := v.Type().Field(i).Tag.Get("mapstructure")
			if name == "" || name == "-" {
				continue
			}
			if err := addEntry(m, name, v.Field(i)); err != nil {
				return nil, err
			}
		}
		if len(m.Content) == 0 {
			return nil, nil
		}
		return m, nil
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		m := &yaml.Node{Kind: yaml.MappingNode}
		for _, k := range keys {
			if err := addEntry(m, k.String(), v.MapIndex(k)); err != nil {
				return nil, err
			}
		}
		return m, nil
	case reflect.Slice, reflect.Array:
		seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for i := range v.Len() {
			n, err := yamlValue(v.Index(i))
			switch {
			case n != nil || err != nil:
			case v.Index(i).Kind() == reflect.Struct: // a zero element still counts
				n = &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			default:
				n, err = encodeNode(v.Index(i))
			}
			if err != nil {
				return nil, err
			}
			if n.Kind != yaml.ScalarNode {
				seq.Style = 0
			}
			seq.Content = append(seq.Content, n)
		}
		return seq, nil
	}
	return encodeNode(v)
}

// addEntry adds key: v to the mapping m, unless v is zero.
func addEntry(m *yaml.Node, key string, v reflect.Value) error {
	n, err := yamlValue(v)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	if n != nil {
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, n)
	}
	return nil
}

func encodeNode(v reflect.Value) (*yaml.Node, error) {
	n := &yaml.Node{}
	if err := n.Encode(v.Interface()); err != nil {
		return nil, err
	}
	return n, nil
}
