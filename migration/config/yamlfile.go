package config

import (
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// fileKeys is what the config file itself says, read from its YAML before
// viper folds keys to lower case: the line of every key path (lower case,
// as Load's paths are), and the keys that differ only in case from an
// earlier key of the same section.
type fileKeys struct {
	file  string
	lines map[string]int
	dups  []error
}

// readFileKeys parses file (YAML). A file viper already read parses here
// too; a parse error is returned as is.
func readFileKeys(file string) (*fileKeys, error) {
	text, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("read config %s: %w", file, err)
	}
	fk := &fileKeys{file: file, lines: map[string]int{}}
	if len(doc.Content) > 0 {
		fk.walk("", doc.Content[0])
	}
	return fk, nil
}

// walk records the keys under n, at path.
func (fk *fileKeys) walk(path string, n *yaml.Node) {
	switch n.Kind {
	case yaml.AliasNode:
		fk.walk(path, n.Alias)
	case yaml.SequenceNode:
		for i, e := range n.Content {
			fk.walk(fmt.Sprintf("%s[%d]", path, i), e)
		}
	case yaml.MappingNode:
		seen := map[string]*yaml.Node{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" { // a merge key: its keys are this section's
				fk.walk(path, v)
				continue
			}
			lower := strings.ToLower(k.Value)
			p := joinPath(path, lower)
			if first, ok := seen[lower]; ok {
				fk.dups = append(fk.dups, &FieldError{Path: p, Msg: fmt.Sprintf(
					"given twice, as %q (line %d) and %q (line %d); keys are case-insensitive, so one would silently replace the other",
					first.Value, first.Line, k.Value, k.Line)})
				continue
			}
			seen[lower] = k
			fk.lines[p] = k.Line
			fk.walk(p, v)
		}
	}
}

// line is the line of the key at path in the file, 0 if the file does not
// name it.
func (fk *fileKeys) line(path string) int {
	if fk == nil {
		return 0
	}
	return fk.lines[path]
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}
