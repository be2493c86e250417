package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
)

func TestSplitDDL(t *testing.T) {
	text := "-- a comment; with a semicolon\n" +
		"CREATE TABLE A (Id INT64, S STRING(MAX) DEFAULT ('a;b')) PRIMARY KEY (Id);\n" +
		"# another\n/* block; */ CREATE INDEX AByS ON A (S);;\n" +
		"CREATE VIEW V SQL SECURITY INVOKER AS SELECT \"x;y\" AS c, `we;ird` FROM A"
	got := splitDDL(text)
	want := []string{
		"CREATE TABLE A (Id INT64, S STRING(MAX) DEFAULT ('a;b')) PRIMARY KEY (Id)",
		"CREATE INDEX AByS ON A (S)",
		"CREATE VIEW V SQL SECURITY INVOKER AS SELECT \"x;y\" AS c, `we;ird` FROM A",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("splitDDL:\n%q\nwant\n%q", got, want)
	}
	for s, name := range map[string]string{
		"CREATE TABLE `Order` (Id INT64) PRIMARY KEY (Id)":         "Order",
		"create unique null_filtered index IxA on A (S)":           "IxA",
		"CREATE TABLE IF NOT EXISTS B (Id INT64) PRIMARY KEY (Id)": "B",
		"CREATE CHANGE STREAM Everything FOR ALL":                  "Everything",
	} {
		if m := createRE.FindStringSubmatch(s); m == nil || m[2] != name {
			t.Errorf("createRE on %q: %q, want the name %s", s, m, name)
		}
	}
	if m := createRE.FindStringSubmatch("ALTER TABLE A ADD COLUMN X INT64"); m != nil {
		t.Errorf("createRE matched an ALTER: %q", m)
	}
}

// One's own data into a table as it is: the bundled import config's DDL
// creates the table (a second time keeps it, running nothing), and a run
// with strategy none writes every record of the sample under its own key
// with every value unchanged.
func TestImportAsItIs(t *testing.T) {
	emulator.RequireSpanner(t)
	keepBeamGlobals(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Chdir("../..")
	const file, ddl = "configs/import-jsonl-to-spanner.yaml", "configs/samples/user_access_logs.sql"
	cfg := isolatedConfig(t, file)
	var notes bytes.Buffer
	if err := prepareStores(ctx, cfg, &notes, false); err != nil {
		t.Fatal(err)
	}
	e, err := ddlEndpoint(cfg)
	if err != nil || e.role != "target" {
		t.Fatalf("ddlEndpoint: %v, %v; want the target", e, err)
	}
	for i, want := range []string{"ran 2 statements of " + ddl, "ran 0 statements of " + ddl + " in projects/rekey-demo/instances/rekey/databases/" + cfg.Target.Database + " (kept what exists: table UserAccessLogs, index UserAccessLogsByPage)"} {
		notes.Reset()
		if err := applyDDLFile(ctx, e, ddl, &notes); err != nil || !strings.Contains(notes.String(), want) {
			t.Errorf("--ddl, time %d: %v, %q; want %q", i+1, err, notes.String(), want)
		}
	}
	out, errs, code := rekey(t, "", "run", "-c", file)
	if code != 0 || !strings.Contains(out, "written=2000 dead_lettered=0") {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	c, err := emulator.SpannerClient(ctx, spannerdb.DatabasePath(cfg.Target.Project, cfg.Target.Instance, cfg.Target.Database))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type row struct {
		LastAccess time.Time
		UserId     string
		Page       spanner.NullString
		Bytes      spanner.NullInt64
	}
	got := map[string]row{}
	err = c.Single().Read(ctx, "UserAccessLogs", spanner.AllKeys(), []string{"LastAccess", "UserId", "Page", "Bytes"}).Do(func(r *spanner.Row) error {
		var x row
		if err := r.ToStruct(&x); err != nil {
			return err
		}
		got[x.LastAccess.UTC().Format(time.RFC3339Nano)+"|"+x.UserId] = x
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("configs", "samples", "user_access_logs.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(got) != len(lines) {
		t.Errorf("the table holds %d rows, the file %d records", len(got), len(lines))
	}
	for _, line := range lines {
		var in struct {
			LastAccess time.Time
			UserId     string
			Page       string
			Bytes      int64
		}
		if err := json.Unmarshal([]byte(line), &in); err != nil {
			t.Fatal(err)
		}
		r, ok := got[in.LastAccess.UTC().Format(time.RFC3339Nano)+"|"+in.UserId]
		if !ok || r.Page.StringVal != in.Page || !r.Page.Valid || r.Bytes.Int64 != in.Bytes || !r.Bytes.Valid {
			t.Errorf("record %s: the table holds %+v (found %v)", line, r, ok)
		}
	}
}
