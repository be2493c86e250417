// Command gendocs writes the reference of rekey's config keys
// (docs/config.md) and of its rewrite strategies and their parameters
// (docs/strategies.md), from the code: the keys, types and section order
// from config.Config's mapstructure tags, each key's text from its field's
// doc comment in migration/config, defaults from Config.SetDefaults, allowed
// values from config.Enums, and the strategies from rewrite.Strategies()
// (each parameter's type and default are what the strategy reads). Run it
// from the repository's root:
//
//	go run ./migration/config/gendocs
//
// (or go generate ./migration/config). A test fails while docs/ differs
// from what it writes.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// Regenerate is the command that rewrites docs/, for messages.
const Regenerate = "go run ./migration/config/gendocs"

func main() {
	root := flag.String("root", ".", "the repository's root: reads migration/config, writes docs/")
	flag.Parse()
	if err := write(*root); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

// write generates every document under root.
func write(root string) error {
	docs, err := generate(root)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(root, "docs"), 0o755); err != nil {
		return err
	}
	for name, text := range docs {
		if err := os.WriteFile(filepath.Join(root, "docs", name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// generate returns the documents by file name under docs/.
func generate(root string) (map[string]string, error) {
	fields, err := parseDocs(filepath.Join(root, "migration", "config"))
	if err != nil {
		return nil, err
	}
	cfg, err := configReference(fields)
	if err != nil {
		return nil, err
	}
	return map[string]string{"config.md": cfg, "strategies.md": strategiesReference()}, nil
}
