package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/store/spannerdb/spannerdbtest"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/record"
)

// A source with a secondary index on the parent and one interleaved in
// it on the child.
var indexedSourceDDL = []string{
	`CREATE TABLE Customers (CustomerId INT64 NOT NULL, Email STRING(MAX), Since TIMESTAMP) PRIMARY KEY (CustomerId)`,
	`CREATE TABLE Orders (CustomerId INT64 NOT NULL, OrderId INT64 NOT NULL, Total FLOAT64, Note STRING(MAX)) PRIMARY KEY (CustomerId, OrderId), INTERLEAVE IN PARENT Customers ON DELETE CASCADE`,
	`CREATE UNIQUE INDEX CustomersByEmail ON Customers (Email)`,
	`CREATE INDEX OrdersByTotal ON Orders (CustomerId, Total DESC) STORING (Note), INTERLEAVE IN Customers`,
}

// TestCreateTargetDatabaseAndIndexes migrates Customers with its
// interleaved Orders, rewritten with shard (a new leading ShardId), into
// a database that does not exist: --create-target creates the database
// with the tables, and the source's secondary indexes, the interleaved
// one led by the new parent key (ShardId, CustomerId); by default
// (write.indexes: after) the indexes come after the load, with
// write.indexes: none not at all. Without --create-target the missing
// database is refused, naming it.
func TestCreateTargetDatabaseAndIndexes(t *testing.T) {
	emulator.RequireSpanner(t)
	ctx := context.Background()
	srcID, src := newSpannerTarget(t, "idx-src", indexedSourceDDL...)
	var customers, orders []record.Record
	for i := range 40 {
		customers = append(customers, record.Record{Table: "Customers", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(int64(i + 1))}, {Name: "Email", Value: record.String(fmt.Sprintf("c%d@example.com", i))}}})
		orders = append(orders, record.Record{Table: "Orders", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(int64(i + 1))}, {Name: "OrderId", Value: record.Int(1)}, {Name: "Total", Value: record.Float(float64(i))}}})
	}
	if err := spannerdbtest.Write(ctx, src, readTable(t, src, "Customers"), customers); err != nil {
		t.Fatal(err)
	}
	if err := spannerdbtest.Write(ctx, src, readTable(t, src, "Orders"), orders); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		indexes string
		want    []string // the target's index DDL, sorted by name
	}{
		{"after", []string{
			"CREATE UNIQUE INDEX CustomersByEmail ON Customers (Email)",
			"CREATE INDEX OrdersByTotal ON Orders (ShardId, CustomerId, Total DESC) STORING (Note), INTERLEAVE IN Customers"}},
		{"none", nil},
	} {
		t.Run(tc.indexes, func(t *testing.T) {
			dstID := emulator.UniqueDatabaseID("idx-" + tc.indexes) // not created: the run creates it
			yaml := fmt.Sprintf(`
source: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: Customers}
target: {type: spanner, project: %[1]s, instance: %[2]s, database: %[4]s, table: Customers}
rewrite: {strategy: shard, params: {n: 4, mode: abs}}
interleaved: [Orders]
write: {indexes: %[5]s}
dead_letter: %[6]q
`, emulator.SpannerProject(), emulator.SpannerInstance(), srcID, dstID, tc.indexes, filepath.Join(t.TempDir(), "dead.jsonl"))
			_, _, err := migration.Run(ctx, loadYAML(t, yaml), migration.Options{}, pipeline.Runner{Runner: "prism"})
			if !migration.IsConfigError(err) || !strings.Contains(fmt.Sprint(err), "database") || !strings.Contains(fmt.Sprint(err), "--create-target") {
				t.Fatalf("without --create-target: %v, want a config error naming the missing database and --create-target", err)
			}
			var out runNotes
			_, res, err := migration.Run(ctx, loadYAML(t, yaml), migration.Options{CreateTarget: true, Notes: out.Say}, pipeline.Runner{Runner: "prism"})
			if err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			if res.Counters[migration.Written] != 80 {
				t.Errorf("written %d, want 80 (%s)", res.Counters[migration.Written], res.Counters)
			}
			s, err := spannerdb.ReadSchema(ctx, fmt.Sprintf("projects/%s/instances/%s/databases/%s", emulator.SpannerProject(), emulator.SpannerInstance(), dstID))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ix := range s.Indexes {
				got = append(got, ix.DDL())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("target indexes:\n%s\nwant:\n%s\nrun output:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"), out.String())
			}
			creating := out.index(func(n migration.Note) bool { return n == migration.Note(migration.CreatingIndexes{N: 2}) })
			started := out.index(func(n migration.Note) bool { _, ok := n.(migration.Starting); return ok })
			if tc.want != nil && (!strings.Contains(out.ddl(), "created after the load") || creating < 0 || started < 0 || creating < started) {
				t.Errorf("the run's notes do not show the indexes' DDL and their creation after the load:\n%s", out.String())
			}
		})
	}
}
