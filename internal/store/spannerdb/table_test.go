package spannerdb_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/store/spannerdb/spannerdbtest"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

var schemaDDL = []string{
	`CREATE TABLE Users (
	   UserId STRING(36) NOT NULL,
	   Region INT64 NOT NULL,
	   Name STRING(MAX),
	   Shard INT64 AS (MOD(Region, 16)) STORED,
	   Created TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp=true),
	   Score INT64 NOT NULL DEFAULT (0),
	   Tags ARRAY<STRING(20)>,
	 ) PRIMARY KEY (Region DESC, UserId)`,
	`CREATE TABLE Orders (
	   Region INT64 NOT NULL,
	   UserId STRING(36) NOT NULL,
	   OrderId INT64 NOT NULL,
	   Total NUMERIC,
	 ) PRIMARY KEY (Region DESC, UserId, OrderId),
	   INTERLEAVE IN PARENT Users ON DELETE CASCADE`,
}

func TestReadTable(t *testing.T) {
	c := emulator.TestDB(t, schemaDDL...)
	ctx := t.Context()
	users, err := spannerdb.ReadTable(ctx, c, "users") // names are case-insensitive
	if err != nil {
		t.Fatal(err)
	}
	want := &spannerdb.Table{
		Name: "Users",
		Columns: []spannerdb.Column{
			{Name: "UserId", Type: "STRING(36)", NotNull: true},
			{Name: "Region", Type: "INT64", NotNull: true},
			{Name: "Name", Type: "STRING(MAX)"},
			{Name: "Shard", Type: "INT64", Generated: true, Expression: "MOD(Region, 16)", Stored: true},
			{Name: "Created", Type: "TIMESTAMP", NotNull: true, AllowCommitTimestamp: true},
			{Name: "Score", Type: "INT64", NotNull: true, Default: "0"},
			{Name: "Tags", Type: "ARRAY<STRING(20)>"},
		},
		Key: rewrite.KeySchema{Table: "Users", Columns: []rewrite.Column{
			{Name: "Region", Type: rewrite.TypeInt64, Desc: true},
			{Name: "UserId", Type: rewrite.TypeString, MaxLen: 36},
		}},
	}
	if !reflect.DeepEqual(users, want) {
		t.Errorf("ReadTable(Users) =\n%+v\nwant\n%+v", users, want)
	}
	orders, err := spannerdb.ReadTable(ctx, c, "Orders")
	if err != nil {
		t.Fatal(err)
	}
	if orders.Parent != "Users" || !orders.OnDeleteCascade || len(orders.Key.Columns) != 3 || !orders.Key.Columns[0].Desc {
		t.Errorf("Orders: parent %q cascade %v key %v", orders.Parent, orders.OnDeleteCascade, orders.Key)
	}

	_, err = spannerdb.ReadTable(ctx, c, "Nope")
	if !errors.Is(err, spannerdb.ErrTableNotFound) || !strings.Contains(err.Error(), "table Nope not found in database projects/") {
		t.Errorf("missing table: %v", err)
	}

	// CreateDDL reproduces both tables in a fresh database.
	ddl := []string{users.CreateDDL(users.Name), orders.CreateDDL(orders.Name)}
	c2 := emulator.TestDB(t, ddl...)
	for _, orig := range []*spannerdb.Table{users, orders} {
		again, err := spannerdb.ReadTable(ctx, c2, orig.Name)
		if err != nil {
			t.Fatalf("%v\nDDL:\n%s", err, strings.Join(ddl, "\n"))
		}
		if !reflect.DeepEqual(again, orig) {
			t.Errorf("table %s from its CreateDDL =\n%+v\nwant\n%+v\nDDL:\n%s", orig.Name, again, orig, orig.CreateDDL(orig.Name))
		}
	}
}

func TestCreateDDL(t *testing.T) {
	tbl := &spannerdb.Table{
		Name: "Orders", Parent: "Users", OnDeleteCascade: true,
		Columns: []spannerdb.Column{
			{Name: "Region", Type: "INT64", NotNull: true},
			{Name: "Order", Type: "STRING(36)", NotNull: true},
			{Name: "At", Type: "TIMESTAMP", AllowCommitTimestamp: true},
			{Name: "N", Type: "INT64", NotNull: true, Default: "0"},
			{Name: "G", Type: "INT64", Generated: true, Expression: "MOD(Region, 4)", Stored: true},
		},
		Key: rewrite.KeySchema{Table: "Orders", Columns: []rewrite.Column{{Name: "Region", Type: rewrite.TypeInt64}, {Name: "Order", Type: rewrite.TypeString, Desc: true}}},
	}
	want := "CREATE TABLE Orders2 (\n" +
		"  Region INT64 NOT NULL,\n" +
		"  `Order` STRING(36) NOT NULL,\n" +
		"  `At` TIMESTAMP OPTIONS (allow_commit_timestamp=true),\n" +
		"  N INT64 NOT NULL DEFAULT (0),\n" +
		"  G INT64 AS (MOD(Region, 4)) STORED\n" +
		") PRIMARY KEY (Region, `Order` DESC),\n" +
		"  INTERLEAVE IN PARENT Users ON DELETE CASCADE"
	if got := tbl.CreateDDL("Orders2"); got != want {
		t.Errorf("CreateDDL =\n%s\nwant\n%s", got, want)
	}
}

func TestWithKey(t *testing.T) {
	src := &spannerdb.Table{
		Name: "Logs",
		Columns: []spannerdb.Column{
			{Name: "LastAccess", Type: "TIMESTAMP", NotNull: true},
			{Name: "UserId", Type: "STRING(36)", NotNull: true},
			{Name: "Bytes", Type: "INT64"},
		},
		Key: rewrite.KeySchema{Table: "Logs", Columns: []rewrite.Column{{Name: "LastAccess", Type: rewrite.TypeTimestamp}, {Name: "UserId", Type: rewrite.TypeString, MaxLen: 36}}},
	}
	names := func(t *spannerdb.Table) string {
		var s []string
		for _, c := range t.Columns {
			n := c.Name + " " + c.Type
			if c.NotNull {
				n += " NOT NULL"
			}
			s = append(s, n)
		}
		return strings.Join(s, ", ")
	}

	// shard: a new ShardId column leads the key.
	shardKey, _ := rewrite.ParseKeySchema("Logs", "ShardId INT64, LastAccess TIMESTAMP, UserId STRING(36)")
	got := src.WithKey(shardKey, nil)
	if want := "ShardId INT64 NOT NULL, LastAccess TIMESTAMP NOT NULL, UserId STRING(36) NOT NULL, Bytes INT64"; names(got) != want {
		t.Errorf("shard: columns %s, want %s", names(got), want)
	}
	if !strings.Contains(got.CreateDDL("Logs2"), ") PRIMARY KEY (ShardId, LastAccess, UserId)") {
		t.Errorf("shard DDL:\n%s", got.CreateDDL("Logs2"))
	}

	// uuid: the old key columns stay as plain columns; an extra column
	// keeps the original key.
	uuidKey, _ := rewrite.ParseKeySchema("Logs", "Id STRING(36)")
	got = src.WithKey(uuidKey, []spannerdb.Column{{Name: "OriginalKey", Type: "STRING(MAX)"}, {Name: "Bytes", Type: "STRING(MAX)"}})
	if want := "Id STRING(36) NOT NULL, LastAccess TIMESTAMP NOT NULL, UserId STRING(36) NOT NULL, Bytes INT64, OriginalKey STRING(MAX)"; names(got) != want {
		t.Errorf("uuid: columns %s, want %s", names(got), want)
	}

	// The DDL is accepted by Spanner and the table takes a converted row.
	c := emulator.TestDB(t, src.CreateDDL("Logs"), got.CreateDDL("LogsByUUID"))
	tgt, err := spannerdb.ReadTable(t.Context(), c, "LogsByUUID")
	if err != nil {
		t.Fatal(err)
	}
	rec := record.Record{Table: "LogsByUUID", Fields: []record.Field{
		{Name: "Id", Value: record.String("6f1c2a3e-4b5d-5e6f-8a7b-9c0d1e2f3a4b")},
		{Name: "LastAccess", Value: record.String("2024-01-31T12:00:00Z")},
		{Name: "UserId", Value: record.String("u1")},
	}}
	m, err := spannerdb.MutationFor(&rec, tgt, storewrite.ModeInsert)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(t.Context(), []*spanner.Mutation{m}); err != nil {
		t.Fatal(err)
	}
}

// TestEmulatorAllTypes writes 300 rows with a value of every type (edge
// values, NULLs, NULL elements, empty arrays) and reads them back equal.
func TestEmulatorAllTypes(t *testing.T) {
	c := emulator.TestDB(t, spannerdbtest.AllTypesDDL("T"))
	ctx := t.Context()
	tbl, err := spannerdb.ReadTable(ctx, c, "T")
	if err != nil {
		t.Fatal(err)
	}
	recs := spannerdbtest.Rows("T", 300)
	if err := spannerdbtest.Write(ctx, c, tbl, recs); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, col := range tbl.Columns {
		cols = append(cols, col.Name)
	}
	got, err := spannerdbtest.ReadAll(ctx, c, tbl, cols...)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("read %d rows, want %d", len(got), len(recs))
	}
	for i := range recs {
		want, err := spannerdb.Normalize(&recs[i], tbl)
		if err != nil {
			t.Fatal(err)
		}
		want.Fields = append(want.Fields, record.Field{Name: "G", Value: record.Int(int64(i % 7))})
		if !got[i].Equal(&want) {
			t.Errorf("row %d: not byte-equal: %v vs %v", i, got[i].Fields, want.Fields)
		}
		if d := spannerdbtest.Diff(&got[i], &want); d != "" {
			t.Errorf("row %d: %s", i, d)
		}
	}
}
