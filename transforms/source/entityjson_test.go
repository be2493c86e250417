package source

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/record"
)

// exportFile holds entities as Google's "Datastore to Cloud Storage Text"
// template writes them (see internal/store/datastoredb's tests).
const exportFile = "../../internal/store/datastoredb/testdata/entityjson/export.json"

type badLine struct {
	line int
	raw  string
	err  error
}

func readEntityFile(t *testing.T, data, project string) ([]record.Record, []badLine) {
	t.Helper()
	var recs []record.Record
	var bad []badLine
	err := readEntityJSON(strings.NewReader(data), project, func(r record.Record) { recs = append(recs, r) },
		func(line int, raw string, err error) { bad = append(bad, badLine{line, raw, err}) })
	if err != nil {
		t.Fatal(err)
	}
	return recs, bad
}

// TestReadEntityJSON reads an export with a byte order mark, CRLF line
// ends, a blank line and bad lines: every entity as
// datastoredb.ParseEntityJSON reads it, every bad line with its line
// number in the file and why.
func TestReadEntityJSON(t *testing.T) {
	export, err := os.ReadFile(exportFile)
	if err != nil {
		t.Fatal(err)
	}
	good := strings.Split(strings.TrimSuffix(string(export), "\n"), "\n")
	lines := []string{
		good[0],
		`{"key":{"path":[{"kind":"A","name":"a"}]},"properties":{"x":{"integerValue":"1.5"}}}`,
		"",
		good[1],
		`{"key":{"path":[{"kind":"A","name":"b"}]},"properties":{"t":{"arrayValue":{"values":[{"stringValue":"x"},{"stringValue":"y","excludeFromIndexes":true}]}}}}`,
		`not json`,
		good[2],
	}
	data := "\xef\xbb\xbf" + strings.Join(lines, "\r\n") + "\r\n"
	recs, bad := readEntityFile(t, data, "")
	if len(recs) != len(good) {
		t.Fatalf("read %d entities, want %d", len(recs), len(good))
	}
	for i, g := range good {
		want, err := datastoredb.ParseEntityJSON([]byte(g), "")
		if err != nil {
			t.Fatal(err)
		}
		if !recs[i].Equal(&want) {
			t.Errorf("entity %d = %v, want %v", i, recs[i].Fields, want.Fields)
		}
	}
	wantBad := []struct {
		line   int
		reason string
	}{
		{2, "not a Datastore entity in JSON"},
		{5, `property "t": element 1 has excludeFromIndexes true, element 0 false`},
		{6, "not a Datastore entity in JSON"},
	}
	if len(bad) != len(wantBad) {
		t.Fatalf("bad lines %v, want %d", bad, len(wantBad))
	}
	for i, w := range wantBad {
		b := bad[i]
		if b.line != w.line || b.raw != lines[w.line-1] || !strings.Contains(b.err.Error(), w.reason) {
			t.Errorf("bad line %d: line %d %q: %v; want line %d, its text, and %q", i, b.line, b.raw, b.err, w.line, w.reason)
		}
	}
}

// TestReadEntityJSONProject: with a project given, an entity in another
// is a dead letter.
func TestReadEntityJSONProject(t *testing.T) {
	export, err := os.ReadFile(exportFile)
	if err != nil {
		t.Fatal(err)
	}
	if recs, bad := readEntityFile(t, string(export), "my-project"); len(recs) != 3 || len(bad) != 0 {
		t.Errorf("project my-project: %d entities, bad %v; want 3 and none", len(recs), bad)
	}
	recs, bad := readEntityFile(t, string(export), "other")
	if len(recs) != 0 || len(bad) != 3 || !strings.Contains(bad[0].err.Error(), `key in project "my-project", not "other"`) {
		t.Errorf("project other: %d entities, bad %v; want every line refused", len(recs), bad)
	}
}

// TestPeekEntityJSON: a dry run's sample reads entity JSON as the source
// does.
func TestPeekEntityJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "export.json")
	b, err := os.ReadFile(exportFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err := PeekFiles(t.Context(), FilesConfig{Path: path, Format: EntityJSON}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[1].Key.Leaf().Kind != "Order" {
		t.Errorf("peeked %v", recs)
	}
}
