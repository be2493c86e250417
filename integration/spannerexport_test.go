package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2/ocf"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb/spannerdbtest"
	"github.com/rekeyio/rekey/internal/store/spannerexport"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/record"
)

// TestSpannerExportTarget migrates Customers with its interleaved Orders
// from the Spanner emulator, rewritten with shard, into a Spanner Avro
// export (target type avro), and checks it against the same migration
// into a Spanner database (what an import of the export must give):
//
//   - the export's files, read with an independent Avro reader
//     (hamba/avro), hold exactly the rows the database got;
//   - rekey's own Avro source reads the export back to the same rows;
//   - the schemas carry the rewritten primary key, Orders' parent, and the
//     carried indexes (the interleaved one led by the new key); the
//     manifests' MD5s match the files;
//   - a dry run writes nothing; a second run into the folder is refused
//     (it holds an export), and with --overwrite replaces it.
func TestSpannerExportTarget(t *testing.T) {
	emulator.RequireSpanner(t)
	ctx := context.Background()
	srcID, src := newSpannerTarget(t, "exp-src", indexedSourceDDL...)
	var customers, orders []record.Record
	since := time.Date(2025, 3, 1, 12, 0, 0, 500, time.UTC)
	for i := range 30 {
		c := record.Record{Table: "Customers", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(int64(i + 1))}, {Name: "Email", Value: record.String(fmt.Sprintf("c%d@example.com", i))}}}
		if i%3 == 0 {
			c.Fields = append(c.Fields, record.Field{Name: "Since", Value: record.Time(since.Add(time.Duration(i) * time.Hour))})
		}
		customers = append(customers, c)
		for o := range 2 {
			orders = append(orders, record.Record{Table: "Orders", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(int64(i + 1))}, {Name: "OrderId", Value: record.Int(int64(o))}, {Name: "Total", Value: record.Float(float64(i) + 0.25)}, {Name: "Note", Value: record.String("ü")}}})
		}
	}
	if err := spannerdbtest.Write(ctx, src, readTable(t, src, "Customers"), customers); err != nil {
		t.Fatal(err)
	}
	if err := spannerdbtest.Write(ctx, src, readTable(t, src, "Orders"), orders); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "export")
	config := func(target string) string {
		return fmt.Sprintf(`
source: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: Customers}
target: %[4]s
rewrite: {strategy: shard, params: {n: 4, mode: abs}}
interleaved: [Orders]
dead_letter: %[5]q
`, emulator.SpannerProject(), emulator.SpannerInstance(), srcID, target, filepath.Join(t.TempDir(), "dead.jsonl"))
	}
	exportYAML := config(fmt.Sprintf("{type: avro, path: %q}", dir))

	// A dry run writes nothing.
	if _, _, err := migration.Run(ctx, loadYAML(t, exportYAML), migration.Options{DryRun: true}, pipeline.Runner{Runner: "prism"}); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the dry run made %s (%v)", dir, err)
	}

	var out runNotes
	_, res, err := migration.Run(ctx, loadYAML(t, exportYAML), migration.Options{Notes: out.Say}, pipeline.Runner{Runner: "prism"})
	if err != nil {
		t.Fatalf("export: %v\n%s", err, out.String())
	}
	if res.Counters[migration.Written] != 90 || res.Counters[migration.DeadLettered] != 0 {
		t.Errorf("export counters %s, want 90 written", res.Counters)
	}
	for _, want := range []string{"Spanner export in " + dir, "PRIMARY KEY (ShardId, CustomerId)", "CREATE INDEX OrdersByTotal ON Orders (ShardId, CustomerId, Total DESC)"} {
		if !strings.Contains(out.ddl(), want) {
			t.Errorf("the run's DDL lacks %q:\n%s", want, out.String())
		}
	}
	dstID, dst := newSpannerTarget(t, "exp-dst")
	direct := config(fmt.Sprintf("{type: spanner, project: %s, instance: %s, database: %s, table: Customers}", emulator.SpannerProject(), emulator.SpannerInstance(), dstID))
	if _, _, err := migration.Run(ctx, loadYAML(t, direct), migration.Options{CreateTarget: true}, pipeline.Runner{Runner: "prism"}); err != nil {
		t.Fatalf("run into Spanner: %v", err)
	}
	want := map[string][]string{}
	for _, table := range []string{"Customers", "Orders"} {
		for _, r := range readRows(t, dst, table) {
			want[table] = append(want[table], recordRow(&r))
		}
	}
	if len(want["Customers"]) != 30 || len(want["Orders"]) != 60 {
		t.Fatalf("the database got %d customers and %d orders, want 30 and 60", len(want["Customers"]), len(want["Orders"]))
	}

	var ex spannerexport.Export
	readJSONFile(t, filepath.Join(dir, spannerexport.ExportFile), &ex)
	if len(ex.Tables) != 2 || ex.Tables[0].Name != "Customers" || ex.Tables[1].Name != "Orders" {
		t.Fatalf("spanner-export.json tables %+v, want Customers then Orders", ex.Tables)
	}
	for _, table := range []string{"Customers", "Orders"} {
		rows, schema := readExportTable(t, dir, table)
		sort.Strings(rows)
		sort.Strings(want[table])
		if strings.Join(rows, "\n") != strings.Join(want[table], "\n") {
			t.Errorf("%s in the export (hamba/avro):\n%s\nin the JSON Lines target:\n%s", table, strings.Join(rows, "\n"), strings.Join(want[table], "\n"))
		}
		props := map[string]string{}
		for k, v := range schema {
			if s, ok := v.(string); ok {
				props[k] = s
			}
		}
		wantProps := map[string]string{"spannerPrimaryKey_0": "`ShardId` ASC", "spannerPrimaryKey_1": "`CustomerId` ASC", "googleStorage": "CloudSpanner"}
		if table == "Orders" {
			wantProps["spannerParent"] = "Customers"
			wantProps["spannerOnDeleteAction"] = "cascade"
			wantProps["spannerIndex_0"] = "CREATE INDEX OrdersByTotal ON Orders (ShardId, CustomerId, Total DESC) STORING (Note), INTERLEAVE IN Customers"
		} else {
			wantProps["spannerIndex_0"] = "CREATE UNIQUE INDEX CustomersByEmail ON Customers (Email)"
		}
		for k, v := range wantProps {
			if props[k] != v {
				t.Errorf("%s schema %s = %q, want %q", table, k, props[k], v)
			}
		}
	}

	// rekey reads its export back: Customers, with the rewrite undone by
	// none, to a JSON Lines file.
	back := filepath.Join(t.TempDir(), "back.jsonl")
	readBack := fmt.Sprintf(`
source: {type: avro, path: %q, key: "ShardId INT64, CustomerId INT64"}
target: {type: jsonl, path: %q, table: Customers}
rewrite: {strategy: none}
dead_letter: %q
`, dir+"/Customers.avro-*", back, filepath.Join(t.TempDir(), "dead.jsonl"))
	if _, res, err := migration.Run(ctx, loadYAML(t, readBack), migration.Options{}, pipeline.Runner{Runner: "prism"}); err != nil || res.Counters[migration.Written] != 30 {
		t.Fatalf("reading the export back: %v (%v)", err, res)
	}
	var got []string
	for _, r := range readJSONL(t, back) {
		got = append(got, recordRow(&r))
	}
	sort.Strings(got)
	if strings.Join(got, "\n") != strings.Join(want["Customers"], "\n") {
		t.Errorf("Customers read back with rekey's Avro source:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want["Customers"], "\n"))
	}

	// The folder holds an export now: refused, then replaced on request.
	if _, _, err := migration.Run(ctx, loadYAML(t, exportYAML), migration.Options{}, pipeline.Runner{Runner: "prism"}); !migration.IsConfigError(err) || !strings.Contains(fmt.Sprint(err), "holds a Spanner export") {
		t.Errorf("second export into %s: %v, want a config error saying it holds an export", dir, err)
	}
	if _, res, err := migration.Run(ctx, loadYAML(t, exportYAML), migration.Options{Overwrite: true}, pipeline.Runner{Runner: "prism"}); err != nil || res.Counters[migration.Written] != 90 {
		t.Errorf("export with --overwrite: %v (%v)", err, res)
	}
}

// recordRow renders a row's columns in name order, values as text.
func recordRow(r *record.Record) string {
	var cols []string
	for _, f := range r.Fields {
		if f.Value.Kind == record.KindNull {
			continue
		}
		v := f.Value.String()
		switch f.Value.Kind {
		case record.KindTimestamp:
			v = f.Value.Time.Format(time.RFC3339Nano)
		case record.KindFloat:
			v = fmt.Sprint(f.Value.Float)
		case record.KindString:
			v = f.Value.Str
		}
		cols = append(cols, f.Name+"="+v)
	}
	sort.Strings(cols)
	return strings.Join(cols, " ")
}

// readExportTable reads a table's rows from its export files with
// hamba/avro, rendered as recordRow renders them, and returns its schema
// (from the first file).
func readExportTable(t *testing.T, dir, table string) ([]string, map[string]any) {
	t.Helper()
	var m spannerexport.TableManifest
	readJSONFile(t, filepath.Join(dir, spannerexport.ManifestName(table)), &m)
	var rows []string
	var schema map[string]any
	for _, f := range m.Files {
		b, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		dec, err := ocf.NewDecoder(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if schema == nil {
			if err := json.Unmarshal(dec.Metadata()["avro.schema"], &schema); err != nil {
				t.Fatal(err)
			}
		}
		for dec.HasNext() {
			var row map[string]any
			if err := dec.Decode(&row); err != nil {
				t.Fatal(err)
			}
			var cols []string
			for k, v := range row {
				if v == nil {
					continue
				}
				switch x := v.(type) {
				case *big.Rat:
					v = x.FloatString(9)
				case string:
					if ts, err := time.Parse(time.RFC3339Nano, x); err == nil && strings.Contains(x, "T") {
						v = ts.Format(time.RFC3339Nano)
					}
				}
				cols = append(cols, fmt.Sprintf("%s=%v", k, v))
			}
			sort.Strings(cols)
			rows = append(rows, strings.Join(cols, " "))
		}
		if err := dec.Error(); err != nil {
			t.Fatal(err)
		}
	}
	return rows, schema
}

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
