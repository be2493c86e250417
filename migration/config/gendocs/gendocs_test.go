package main

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/rewrite"
)

// root is the repository's root, seen from this package.
const root = "../../.."

// docs/ is what gendocs writes: the test fails while it is stale.
func TestDocsAreUpToDate(t *testing.T) {
	docs, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range docs {
		path := filepath.Join(root, "docs", name)
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v: run %s", err, Regenerate)
			continue
		}
		if string(got) != want {
			t.Errorf("docs/%s is stale: it differs from what the code documents; run %s (from the repository's root) and commit the result", name, Regenerate)
		}
	}
}

// Every key of Config, and every parameter of every strategy, is in the
// reference, with its type and default.
func TestReferenceListsEveryKeyAndParameter(t *testing.T) {
	docs, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	cfg, strategies := docs["config.md"], docs["strategies.md"]
	for _, k := range keyPaths(reflect.TypeFor[config.Config](), "") {
		if !strings.Contains(cfg, "| `"+k+"` |") {
			t.Errorf("docs/config.md has no row for %s", k)
		}
	}
	for _, row := range []string{
		"| `write.batch_rows` | integer | `500` | `REKEY_WRITE_BATCH_ROWS` |",
		"| `write.batch_mutations` | integer | `5000`; `500` with a datastore target |",
		"| `write.retry.max_cumulative_backoff` | duration (e.g. 500ms, 15s, 15m) | `15m` |",
		"| `source.delimiter` | string | `,` for a csv source or target |",
		"| `ancestors` | one of root, all | `all` |",
		"| `ramp.base` | number | `0`; `500` with ramp.profile datastore; `1000` with ramp.profile gcs |",
	} {
		if !strings.Contains(cfg, row) {
			t.Errorf("docs/config.md lacks the row starting\n  %s", row)
		}
	}
	for _, info := range rewrite.Strategies() {
		section := strategies[strings.Index(strategies, "\n## "+info.Name+"\n"):]
		if i := strings.Index(section[1:], "\n## "); i >= 0 {
			section = section[:i+1]
		}
		for _, p := range info.Params {
			if !strings.Contains(section, "| `"+p.Name+"` | "+p.Type+" |") {
				t.Errorf("docs/strategies.md: %s has no row for %s (%s)", info.Name, p.Name, p.Type)
			}
		}
	}
	for _, row := range []string{
		"| `column` | string | none | Spanner: the key column to reverse",
		"| `keep` | true or false | `false` |",
		"| `namespace` | string | `" + rewrite.DefaultUUIDNamespace + "` |",
		"| `sep` | string | `-` | as prefix:",
	} {
		if !strings.Contains(strategies, row) {
			t.Errorf("docs/strategies.md lacks the row starting\n  %s", row)
		}
	}
}

// A key without a doc comment stops the generator, naming it.
func TestUndocumentedKeyIsRefused(t *testing.T) {
	fields, err := parseDocs(filepath.Join(root, "migration", "config"))
	if err != nil {
		t.Fatal(err)
	}
	fields["WriteConfig"].fields["BatchRows"] = ""
	_, err = configReference(fields)
	if err == nil || !strings.Contains(err.Error(), "write.batch_rows (WriteConfig.BatchRows)") {
		t.Errorf("got %v, want an error naming write.batch_rows", err)
	}
}

// keyPaths lists every key of t as the reference names it (lists of
// sections as NAME[]), not descending into a type already on the path.
func keyPaths(t reflect.Type, prefix string, seen ...reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("mapstructure")
		if name == "" || name == "-" {
			continue
		}
		p := prefix + name
		out = append(out, p)
		ft := f.Type
		if ft.Kind() == reflect.Slice {
			ft, p = ft.Elem(), p+"[]"
		}
		if ft.Kind() == reflect.Struct && ft.Name() != "Duration" && ft != t && !slices.Contains(seen, ft) {
			out = append(out, keyPaths(ft, p+".", append(seen, t)...)...)
		}
	}
	return out
}
