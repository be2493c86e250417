package source_test

import (
	"path"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/store/spannerdb/spannerdbtest"
	"github.com/rekeyio/rekey/internal/testkit/beamtest"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
	"github.com/rekeyio/rekey/transforms"
	"github.com/rekeyio/rekey/transforms/source"
)

const sourceRows = 5000

// allTypesSource creates a database with spannerdbtest's all-types table T
// holding n rows, and returns the source config, the table and the
// records as a direct query reads them (key order).
func allTypesSource(t *testing.T, n int) (source.SpannerConfig, *spannerdb.Table, []record.Record) {
	t.Helper()
	c, dbPath := emulator.TestDBPath(t, spannerdbtest.AllTypesDDL("T"))
	ctx := t.Context()
	tbl, err := spannerdb.ReadTable(ctx, c, "T")
	if err != nil {
		t.Fatal(err)
	}
	if err := spannerdbtest.Write(ctx, c, tbl, spannerdbtest.Rows("T", n)); err != nil {
		t.Fatal(err)
	}
	cfg := source.SpannerConfig{Project: emulator.SpannerProject(), Instance: emulator.SpannerInstance(), Database: path.Base(dbPath), Table: "T"}
	var cols []string
	for _, col := range tbl.Columns {
		if !col.Generated {
			cols = append(cols, col.Name)
		}
	}
	direct, err := spannerdbtest.ReadAll(ctx, c, tbl, cols...)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, tbl, direct
}

// readAll runs the source on runner and returns its records by Id, the
// dead letters and the metrics; it fails on a batch over BatchSize or a
// record read twice.
func readAll(t *testing.T, runner string, cfg source.SpannerConfig) (map[int64]record.Record, []string, beamtest.Metrics) {
	t.Helper()
	batches, dead, m := runSource(t, runner, func(s beam.Scope) (beam.PCollection, beam.PCollection) { return source.Spanner(s, cfg) })
	got := map[int64]record.Record{}
	for _, b := range batches.Bytes() {
		recs, err := record.DecodeBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 || len(recs) > transforms.BatchSize {
			t.Errorf("batch of %d records, want 1..%d", len(recs), transforms.BatchSize)
		}
		for _, r := range recs {
			id, _ := r.Get("Id")
			if _, dup := got[id.Int]; dup {
				t.Errorf("row Id=%d read twice", id.Int)
			}
			got[id.Int] = r
		}
	}
	return got, dead.Strings(), m
}

// TestSpannerReadsEveryRowOnce reads a 5,000-row table with a column of
// every type through the source and expects each row exactly once,
// byte-equal to a direct query's result and to the rows written, from
// several partitions, with the transaction cleaned up once.
func TestSpannerReadsEveryRowOnce(t *testing.T) {
	cfg, tbl, direct := allTypesSource(t, sourceRows)
	if len(direct) != sourceRows {
		t.Fatalf("direct query read %d rows", len(direct))
	}
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			got, dead, m := readAll(t, runner, cfg)
			t.Logf("%s: %d partitions; metrics %v", runner, m["rekey/spanner_read_partitions"], m)
			if len(dead) != 0 {
				t.Errorf("%d dead letters, first %s", len(dead), dead[0])
			}
			if len(got) != sourceRows || m["rekey/read"] != sourceRows {
				t.Fatalf("read %d distinct rows (counter %d), want %d", len(got), m["rekey/read"], sourceRows)
			}
			if p := m["rekey/spanner_read_partitions"]; p < 2 {
				t.Errorf("%d partitions, want several", p)
			}
			if c := m["rekey/spanner_read_txn_cleanups"]; c != 1 {
				t.Errorf("transaction cleaned up %d times, want once", c)
			}
			for i, want := range direct {
				g := got[int64(i)]
				if !g.Equal(&want) {
					t.Fatalf("row %d differs from the direct query: %s", i, spannerdbtest.Diff(&g, &want))
				}
				fixture := spannerdbtest.Row("T", i)
				norm, err := spannerdb.Normalize(&fixture, tbl)
				if err != nil {
					t.Fatal(err)
				}
				if !g.Equal(&norm) {
					t.Fatalf("row %d differs from the row written: %s", i, spannerdbtest.Diff(&g, &norm))
				}
			}
		})
	}
}

// TestSpannerProjectionAndFilter reads three columns of the rows a filter
// selects.
func TestSpannerProjectionAndFilter(t *testing.T) {
	cfg, _, direct := allTypesSource(t, 1000)
	cfg.Table = "t" // table names are case-insensitive
	cfg.Columns = []string{"S5", "id", "I"}
	cfg.Filter = "MOD(Id, 10) = 3 AND I IS NOT NULL"
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			got, dead, m := readAll(t, runner, cfg)
			want := 0
			for i, d := range direct {
				iv, _ := d.Get("I")
				if i%10 != 3 || iv.Kind == record.KindNull {
					if _, ok := got[int64(i)]; ok {
						t.Errorf("row %d does not match the filter but was read", i)
					}
					continue
				}
				want++
				g, ok := got[int64(i)]
				if !ok {
					t.Errorf("row %d matches the filter but was not read", i)
					continue
				}
				s5, _ := d.Get("S5")
				exp := record.Record{Table: "T", Fields: []record.Field{{Name: "S5", Value: s5}, {Name: "Id", Value: record.Int(int64(i))}, {Name: "I", Value: iv}}}
				if !g.Equal(&exp) {
					t.Errorf("row %d: got %v, want %v", i, g.Fields, exp.Fields)
				}
			}
			if len(got) != want || m["rekey/read"] != int64(want) || len(dead) != 0 {
				t.Errorf("read %d rows (counter %d, %d dead letters), want %d", len(got), m["rekey/read"], len(dead), want)
			}
		})
	}
}

// TestSpannerRefusesBadConfig: a projection without the key and a missing
// table fail the pipeline with a clear message.
func TestSpannerRefusesBadConfig(t *testing.T) {
	cfg, _, _ := allTypesSource(t, 3)
	for name, tc := range map[string]struct {
		change func(*source.SpannerConfig)
		want   string
	}{
		"no key":         {func(c *source.SpannerConfig) { c.Columns = []string{"S"} }, "leave out key column Id of table T"},
		"unknown column": {func(c *source.SpannerConfig) { c.Columns = []string{"Id", "Nope"} }, "column Nope not in table T"},
		"no table":       {func(c *source.SpannerConfig) { c.Table = "Missing" }, "table Missing not found in database projects/"},
	} {
		t.Run(name, func(t *testing.T) {
			c := cfg
			tc.change(&c)
			_, err := beamtest.RunErr(t.Context(), "direct", func(s beam.Scope) { source.Spanner(s, c) })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestSelectSQL(t *testing.T) {
	tbl := &spannerdb.Table{Name: "Order", Columns: []spannerdb.Column{
		{Name: "Id", Type: "INT64", NotNull: true},
		{Name: "Select", Type: "STRING(MAX)"},
		{Name: "G", Type: "INT64", Generated: true, Expression: "MOD(Id, 2)"},
		{Name: "KG", Type: "INT64", Generated: true, Expression: "MOD(Id, 3)", Stored: true},
	}}
	tbl.Key, _ = rewrite.ParseKeySchema("Order", "KG INT64, Id INT64")
	for _, tc := range []struct {
		cfg  source.SpannerConfig
		want string
	}{
		// Generated columns are left out unless they are in the key.
		{source.SpannerConfig{}, "SELECT Id, `Select`, KG FROM `Order`"},
		{source.SpannerConfig{Columns: []string{"kg", "ID", "g"}, Filter: " Id > 3 OR G = 1 "}, "SELECT KG, Id, G FROM `Order` WHERE (Id > 3 OR G = 1)"},
	} {
		got, err := source.SelectSQL(tbl, tc.cfg)
		if err != nil || got != tc.want {
			t.Errorf("SelectSQL(%+v) = %q, %v; want %q", tc.cfg, got, err, tc.want)
		}
	}
}
