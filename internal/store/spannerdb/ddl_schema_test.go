package spannerdb_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
)

func TestParseSchemaDDLIndexesAndChecks(t *testing.T) {
	ddl := `
CREATE TABLE Events (
  ShardId INT64 NOT NULL AS (MOD(FARM_FINGERPRINT(UserId), 100)) STORED,
  UserId STRING(36) NOT NULL,
  At TIMESTAMP NOT NULL,
  Kind STRING(MAX),
  CONSTRAINT ShardRange CHECK (ShardId >= 0 AND ShardId < 100),
  CHECK (Kind IN ('a', 'b')),
) PRIMARY KEY (ShardId, UserId, At DESC);
-- an index on the events
CREATE UNIQUE NULL_FILTERED INDEX IF NOT EXISTS EventsByAt ON Events(At DESC, UserId) STORING (Kind, ` + "`Order`" + `);
CREATE INDEX ` + "`ByKind`" + ` ON Events (Kind), INTERLEAVE IN Users;
CREATE SEARCH INDEX EventsText ON Events(Tokens);
CREATE VIEW V SQL SECURITY INVOKER AS SELECT 1 AS X;
`
	s, err := spannerdb.ParseSchema(ddl)
	if err != nil {
		t.Fatal(err)
	}
	want := []spannerdb.Index{
		{Name: "EventsByAt", Table: "Events", Unique: true, NullFiltered: true,
			Columns: []spannerdb.IndexColumn{{Name: "At", Desc: true}, {Name: "UserId"}},
			Storing: []string{"Kind", "Order"}},
		{Name: "ByKind", Table: "Events", Columns: []spannerdb.IndexColumn{{Name: "Kind"}}, Interleave: "Users"},
	}
	if !reflect.DeepEqual(s.Indexes, want) {
		t.Errorf("indexes\n got %+v\nwant %+v", s.Indexes, want)
	}
	wantChecks := map[string][]string{"events": {"ShardId >= 0 AND ShardId < 100", "Kind IN ('a', 'b')"}}
	if !reflect.DeepEqual(s.Checks, wantChecks) {
		t.Errorf("checks %q, want %q", s.Checks, wantChecks)
	}
	tables, err := spannerdb.ParseDDL(ddl)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Tables, tables) {
		t.Errorf("tables differ from ParseDDL's:\n%+v\n%+v", s.Tables, tables)
	}
}

func TestParseSchemaDDLAsGcloudPrintsIt(t *testing.T) {
	text, err := os.ReadFile("testdata/gcloud-ddl.sql")
	if err != nil {
		t.Fatal(err)
	}
	s, err := spannerdb.ParseSchema(string(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []spannerdb.Index{{Name: "SingersByFirstLastName", Table: "Singers",
		Columns: []spannerdb.IndexColumn{{Name: "FirstName"}, {Name: "LastName"}}}}
	if len(s.Tables) != 3 || !reflect.DeepEqual(s.Indexes, want) || len(s.Checks) != 0 {
		t.Errorf("ParseSchema: %d tables, indexes %+v, checks %v", len(s.Tables), s.Indexes, s.Checks)
	}
}

func TestParseSchemaDDLErrors(t *testing.T) {
	for ddl, want := range map[string]string{
		"CREATE TABLE T (A INT64) PRIMARY KEY (A);\nCREATE INDEX I ON T;": "statement 2: CREATE INDEX without key columns",
		"CREATE INDEX I ON T ();":                                            "index I: no key columns",
		"CREATE INDEX ON T (A);":                                             `want "Name ON Table (columns)"`,
		"CREATE INDEX I ON T (A), INTERLEAVE IN":                             "index I: INTERLEAVE IN without a table",
		"CREATE INDEX I ON T (A":                                             "index I: unbalanced parentheses",
		"CREATE TABLE T (A INT64) PRIMARY KEY (B);\nCREATE INDEX I ON T (A)": "key column B",
	} {
		_, err := spannerdb.ParseSchema(ddl)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSchema(%q) = %v, want an error containing %q", ddl, err, want)
		}
	}
}
