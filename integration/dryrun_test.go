package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb/spannerdbtest"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/record"
)

// dryRun runs cfg as `rekey run --dry_run --create-target` does on runner.
func dryRun(t *testing.T, cfg string, runner string) *migration.Result {
	t.Helper()
	_, res, err := migration.Run(context.Background(), loadYAML(t, cfg), migration.Options{CreateTarget: true, DryRun: true}, pipeline.Runner{Runner: runner})
	if err != nil {
		t.Fatalf("dry run on %s: %v", runner, err)
	}
	return res
}

// noCommits checks, from the tap in front of the emulator, that not one
// Commit (nor DDL) reached it.
func noCommits(t *testing.T, tap *committap.Tap) {
	t.Helper()
	if n := len(tap.Commits()); n != 0 {
		t.Errorf("%d commits reached the emulator, want none", n)
	}
	for method, n := range tap.Calls() {
		if strings.Contains(method, "UpdateDatabaseDdl") || strings.HasSuffix(method, "/Commit") {
			t.Errorf("%d calls of %s reached the emulator, want none", n, method)
		}
	}
}

// TestDryRunWritesNothing runs a Spanner -> Spanner migration that would
// create its target table, and a JSON Lines -> Datastore one with a bad
// line, as dry runs on prism and direct, every call going through a
// commit tap: the source is read and every key rewritten (the counters
// say how many records each target would get), the bad line is
// dead-lettered with its reason, and not one commit or DDL statement
// reaches either emulator; the target database has no table and the
// target namespace no entity, not even the manifest.
func TestDryRunWritesNothing(t *testing.T) {
	const rows = 300
	ctx := context.Background()
	for _, runner := range runners {
		t.Run(runner+"/spanner", func(t *testing.T) {
			srcID, src := newSpannerTarget(t, "dry-src", `CREATE TABLE Logs (Id INT64 NOT NULL, Page STRING(MAX)) PRIMARY KEY (Id)`)
			dstID, dst := newSpannerTarget(t, "dry-dst")
			var recs []record.Record
			for i := range rows {
				recs = append(recs, record.Record{Table: "Logs", Fields: []record.Field{{Name: "Id", Value: record.Int(int64(i + 1))}, {Name: "Page", Value: record.String(fmt.Sprintf("/p/%d", i))}}})
			}
			if err := spannerdbtest.Write(ctx, src, readTable(t, src, "Logs"), recs); err != nil {
				t.Fatal(err)
			}
			tap := startTap(t, emulator.EnvSpannerHost)
			dead := filepath.Join(t.TempDir(), "dead.jsonl")
			res := dryRun(t, fmt.Sprintf(`
source: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: Logs}
target: {type: spanner, project: %[1]s, instance: %[2]s, database: %[4]s, table: LogsV2}
rewrite: {strategy: bitreverse}
dead_letter: %[5]q
`, emulator.SpannerProject(), emulator.SpannerInstance(), srcID, dstID, dead), runner)
			if got := res.Counters[migration.WouldWrite+"LogsV2"]; got != rows || res.Counters[migration.Read] != rows || res.Counters[migration.Written] != 0 {
				t.Errorf("counters %s; want read=%d written=0 %sLogsV2=%d", res.Counters, rows, migration.WouldWrite, rows)
			}
			if len(res.Sample) == 0 || !strings.Contains(res.Sample[0], " -> ") {
				t.Errorf("sample %q, want old -> new keys", res.Sample)
			}
			noCommits(t, tap)
			var tables int64
			err := dst.Single().Query(ctx, spanner.Statement{SQL: "SELECT COUNT(*) FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = ''"}).
				Do(func(r *spanner.Row) error { return r.Columns(&tables) })
			if err != nil || tables != 0 {
				t.Errorf("the target database has %d tables (%v), want none", tables, err)
			}
		})

		t.Run(runner+"/datastore", func(t *testing.T) {
			c := emulator.TestDatastore(t)
			ns := emulator.UniqueNamespace("dry-" + runner)
			var lines []string
			for i := range rows {
				lines = append(lines, fmt.Sprintf(`{"__key__": {"path": ["Customer", "Customer%d"]}, "Name": "n%d"}`, i+1, i))
			}
			lines = append(lines, `{"__key__": {"path": ["Customer", "a/b"]}, "Name": "bad"}`)
			in := writeLines(t, "customers.jsonl", lines)
			tap := startTap(t, emulator.EnvDatastoreHost)
			dead := filepath.Join(t.TempDir(), "dead.jsonl")
			res := dryRun(t, fmt.Sprintf(`
source: {type: jsonl, path: %q}
target: {type: datastore, project: %s, namespace: %s, kind: Customer}
rewrite: {strategy: hashprefix}
dead_letter: %q
`, in, emulator.DatastoreProject(), ns, dead), runner)
			if got := res.Counters[migration.WouldWrite+"Customer"]; got != rows || res.Counters[migration.DeadLettered] != 1 || res.Counters[migration.Written] != 0 {
				t.Errorf("counters %s; want %sCustomer=%d dead_lettered=1 written=0", res.Counters, migration.WouldWrite, rows)
			}
			if dl := readDeadLetters(t, dead); len(dl) != 1 || !strings.Contains(dl[0].Reason, "/") {
				t.Errorf("dead letters %+v, want the one bad key with its reason", dl)
			}
			noCommits(t, tap)
			for _, kind := range []string{"Customer", migration.ManifestKind} {
				n, err := c.Count(ctx, datastore.NewQuery(kind).Namespace(ns).KeysOnly())
				if err != nil || n != 0 {
					t.Errorf("the target namespace holds %d %s entities (%v), want none", n, kind, err)
				}
			}
		})
	}
}
