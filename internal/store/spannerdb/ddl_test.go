package spannerdb_test

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
)

// testDDL is read by ReadTable from the emulator and by ParseDDL from the
// text: both must give the same tables.
var testDDL = []string{
	`CREATE TABLE Singers (
  SingerId INT64 NOT NULL,
  FirstName STRING(1024),
  LastName STRING(1024),
  SingerInfo BYTES(MAX),
  FullName STRING(2048) AS (CONCAT(FirstName, " ", LastName)) STORED,
  Tags ARRAY<STRING(MAX)>,
  Updated TIMESTAMP OPTIONS (allow_commit_timestamp = true),
  Score FLOAT64 DEFAULT (0.5),
  Born DATE,
  Cash NUMERIC,
  Info JSON,
) PRIMARY KEY (SingerId)`,
	`CREATE TABLE Albums (
  SingerId INT64 NOT NULL,
  AlbumId STRING(36) NOT NULL,
  AlbumTitle STRING(MAX),
) PRIMARY KEY (SingerId, AlbumId DESC),
  INTERLEAVE IN PARENT Singers ON DELETE CASCADE`,
}

func TestParseDDLMatchesTheEmulator(t *testing.T) {
	c := emulator.TestDB(t, testDDL...)
	parsed, err := spannerdb.ParseDDL(strings.Join(testDDL, ";\n\n") + ";")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Singers", "Albums"} {
		want, err := spannerdb.ReadTable(context.Background(), c, name)
		if err != nil {
			t.Fatal(err)
		}
		got := parsed[strings.ToLower(name)]
		if got == nil {
			t.Fatalf("ParseDDL found no table %s (tables: %v)", name, parsed)
		}
		// The emulator renders expressions in its own form; compare the
		// rest exactly.
		for i := range want.Columns {
			if i < len(got.Columns) && got.Columns[i].Expression != "" && want.Columns[i].Expression != "" {
				got.Columns[i].Expression = want.Columns[i].Expression
			}
			if i < len(got.Columns) && got.Columns[i].Default != "" && want.Columns[i].Default != "" {
				got.Columns[i].Default = want.Columns[i].Default
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\nParseDDL  %+v\nReadTable %+v", name, got, want)
		}
	}
}

func TestParseDDLAsGcloudPrintsIt(t *testing.T) {
	text, err := os.ReadFile("testdata/gcloud-ddl.sql")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := spannerdb.ParseDDL(string(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 3 {
		t.Fatalf("%d tables, want 3 (the index is not one): %v", len(tables), tables)
	}
	s := tables["singers"]
	if got := s.Key.Text(); got != "SingerId INT64" {
		t.Errorf("Singers key %q", got)
	}
	if c := s.Column("FullName"); c == nil || !c.Generated || !c.Stored || c.Type != "STRING(2048)" {
		t.Errorf("FullName %+v", c)
	}
	if c := s.Column("Updated"); c == nil || !c.AllowCommitTimestamp {
		t.Errorf("Updated %+v", c)
	}
	if c := s.Column("Tags"); c == nil || c.Type != "ARRAY<STRING(MAX)>" {
		t.Errorf("Tags %+v", c)
	}
	if c := s.Column("Score"); c == nil || c.Default != "0.0" {
		t.Errorf("Score %+v", c)
	}
	a := tables["albums"]
	if a.Parent != "Singers" || !a.OnDeleteCascade || a.Key.Text() != "SingerId INT64, AlbumId INT64 DESC" || len(a.Columns) != 3 {
		t.Errorf("Albums %+v", a)
	}
	if o := tables["order"]; o == nil || o.Name != "Order" || o.Key.Text() != "Id STRING(36)" {
		t.Errorf("Order %+v", o)
	}
}

// A table rendered by CreateDDL parses back to itself.
func TestParseDDLReadsCreateDDL(t *testing.T) {
	tables, err := spannerdb.ParseDDL(strings.Join(testDDL, ";\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range tables {
		back, err := spannerdb.ParseDDL(want.CreateDDL(want.Name))
		if err != nil {
			t.Fatal(err)
		}
		if got := back[strings.ToLower(want.Name)]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\nback %+v\nwant %+v", want.Name, got, want)
		}
	}
}
