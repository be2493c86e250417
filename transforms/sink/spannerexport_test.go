package sink_test

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/hamba/avro/v2/ocf"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/store/spannerexport"
	"github.com/rekeyio/rekey/internal/testkit/beamtest"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms/sink"
	"github.com/rekeyio/rekey/transforms/source"
)

const exportDDL = `
CREATE TABLE Users (
  ShardId INT64 NOT NULL,
  UserId STRING(10) NOT NULL,
  Name STRING(MAX),
) PRIMARY KEY (ShardId, UserId);
CREATE TABLE Logs (
  ShardId INT64 NOT NULL,
  UserId STRING(10) NOT NULL,
  Seq INT64 NOT NULL,
) PRIMARY KEY (ShardId, UserId, Seq), INTERLEAVE IN PARENT Users ON DELETE CASCADE;
CREATE TABLE Empty (
  Id INT64 NOT NULL,
) PRIMARY KEY (Id);
CREATE INDEX UsersByName ON Users (Name);
`

// TestSpannerExport writes users (some refused) through the export sink
// on both local runners, in batches over several bundles, and checks the
// export as the import reads it: spanner-export.json lists every table,
// parents first; each manifest lists the table's files with their MD5s;
// the empty table has one file; no part file is left, not even one a
// failed bundle left. The rows read back
// with rekey's Avro source and with another Avro reader equal those
// written; refused rows are dead letters of the write stage.
func TestSpannerExport(t *testing.T) {
	schema, err := spannerdb.ParseSchema(exportDDL)
	if err != nil {
		t.Fatal(err)
	}
	tables := []*spannerdb.Table{schema.Tables["users"], schema.Tables["logs"], schema.Tables["empty"]}
	var batches []record.Batch
	var wantUsers, wantLogs []string
	for b := range 5 {
		var recs []record.Record
		for i := range 20 {
			n := b*20 + i
			u := fmt.Sprintf("u%03d", n)
			recs = append(recs, record.Record{Table: "Users", Fields: []record.Field{
				{Name: "ShardId", Value: record.Int(int64(n % 4))}, {Name: "UserId", Value: record.String(u)}, {Name: "Name", Value: record.String("n" + u)}}})
			wantUsers = append(wantUsers, fmt.Sprintf("%d/%s/n%s", n%4, u, u))
			recs = append(recs, record.Record{Table: "Logs", Fields: []record.Field{
				{Name: "ShardId", Value: record.Int(int64(n % 4))}, {Name: "UserId", Value: record.String(u)}, {Name: "Seq", Value: record.Int(1)}}})
			wantLogs = append(wantLogs, fmt.Sprintf("%d/%s/1", n%4, u))
		}
		// Refused: a user id longer than STRING(10), a table not exported.
		recs = append(recs, record.Record{Table: "Users", Fields: []record.Field{{Name: "ShardId", Value: record.Int(0)}, {Name: "UserId", Value: record.String("much-too-long")}}},
			record.Record{Table: "Other", Fields: []record.Field{{Name: "Id", Value: record.Int(1)}}})
		batches = append(batches, record.Batch{Recs: recs})
	}
	sort.Strings(wantUsers)
	sort.Strings(wantLogs)
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "export")
			// A part a failed bundle left: the export removes it.
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "Users.avro.part-0bad"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			// An export this one replaces (--overwrite): a data file of a
			// table it had more files for, and a table it had that this
			// one has not, with its manifest. No manifest will list them:
			// removed.
			for name, text := range map[string]string{
				"Users.avro-00007-of-00009": "old",
				"Gone.avro-00000-of-00001":  "old",
				"Gone-manifest.json":        `{"files": [{"name": "Gone.avro-00000-of-00001", "md5": "x"}]}`,
				"spanner-export.json":       `{"tables": [{"name": "Gone", "manifestFile": "Gone-manifest.json"}, {"name": "Users", "manifestFile": "Users-manifest.json"}]}`,
			} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			counts, deads := beamtest.NewCollector(t), beamtest.NewCollector(t)
			beamtest.Run(t, runner, func(s beam.Scope) {
				in := beam.Reshuffle(s, beam.CreateList(s, batches))
				written, dead, err := sink.SpannerExport(s, dir, tables, schema.Indexes, in)
				if err != nil {
					t.Fatal(err)
				}
				counts.Collect(s, written)
				deads.Collect(s, dead)
			})
			if got := counts.Elements(); len(got) != 1 || got[0] != len(wantUsers)+len(wantLogs) {
				t.Errorf("written %v, want [%d]", got, len(wantUsers)+len(wantLogs))
			}
			var deadReasons []string
			for _, e := range deads.Elements() {
				d, _, err := record.ParseDeadLetter([]byte(e.(string)))
				if err != nil || d.Stage != record.StageWrite {
					t.Fatalf("dead letter %q: %v", e, err)
				}
				deadReasons = append(deadReasons, d.Reason)
			}
			if len(deadReasons) != 10 {
				t.Errorf("%d dead letters (%q), want 10", len(deadReasons), deadReasons)
			}
			checkExport(t, dir, []string{"Users", "Logs", "Empty"})
			for _, name := range []string{"Users.avro-00007-of-00009", "Gone.avro-00000-of-00001", "Gone-manifest.json"} {
				if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
					t.Errorf("%s, of the export replaced, is still there: %v", name, err)
				}
			}
			if got := readExport(t, dir, "Users", "Name"); strings.Join(got, " ") != strings.Join(wantUsers, " ") {
				t.Errorf("Users read with hamba/avro:\n%v\nwant\n%v", got, wantUsers)
			}
			if got := readExport(t, dir, "Logs", "Seq"); strings.Join(got, " ") != strings.Join(wantLogs, " ") {
				t.Errorf("Logs read with hamba/avro:\n%v\nwant\n%v", got, wantLogs)
			}
			if got := readExport(t, dir, "Empty", ""); len(got) != 0 {
				t.Errorf("Empty holds %v", got)
			}
			// rekey's own Avro source reads the same rows.
			back := beamtest.NewCollector(t)
			beamtest.Run(t, runner, func(s beam.Scope) {
				b, _ := source.Files(s, source.FilesConfig{Path: dir + "/Users.avro-*", Format: "avro"})
				back.Collect(s, b)
			})
			var got []string
			for _, e := range back.Elements() {
				recs := e.(record.Batch).Recs
				for _, r := range recs {
					sh, _ := r.Get("ShardId")
					u, _ := r.Get("UserId")
					n, _ := r.Get("Name")
					got = append(got, fmt.Sprintf("%d/%s/%s", sh.Int, u.Str, n.Str))
				}
			}
			sort.Strings(got)
			if strings.Join(got, " ") != strings.Join(wantUsers, " ") {
				t.Errorf("Users read with rekey's Avro source:\n%v\nwant\n%v", got, wantUsers)
			}
		})
	}
}

// checkExport checks spanner-export.json and the manifests against the
// files in dir.
func checkExport(t *testing.T, dir string, tables []string) {
	t.Helper()
	var ex spannerexport.Export
	readJSON(t, filepath.Join(dir, spannerexport.ExportFile), &ex)
	if ex.Dialect != "GOOGLE_STANDARD_SQL" || len(ex.Tables) != len(tables) {
		t.Fatalf("spanner-export.json: %+v, want tables %v", ex, tables)
	}
	listed := map[string]bool{spannerexport.ExportFile: true}
	for i, et := range ex.Tables {
		if et.Name != tables[i] || et.ManifestFile != tables[i]+"-manifest.json" {
			t.Errorf("table %d: %+v, want %s", i, et, tables[i])
		}
		listed[et.ManifestFile] = true
		var m spannerexport.TableManifest
		readJSON(t, filepath.Join(dir, et.ManifestFile), &m)
		if len(m.Files) == 0 {
			t.Errorf("%s lists no files", et.ManifestFile)
		}
		for j, f := range m.Files {
			if want := spannerexport.DataName(et.Name, j, len(m.Files)); f.Name != want {
				t.Errorf("%s file %d is %s, want %s", et.ManifestFile, j, f.Name, want)
			}
			b, err := os.ReadFile(filepath.Join(dir, f.Name))
			if err != nil {
				t.Fatal(err)
			}
			sum := md5.Sum(b)
			if got := base64.StdEncoding.EncodeToString(sum[:]); got != f.MD5 {
				t.Errorf("%s: md5 %s in the manifest, %s on disk", f.Name, f.MD5, got)
			}
			listed[f.Name] = true
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !listed[e.Name()] {
			t.Errorf("%s is in the export folder but in no manifest", e.Name())
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// readExport reads table's rows with hamba/avro, as "ShardId/UserId/last".
func readExport(t *testing.T, dir, table, last string) []string {
	t.Helper()
	var m spannerexport.TableManifest
	readJSON(t, filepath.Join(dir, spannerexport.ManifestName(table)), &m)
	var out []string
	for _, f := range m.Files {
		fh, err := os.Open(filepath.Join(dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		dec, err := ocf.NewDecoder(fh)
		if err != nil {
			t.Fatal(err)
		}
		for dec.HasNext() {
			var row map[string]any
			if err := dec.Decode(&row); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%v/%v/%v", row["ShardId"], row["UserId"], row[last]))
		}
		fh.Close()
	}
	sort.Strings(out)
	return out
}
