package sink_test

import (
	"fmt"
	"path"
	"strings"
	"testing"

	"cloud.google.com/go/spanner"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/store/spannerdb/spannerdbtest"
	"github.com/rekeyio/rekey/internal/testkit/beamtest"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms/sink"
)

// sinkDB creates a database with ddl and returns a client on it and a
// sink config for table.
func sinkDB(t *testing.T, table string, ddl ...string) (*spanner.Client, sink.SpannerSinkConfig) {
	t.Helper()
	c, dbPath := emulator.TestDBPath(t, ddl...)
	return c, sink.SpannerSinkConfig{Project: emulator.SpannerProject(), Instance: emulator.SpannerInstance(), Database: path.Base(dbPath), Table: table}
}

// write runs the sink over recs (in batches of 500) on runner and returns
// the dead letters and metrics.
func write(t *testing.T, runner string, cfg sink.SpannerSinkConfig, recs []record.Record) ([]string, beamtest.Metrics) {
	t.Helper()
	var batches []record.Batch
	for i := 0; i < len(recs); i += 500 {
		batches = append(batches, record.Batch{Recs: recs[i:min(i+500, len(recs))]})
	}
	dead := beamtest.NewCollector(t)
	m := beamtest.Run(t, runner, func(s beam.Scope) {
		dead.Collect(s, sink.Spanner(s, cfg, beam.CreateList(s, batches)))
	})
	return dead.Strings(), m
}

func count(t *testing.T, c *spanner.Client, table string) int64 {
	t.Helper()
	var n int64
	err := c.Single().Query(t.Context(), spanner.Statement{SQL: "SELECT COUNT(*) FROM " + table}).Do(func(r *spanner.Row) error { return r.Columns(&n) })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// deadLetters parses dead-letter lines, checking each has stage "write",
// and returns them by the record's Id.
func deadLetters(t *testing.T, lines []string) map[int64]record.DeadLetter {
	t.Helper()
	out := map[int64]record.DeadLetter{}
	for _, l := range lines {
		d, rec, err := record.ParseDeadLetter([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		if d.Stage != record.StageWrite || rec == nil || !strings.HasPrefix(d.Source, "spanner:projects/") {
			t.Errorf("dead letter %s: want stage write, a source and the record", l)
			continue
		}
		id, _ := rec.Get("Id")
		out[id.Int] = d
	}
	return out
}

// TestSpannerSinkWritesAndConverges writes 5,000 records with a value of
// every type (upsert), reads the table back equal to them, runs the same
// write again and finds the same 5,000 rows.
func TestSpannerSinkWritesAndConverges(t *testing.T) {
	const n = 5000
	recs := spannerdbtest.Rows("T", n)
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			c, cfg := sinkDB(t, "T", spannerdbtest.AllTypesDDL("T"))
			tbl, err := spannerdb.ReadTable(t.Context(), c, "T")
			if err != nil {
				t.Fatal(err)
			}
			for run := 1; run <= 2; run++ {
				dead, m := write(t, runner, cfg, recs)
				if len(dead) != 0 || m["rekey/written"] != n || m["rekey/dead_lettered"] != 0 {
					t.Fatalf("run %d: written %d, %d dead letters (%v)", run, m["rekey/written"], len(dead), dead[:min(len(dead), 1)])
				}
				t.Logf("run %d: %d commits, cells per commit max %d, rows per commit max %d", run, m["rekey/spanner_commits"], m["rekey/spanner_commit_cells.max"], m["rekey/spanner_commit_rows.max"])
				if got := count(t, c, "T"); got != n {
					t.Fatalf("run %d: table has %d rows, want %d", run, got, n)
				}
				var cols []string
				for _, col := range tbl.Columns {
					if !col.Generated {
						cols = append(cols, col.Name)
					}
				}
				got, err := spannerdbtest.ReadAll(t.Context(), c, tbl, cols...)
				if err != nil {
					t.Fatal(err)
				}
				for i := range recs {
					want, err := spannerdb.Normalize(&recs[i], tbl)
					if err != nil {
						t.Fatal(err)
					}
					if !got[i].Equal(&want) {
						t.Fatalf("run %d: row %d: %s", run, i, spannerdbtest.Diff(&got[i], &want))
					}
				}
			}
		})
	}
}

// TestSpannerSinkDeadLettersBadRecords: records that break the schema are
// dead-lettered with the reason and the others land; those the sink can
// tell from the schema are refused before the commit, a unique index
// violation by Spanner at commit time (and isolated by retrying halves).
func TestSpannerSinkDeadLettersBadRecords(t *testing.T) {
	ddl := []string{
		`CREATE TABLE V (Id INT64 NOT NULL, Name STRING(5) NOT NULL, Note STRING(MAX)) PRIMARY KEY (Id)`,
		`CREATE UNIQUE INDEX VByNote ON V (Note)`,
	}
	var recs []record.Record
	want := map[int64]string{
		10: "column Name of table V is NOT NULL, but the record has no value for it",
		20: "column Name: string of 7 characters is longer than STRING(5) allows",
		30: "column Nope not in table V",
		40: "column Name of table V is NOT NULL, but the value is NULL",
		51: "AlreadyExists", // same Note as row 50: the unique index refuses it
	}
	for i := range 100 {
		r := record.Record{Table: "V", Fields: []record.Field{{Name: "Id", Value: record.Int(int64(i))}, {Name: "Name", Value: record.String("n" + fmt.Sprint(i))}, {Name: "Note", Value: record.String(fmt.Sprint("note", i))}}}
		switch i {
		case 10:
			r.Fields = append(r.Fields[:1], r.Fields[2])
		case 20:
			r.Fields[1].Value = record.String("toolong")
		case 30:
			r.Fields = append(r.Fields, record.Field{Name: "Nope", Value: record.Int(1)})
		case 40:
			r.Fields[1].Value = record.Value{}
		case 50, 51:
			r.Fields[2].Value = record.String("duplicate")
		}
		recs = append(recs, r)
	}
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			c, cfg := sinkDB(t, "V", ddl...)
			lines, m := write(t, runner, cfg, recs)
			dead := deadLetters(t, lines)
			if len(dead) != len(want) {
				t.Errorf("%d dead letters, want %d: %v", len(dead), len(want), lines)
			}
			for id, reason := range want {
				if d, ok := dead[id]; !ok || !strings.Contains(d.Reason, reason) {
					t.Errorf("row %d: dead letter %+v, want reason containing %q", id, d, reason)
				}
			}
			if got := count(t, c, "V"); got != 95 || m["rekey/written"] != 95 || m["rekey/dead_lettered"] != 5 {
				t.Errorf("%d rows in the table, written %d, dead-lettered %d; want 95, 95, 5", got, m["rekey/written"], m["rekey/dead_lettered"])
			}
			if m["rekey/split"] == 0 {
				t.Error("the commit with the index violation was not split")
			}
		})
	}
}

// TestSpannerSinkRejectsOrphans writes child rows of an interleaved table:
// the emulator refuses those whose parent row does not exist, and they are
// dead-lettered with Spanner's reason while the other children land.
func TestSpannerSinkRejectsOrphans(t *testing.T) {
	ddl := []string{
		`CREATE TABLE P (Pid INT64 NOT NULL) PRIMARY KEY (Pid)`,
		`CREATE TABLE C (Pid INT64 NOT NULL, Id INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (Pid, Id), INTERLEAVE IN PARENT P ON DELETE CASCADE`,
	}
	var recs []record.Record
	orphans := 0
	for i := range 300 {
		pid := int64(i%10 + 1)
		if i%40 == 7 {
			pid = 1000 + int64(i) // no such parent
			orphans++
		}
		recs = append(recs, record.Record{Table: "C", Fields: []record.Field{{Name: "Pid", Value: record.Int(pid)}, {Name: "Id", Value: record.Int(int64(i))}, {Name: "V", Value: record.String("v")}}})
	}
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			c, cfg := sinkDB(t, "C", ddl...)
			var ms []*spanner.Mutation
			for p := int64(1); p <= 10; p++ {
				ms = append(ms, spanner.Insert("P", []string{"Pid"}, []any{p}))
			}
			if _, err := c.Apply(t.Context(), ms); err != nil {
				t.Fatal(err)
			}
			lines, m := write(t, runner, cfg, recs)
			dead := deadLetters(t, lines)
			if len(dead) != orphans {
				t.Errorf("%d dead letters, want %d orphans", len(dead), orphans)
			}
			for id, d := range dead {
				if id%40 != 7 || !strings.Contains(d.Reason, "NotFound") || !strings.Contains(d.Reason, "parent") {
					t.Errorf("row %d dead-lettered: %s", id, d.Reason)
				}
			}
			t.Logf("orphan reason: %s", dead[7].Reason)
			if got := count(t, c, "C"); got != int64(300-orphans) || m["rekey/written"] != got {
				t.Errorf("%d child rows stored, %d counted written; want %d", got, m["rekey/written"], 300-orphans)
			}
		})
	}
}

// TestSpannerSinkBatchLimits writes 1,000 rows of a 50-column table and
// checks through the commit metrics that every commit stays within the
// configured cells, bytes and rows.
func TestSpannerSinkBatchLimits(t *testing.T) {
	cols := []string{"Id INT64 NOT NULL"}
	for i := 1; i < 50; i++ {
		cols = append(cols, fmt.Sprintf("C%02d STRING(MAX)", i))
	}
	ddl := "CREATE TABLE W (" + strings.Join(cols, ", ") + ") PRIMARY KEY (Id)"
	const n = 1000
	var recs []record.Record
	for i := range n {
		r := record.Record{Table: "W", Fields: []record.Field{{Name: "Id", Value: record.Int(int64(i))}}}
		for j := 1; j < 50; j++ {
			r.Fields = append(r.Fields, record.Field{Name: fmt.Sprintf("C%02d", j), Value: record.String("0123456789")})
		}
		recs = append(recs, r) // 50 cells, 8 + 49*10 = 498 bytes
	}
	for _, tc := range []struct {
		name                   string
		mutations, bytes, rows int
		maxRows                int64 // rows a commit can hold under the bounds
	}{
		{"defaults", 0, 0, 0, 100}, // 5000 cells / 50
		{"cells", 1000, 0, 0, 20},  // 1000 / 50
		{"bytes", 0, 5000, 0, 10},  // 5000 / 498
		{"rows", 0, 0, 7, 7},       //
		{"wide rows", 30, 0, 0, 1}, // a 50-cell row over the bound goes alone
	} {
		for _, runner := range beamtest.Runners {
			t.Run(tc.name+"/"+runner, func(t *testing.T) {
				c, cfg := sinkDB(t, "W", ddl)
				cfg.MaxMutations, cfg.MaxBytes, cfg.MaxRows = tc.mutations, tc.bytes, tc.rows
				dead, m := write(t, runner, cfg, recs)
				if len(dead) != 0 || m["rekey/written"] != n || count(t, c, "W") != n {
					t.Fatalf("written %d, %d dead letters", m["rekey/written"], len(dead))
				}
				eff := cfg.WithDefaults()
				cellCap := max(int64(eff.MaxMutations), 50)
				t.Logf("%d commits; cells max %d, bytes max %d, rows max %d", m["rekey/spanner_commits"], m["rekey/spanner_commit_cells.max"], m["rekey/spanner_commit_bytes.max"], m["rekey/spanner_commit_rows.max"])
				if got := m["rekey/spanner_commit_cells.max"]; got > cellCap {
					t.Errorf("a commit of %d cells, over %d", got, cellCap)
				}
				if got := m["rekey/spanner_commit_bytes.max"]; got > max(int64(eff.MaxBytes), 498) {
					t.Errorf("a commit of %d bytes, over %d", got, eff.MaxBytes)
				}
				if got := m["rekey/spanner_commit_rows.max"]; got != tc.maxRows {
					t.Errorf("the largest commit has %d rows, want %d", got, tc.maxRows)
				}
				if got, least := m["rekey/spanner_commits"], int64(n)/tc.maxRows; got < least || m["rekey/spanner_commit_rows.sum"] != n {
					t.Errorf("%d commits of %d rows in all, want at least %d commits of %d rows", got, m["rekey/spanner_commit_rows.sum"], least, n)
				}
			})
		}
	}
}

// TestSpannerSinkInsertMode: an insert-mode re-run finds its own rows and
// counts them written; a row stored with other values is refused with
// AlreadyExists.
func TestSpannerSinkInsertMode(t *testing.T) {
	recs := spannerdbtest.Rows("T", 200)
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			c, cfg := sinkDB(t, "T", spannerdbtest.AllTypesDDL("T"))
			cfg.Mode = "insert"
			dead, m := write(t, runner, cfg, recs)
			if len(dead) != 0 || m["rekey/written"] != 200 || m["rekey/spanner_already_written"] != 0 {
				t.Fatalf("first run: written %d, %d dead letters: %v", m["rekey/written"], len(dead), dead)
			}
			changed := append([]record.Record(nil), recs...)
			for _, i := range []int{3, 77, 150} {
				r := spannerdbtest.Row("T", i)
				r.Set("S", record.String("changed"))
				changed[i] = r
			}
			lines, m := write(t, runner, cfg, changed)
			dl := deadLetters(t, lines)
			if len(dl) != 3 || m["rekey/spanner_already_written"] != 197 || m["rekey/written"] != 197 {
				t.Errorf("re-run: %d dead letters, %d already written, %d written; want 3, 197, 197", len(dl), m["rekey/spanner_already_written"], m["rekey/written"])
			}
			for _, i := range []int64{3, 77, 150} {
				if !strings.Contains(dl[i].Reason, "AlreadyExists") {
					t.Errorf("row %d: dead letter %+v, want AlreadyExists", i, dl[i])
				}
			}
			if got := count(t, c, "T"); got != 200 {
				t.Errorf("%d rows, want 200", got)
			}
		})
	}
}

func TestSpannerSinkConfigValidate(t *testing.T) {
	ok := sink.SpannerSinkConfig{Project: "p", Instance: "i", Database: "d", Table: "T"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if d := ok.WithDefaults(); d.Mode != "upsert" || d.MaxMutations != spannerdb.DefaultMaxMutations || d.MaxBytes != spannerdb.DefaultMaxBytes || d.MaxRows != spannerdb.DefaultMaxRows {
		t.Errorf("defaults %+v", d)
	}
	bad := ok
	bad.Mode, bad.MaxMutations, bad.MaxBytes, bad.Table = "replace", 80_001, -1, ""
	err := bad.Validate()
	for _, want := range []string{`mode "replace"`, "max_mutations 80001: want 1..80000", "max_bytes -1", "table are required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
	del := ok
	del.Mode = storewrite.ModeDelete
	if err := del.Validate(); err != nil {
		t.Errorf("delete mode: %v", err)
	}
	del.Backfill = &phases.Backfill{Migration: "m"}
	if err := del.Validate(); err == nil || !strings.Contains(err.Error(), "cannot be in delete mode") {
		t.Errorf("a backfill in delete mode: Validate() = %v, want it refused", err)
	}
}
