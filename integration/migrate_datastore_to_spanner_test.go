package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// The Spanner tables the Datastore kinds go to, created before the run:
// Account entities (name keys) become Accounts rows keyed by the shard of
// their name; their Txn children (id keys) become Txns rows keyed by the
// same shard, the name and the id, interleaved in Accounts.
var d2sDDL = []string{`CREATE TABLE Accounts (
  ShardId INT64 NOT NULL,
  AccountName STRING(MAX) NOT NULL,
  Owner STRING(MAX),
  Balance FLOAT64,
  Opened TIMESTAMP,
  Active BOOL,
  Visits INT64,
  Avatar BYTES(MAX),
  Tags ARRAY<STRING(MAX)>,
  Home JSON,
  Profile JSON,
  Manager STRING(MAX),
  Note STRING(MAX)
) PRIMARY KEY (ShardId, AccountName)`,
	`CREATE TABLE Txns (
  ShardId INT64 NOT NULL,
  AccountName STRING(MAX) NOT NULL,
  TxnId INT64 NOT NULL,
  Amount INT64,
  PostedAt TIMESTAMP,
  Memo STRING(MAX),
  Flags ARRAY<BOOL>
) PRIMARY KEY (ShardId, AccountName, TxnId),
  INTERLEAVE IN PARENT Accounts ON DELETE CASCADE`,
}

// TestMigrateDatastoreToSpanner migrates a Datastore kind with name keys
// (Account, acct-00001..) and its descendant kind with id keys (Txn) into
// Spanner tables created first, with source.key naming the key columns
// (AccountName for Account; AccountName, TxnId for Txn: one column per
// path element) and shard (n 8, mode abs, on AccountName, so children get
// their parent's ShardId), on every local runner. A run into a table that
// does not exist is refused with a message giving the key to create. Every
// entity arrives exactly once as a row under its independently computed
// key with its properties as columns (keys as their notation, geo points
// and embedded entities as JSON), every Txn under its Account; a re-run
// converges.
func TestMigrateDatastoreToSpanner(t *testing.T) {
	c := emulator.TestDatastore(t)
	emulator.RequireSpanner(t)
	srcNS := emulator.UniqueNamespace("d2s")
	const nAccounts = 400
	base := time.Date(2021, 2, 3, 4, 5, 6, 0, time.UTC)
	acctKey := func(i int) rewrite.DatastoreKey {
		return rewrite.DatastoreKey{Namespace: srcNS, Path: []rewrite.PathElement{{Kind: "Account", Name: fmt.Sprintf("acct-%05d", i)}}}
	}
	var accounts, txns []record.Record
	type wantRow struct {
		key    []rewrite.Value // source key columns
		fields []record.Field  // non-key columns
	}
	var wantAccounts, wantTxns []wantRow
	for i := range nAccounts {
		k := acctKey(i)
		opened := base.Add(time.Duration(i) * 36 * time.Hour).Add(time.Duration(i) * time.Microsecond)
		lat, lng := float64(i%90)+0.5, -float64(i%180)-0.25
		tags := arr(record.String("gold"), record.String(fmt.Sprint(i)))
		if i%5 == 0 {
			tags = arr()
		}
		mgr := acctKey((i + 1) % nAccounts)
		fs := []record.Field{
			{Name: "Owner", Value: record.String(fmt.Sprintf("Owner %d ✓", i))},
			{Name: "Balance", Value: record.Float(float64(i)*10.5 - 100)},
			{Name: "Opened", Value: record.Time(opened)},
			{Name: "Active", Value: record.Bool(i%2 == 0)},
			{Name: "Visits", Value: record.Int(int64(i) << 20)},
			{Name: "Avatar", Value: record.Bytes([]byte{byte(i), 0, 0xff})},
			{Name: "Tags", Value: tags},
			{Name: "Home", Value: geo(lat, lng)},
			{Name: "Profile", Value: entity(record.Field{Name: "City", Value: record.String(fmt.Sprintf("Town %d", i%11))}, record.Field{Name: "Zip", Value: record.Int(int64(1000 + i))})},
			{Name: "Manager", Value: record.Key(mgr)},
			{Name: "Note", Value: record.Value{}},
		}
		accounts = append(accounts, record.Record{Table: "Account", Key: &k, Fields: fs})
		wantAccounts = append(wantAccounts, wantRow{key: []rewrite.Value{rewrite.String(k.Path[0].Name)}, fields: []record.Field{
			{Name: "Owner", Value: fs[0].Value}, {Name: "Balance", Value: fs[1].Value}, {Name: "Opened", Value: fs[2].Value},
			{Name: "Active", Value: fs[3].Value}, {Name: "Visits", Value: fs[4].Value}, {Name: "Avatar", Value: fs[5].Value},
			{Name: "Tags", Value: tags},
			{Name: "Home", Value: record.Value{Kind: record.KindJSON, Str: fmt.Sprintf(`{"$geo": [%v, %v]}`, lat, lng)}},
			{Name: "Profile", Value: record.Value{Kind: record.KindJSON, Str: fmt.Sprintf(`{"City": "Town %d", "Zip": %d}`, i%11, 1000+i)}},
			// Manager is checked apart: it holds the key's notation.
			{Name: "Note", Value: record.Value{}},
		}})
		for j := range i % 4 {
			tk := k.Clone()
			id := int64(j*1_000_003 + i + 1)
			tk.Path = append(tk.Path, rewrite.PathElement{Kind: "Txn", ID: id})
			tfs := []record.Field{
				{Name: "Amount", Value: record.Int(int64(i*100 - j))},
				{Name: "PostedAt", Value: record.Time(opened.Add(time.Duration(j) * time.Minute))},
				{Name: "Memo", Value: record.String(fmt.Sprintf("txn %d/%d", i, j))},
				{Name: "Flags", Value: arr(record.Bool(true), record.Bool(j%2 == 0))},
			}
			txns = append(txns, record.Record{Table: "Txn", Key: &tk, Fields: tfs})
			wantTxns = append(wantTxns, wantRow{key: []rewrite.Value{rewrite.String(k.Path[0].Name), rewrite.Int64(id)}, fields: tfs})
		}
	}
	putEntities(t, c, append(append([]record.Record(nil), accounts...), txns...))
	t.Logf("source namespace %s: %d Account, %d Txn entities", srcNS, len(accounts), len(txns))

	st, err := rewrite.New(rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 8, "mode": "abs", "columns": []any{"AccountName"}}})
	if err != nil {
		t.Fatal(err)
	}
	acctSchema := mustSchema(t, "AccountName STRING(MAX)")
	txnSchema := mustSchema(t, "AccountName STRING(MAX), TxnId INT64")
	acctRW, err := st.Spanner(acctSchema)
	if err != nil {
		t.Fatal(err)
	}
	txnRW, err := st.Spanner(txnSchema)
	if err != nil {
		t.Fatal(err)
	}
	expect := func(sr *rewrite.SpannerRewriter, rows []wantRow) map[string]record.Record {
		out := map[string]record.Record{}
		for _, w := range rows {
			nk, err := sr.Rewrite(nil, w.key)
			if err != nil {
				t.Fatal(err)
			}
			r := record.Record{}
			for i, col := range sr.Out().Columns {
				r.Fields = append(r.Fields, record.Field{Name: col.Name, Value: record.FromKeyValue(nk[i])})
			}
			r.Fields = append(r.Fields, w.fields...)
			out[keyText(nk)] = r
		}
		return out
	}
	wantA, wantT := expect(acctRW, wantAccounts), expect(txnRW, wantTxns)
	if len(wantA) != len(accounts) || len(wantT) != len(txns) {
		t.Fatalf("new keys collide")
	}

	yaml := func(kind, key, table, dstID, dead string) string {
		return fmt.Sprintf(`
source: {type: datastore, project: %s, namespace: %s, kind: %s, key: %q}
target: {type: spanner, project: %s, instance: %s, database: %s, table: %s}
rewrite: {strategy: shard, params: {n: 8, mode: abs, columns: [AccountName]}}
dead_letter: %q
`, emulator.DatastoreProject(), srcNS, kind, key, emulator.SpannerProject(), emulator.SpannerInstance(), dstID, table, dead)
	}

	for _, runner := range runners {
		t.Run(runner, func(t *testing.T) {
			ctx := context.Background()
			dstID, dst := newSpannerTarget(t, "d2s-"+runner, d2sDDL...)
			dir := t.TempDir()

			// No table: refused, naming the key to create.
			_, err := migration.Resolve(ctx, loadYAML(t, yaml("Account", "AccountName STRING(MAX)", "Missing", dstID, filepath.Join(dir, "dead0.jsonl"))))
			if err == nil || !strings.Contains(err.Error(), "target table Missing does not exist; create it first") ||
				!strings.Contains(err.Error(), "(ShardId INT64, AccountName STRING(MAX))") {
				t.Errorf("Resolve into a missing table: %v; want a refusal naming the key (ShardId INT64, AccountName STRING(MAX))", err)
			}

			check := func(run string) {
				t.Helper()
				rows := readRows(t, dst, "Accounts")
				checkSpannerRows(t, run, rows, acctRW.Out(), wantA, "Manager")
				// Manager holds the notation of the source key (references
				// are rewritten only for Datastore targets).
				for _, r := range rows {
					name, _ := r.Get("AccountName")
					mgr, _ := r.Get("Manager")
					var i int
					fmt.Sscanf(name.Str, "acct-%d", &i)
					pk, err := rewrite.ParseKey(mgr.Str, nil)
					if err != nil || !pk.IsDatastore || !pk.Datastore.Equal(acctKey((i+1)%nAccounts)) {
						t.Errorf("%s: %s: Manager = %q (%v), want the key %s", run, name.Str, mgr.Str, err, acctKey((i+1)%nAccounts))
						break
					}
				}
				checkSpannerRows(t, run, readRows(t, dst, "Txns"), txnRW.Out(), wantT)
			}
			for run := 1; run <= 2; run++ {
				for _, m := range []struct {
					kind, key, table string
					n                int64
				}{
					{"Account", "AccountName STRING(MAX)", "Accounts", int64(len(accounts))},
					{"Txn", "AccountName STRING(MAX), TxnId INT64", "Txns", int64(len(txns))},
				} {
					cfg := loadYAML(t, yaml(m.kind, m.key, m.table, dstID, filepath.Join(dir, fmt.Sprintf("dead-%s-%d.jsonl", m.kind, run))))
					start := time.Now()
					res := migrate(t, cfg, runner)
					t.Logf("run %d, %s: %s in %s", run, m.kind, res.Counters.String(), time.Since(start).Round(time.Millisecond))
					wantCounters(t, res, m.n, m.n, m.n, 0)
					if dead := readDeadLetters(t, cfg.DeadLetter); len(dead) != 0 {
						t.Errorf("run %d, %s: %d dead letters, the first: %+v", run, m.kind, len(dead), dead[0])
					}
				}
				check(fmt.Sprintf("run %d", run))
			}
		})
	}
}

// TestMigrateDatastoreToSpannerIDAndNameDistinct migrates a kind holding
// both an entity with id 42 and one named "42" into a table whose key
// column is STRING (ids of a Datastore key go to a STRING column as their
// digits): two distinct entities must not silently become one row. Either
// both arrive as distinct rows or one is refused as a dead letter; rows
// written must equal rows in the table.
func TestMigrateDatastoreToSpannerIDAndNameDistinct(t *testing.T) {
	c := emulator.TestDatastore(t)
	emulator.RequireSpanner(t)
	srcNS := emulator.UniqueNamespace("d2s-idname")
	mk := func(e rewrite.PathElement, owner string) record.Record {
		k := rewrite.DatastoreKey{Namespace: srcNS, Path: []rewrite.PathElement{e}}
		return record.Record{Table: "Account", Key: &k, Fields: []record.Field{{Name: "Owner", Value: record.String(owner)}}}
	}
	putEntities(t, c, []record.Record{
		mk(rewrite.PathElement{Kind: "Account", ID: 42}, "id 42"),
		mk(rewrite.PathElement{Kind: "Account", Name: "42"}, `name "42"`),
		mk(rewrite.PathElement{Kind: "Account", Name: "acct-1"}, "acct-1"),
	})
	for _, runner := range runners {
		t.Run(runner, func(t *testing.T) {
			dstID, dst := newSpannerTarget(t, "d2s-idname-"+runner, `CREATE TABLE Accounts (
  ShardId INT64 NOT NULL,
  AccountName STRING(MAX) NOT NULL,
  Owner STRING(MAX)
) PRIMARY KEY (ShardId, AccountName)`)
			cfg := loadYAML(t, fmt.Sprintf(`
source: {type: datastore, project: %s, namespace: %s, kind: Account, key: "AccountName STRING(MAX)"}
target: {type: spanner, project: %s, instance: %s, database: %s, table: Accounts}
rewrite: {strategy: shard, params: {n: 8, mode: abs}}
dead_letter: %q
`, emulator.DatastoreProject(), srcNS, emulator.SpannerProject(), emulator.SpannerInstance(), dstID, filepath.Join(t.TempDir(), "dead.jsonl")))
			res := migrate(t, cfg, runner)
			rows := readRows(t, dst, "Accounts")
			var owners []string
			for _, r := range rows {
				name, _ := r.Get("AccountName")
				owner, _ := r.Get("Owner")
				owners = append(owners, fmt.Sprintf("%s=%s", name.Str, owner.Str))
			}
			t.Logf("%s; rows: %s", res.Counters.String(), strings.Join(owners, ", "))
			if res.Counters["read"] != 3 || res.Counters["written"]+res.Counters["dead_lettered"] != 3 {
				t.Errorf("counters %s; want read=3 and written+dead_lettered=3", res.Counters.String())
			}
			if int64(len(rows)) != res.Counters["written"] {
				t.Errorf("%d entities counted as written, but the table holds %d rows (%s): Datastore id 42 and name \"42\" were written to the same row",
					res.Counters["written"], len(rows), strings.Join(owners, ", "))
			}
		})
	}
}
