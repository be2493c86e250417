package integration

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb/spannerdbtest"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// The Spanner-to-Spanner source: Parent has a column of every type rekey
// converts (spannerdbtest.AllTypesDDL: edge values, NULLs, arrays, JSON,
// a generated column G = MOD(Id, 7)); Child is interleaved in it.
const s2sChildDDL = `CREATE TABLE Child (
  Id INT64 NOT NULL,
  ChildId INT64 NOT NULL,
  Label STRING(64),
  Qty INT64,
  Price NUMERIC,
  SeenAt TIMESTAMP,
  SeenOn DATE,
  Blob BYTES(MAX),
  Tags ARRAY<STRING(MAX)>,
  Ratio FLOAT64,
  Ok BOOL,
  Doc JSON
) PRIMARY KEY (Id, ChildId),
  INTERLEAVE IN PARENT Parent ON DELETE CASCADE`

const (
	s2sParents = 300
)

// s2sChildren returns the child rows of parent i: 0 to 4 of them.
func s2sChildren(i int) []record.Record {
	var out []record.Record
	for j := range (i * 7) % 5 {
		cid := int64(j*1000 + i%13)
		day, _ := record.Coerce(record.String(fmt.Sprintf("2024-%02d-%02d", 1+j%12, 1+i%28)), rewrite.TypeDate)
		r := record.Record{Table: "Child", Fields: []record.Field{
			{Name: "Id", Value: record.Int(int64(i))},
			{Name: "ChildId", Value: record.Int(cid)},
			{Name: "Label", Value: record.String(fmt.Sprintf("child %d of %d ✓", j, i))},
			{Name: "Qty", Value: record.Int(int64(i*j) - 50)},
			{Name: "Price", Value: record.Value{Kind: record.KindNumeric, Str: fmt.Sprintf("%d.%02d", i, j*7)}},
			{Name: "SeenAt", Value: record.Time(time.Date(2024, 5, 1, 0, 0, 0, i*1000+j, time.UTC))},
			{Name: "SeenOn", Value: day},
			{Name: "Blob", Value: record.Bytes([]byte{byte(i), byte(j), 0, 0xff})},
			{Name: "Tags", Value: record.Value{Kind: record.KindArray, Array: []record.Value{record.String("t"), {}, record.String(fmt.Sprint(j))}}},
			{Name: "Ratio", Value: record.Float(float64(i) / float64(j+3))},
			{Name: "Ok", Value: record.Bool(j%2 == 0)},
			{Name: "Doc", Value: record.Value{Kind: record.KindJSON, Str: fmt.Sprintf(`{"i":%d,"j":[%d,"x"]}`, i, j)}},
		}}
		if j == 2 {
			for k := 2; k < len(r.Fields); k++ {
				r.Fields[k].Value = record.Value{} // a child with every nullable column NULL
			}
		}
		out = append(out, r)
	}
	return out
}

// s2sSource creates and fills the source database; it returns a client
// on it and the parent and child counts.
func s2sSource(t *testing.T) (*spanner.Client, int, int) {
	t.Helper()
	ctx := context.Background()
	src, _ := emulator.TestDBPath(t, spannerdbtest.AllTypesDDL("Parent"), s2sChildDDL)
	parents := spannerdbtest.Rows("Parent", s2sParents)
	if err := spannerdbtest.Write(ctx, src, readTable(t, src, "Parent"), parents); err != nil {
		t.Fatal(err)
	}
	var children []record.Record
	for i := range s2sParents {
		children = append(children, s2sChildren(i)...)
	}
	if err := spannerdbtest.Write(ctx, src, readTable(t, src, "Child"), children); err != nil {
		t.Fatal(err)
	}
	return src, len(parents), len(children)
}

// TestMigrateSpannerToSpanner migrates a parent table with a column of
// every type and an interleaved child table (ON DELETE CASCADE) into a
// fresh database, whose tables the pipeline creates (Job.Prepare with
// Create), with shard (n 8, mode abs: a new leading ShardId) and with
// bitreverse (the key column rewritten in place, the parent renamed, the
// old key kept), on every local runner. Every row arrives exactly once
// under its independently computed new key with values equal to the
// source's, every child under its new parent, the target DDL carries the
// new key and the interleaving; a re-run converges; a config with another
// rewrite is refused by the target's manifest unless forced.
func TestMigrateSpannerToSpanner(t *testing.T) {
	emulator.RequireSpanner(t)
	src, nParents, nChildren := s2sSource(t)
	srcParents := readRows(t, src, "Parent")
	srcChildren := readRows(t, src, "Child")
	if len(srcParents) != nParents || len(srcChildren) != nChildren {
		t.Fatalf("source holds %d parents and %d children, wrote %d and %d", len(srcParents), len(srcChildren), nParents, nChildren)
	}
	t.Logf("source %s: %d Parent rows, %d Child rows", dbID(src), nParents, nChildren)
	total := int64(nParents + nChildren)

	variants := []struct {
		name        string
		rewrite     string // YAML
		step        rewrite.StepConfig
		other       string // YAML of a different rewrite, for the manifest check
		targetTable string
		keep        string // keep_original_key
	}{
		{name: "shard", rewrite: `{strategy: shard, params: {n: 8, mode: abs}}`,
			step:        rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 8, "mode": "abs"}},
			other:       `{strategy: shard, params: {n: 4, mode: abs}}`,
			targetTable: "Parent"},
		{name: "bitreverse", rewrite: `{strategy: bitreverse}`,
			step:        rewrite.StepConfig{Strategy: "bitreverse"},
			other:       `{strategy: bitreverse, params: {preserve_sign: false}}`,
			targetTable: "ParentV2", keep: "OldKey"},
	}
	for _, v := range variants {
		st, err := rewrite.New(v.step)
		if err != nil {
			t.Fatal(err)
		}
		parentKey := mustSchema(t, "Id INT64")
		sr, err := st.Spanner(parentKey)
		if err != nil {
			t.Fatal(err)
		}
		newParentKey := sr.Out()
		newChildKey := rewrite.KeySchema{Table: "Child", Columns: append(append([]rewrite.Column(nil), newParentKey.Columns...), rewrite.Column{Name: "ChildId", Type: rewrite.TypeInt64})}

		// Expected target rows by new key.
		wantParents := map[string]record.Record{}
		for _, r := range srcParents {
			old := rowKey(t, &r, parentKey)
			nk, err := sr.Rewrite(nil, old)
			if err != nil {
				t.Fatal(err)
			}
			w := record.Record{Table: v.targetTable}
			for _, f := range r.Fields {
				if f.Name != "G" {
					w.Fields = append(w.Fields, f)
				}
			}
			for i, c := range newParentKey.Columns {
				w.Set(c.Name, record.FromKeyValue(nk[i]))
			}
			// G is generated in the target too: MOD(Id, 7) of the new Id.
			w.Set("G", record.Int(nk[newParentKey.Index("Id")].Int%7))
			if v.keep != "" {
				w.Set(v.keep, record.String(fmt.Sprint(old[0].Int)))
			}
			wantParents[keyText(nk)] = w
		}
		wantChildren := map[string]record.Record{}
		for _, r := range srcChildren {
			old := rowKey(t, &r, mustSchema(t, "Id INT64, ChildId INT64"))
			nk, err := sr.Rewrite(nil, old[:1])
			if err != nil {
				t.Fatal(err)
			}
			nk = append(nk, old[1])
			w := record.Record{Table: "Child", Fields: append([]record.Field(nil), r.Fields...)}
			for i, c := range newChildKey.Columns {
				w.Set(c.Name, record.FromKeyValue(nk[i]))
			}
			if v.keep != "" {
				w.Set(v.keep, record.String(fmt.Sprintf("[%d,%d]", old[0].Int, old[1].Int)))
			}
			wantChildren[keyText(nk)] = w
		}
		if len(wantParents) != nParents || len(wantChildren) != nChildren {
			t.Fatalf("%s: new keys collide: %d parents, %d children", v.name, len(wantParents), len(wantChildren))
		}

		for _, runner := range runners {
			t.Run(v.name+"/"+runner, func(t *testing.T) {
				ctx := context.Background()
				dstID, dst := newSpannerTarget(t, "s2s-"+v.name)
				yaml := func(rw, dead string) string {
					s := fmt.Sprintf(`
source: {type: spanner, project: %s, instance: %s, database: %s, table: Parent}
target: {type: spanner, project: %s, instance: %s, database: %s, table: %s}
rewrite: %s
interleaved: [Child]
dead_letter: %q
`, emulator.SpannerProject(), emulator.SpannerInstance(), dbID(src),
						emulator.SpannerProject(), emulator.SpannerInstance(), dstID, v.targetTable, rw, dead)
					if v.keep != "" {
						s += "keep_original_key: " + v.keep + "\n"
					}
					return s
				}
				dir := t.TempDir()
				cfg := loadYAML(t, yaml(v.rewrite, filepath.Join(dir, "dead1.jsonl")))

				// The plan: target DDL with the new key, the child interleaved
				// in the new parent.
				plan, err := migration.Resolve(ctx, cfg)
				if err != nil {
					t.Fatalf("Resolve: %v", err)
				}
				if len(plan.TargetDDL) != 2 || !strings.Contains(plan.TargetDDL[1], "INTERLEAVE IN PARENT "+v.targetTable+" ON DELETE CASCADE") {
					t.Errorf("target DDL:\n%s", strings.Join(plan.TargetDDL, ";\n"))
				}

				start := time.Now()
				res := migrate(t, cfg, runner)
				t.Logf("run 1: %s in %s", res.Counters.String(), time.Since(start).Round(time.Millisecond))
				wantCounters(t, res, total, total, total, 0)
				if dead := readDeadLetters(t, cfg.DeadLetter); len(dead) != 0 {
					t.Errorf("%d dead letters, the first: %+v", len(dead), dead[0])
				}

				// The target schema.
				pt := readTable(t, dst, v.targetTable)
				if got, want := "("+pt.Key.Text()+")", "("+newParentKey.Text()+")"; got != want {
					t.Errorf("target %s key %s, want %s", v.targetTable, got, want)
				}
				if pt.Parent != "" {
					t.Errorf("target %s is interleaved in %s, want a root table", v.targetTable, pt.Parent)
				}
				if g := pt.Column("G"); g == nil || !g.Generated || !g.Stored {
					t.Errorf("target %s column G is %+v, want a stored generated column", v.targetTable, g)
				}
				if v.keep != "" && pt.Column(v.keep) == nil {
					t.Errorf("target %s has no column %s", v.targetTable, v.keep)
				}
				ct := readTable(t, dst, "Child")
				if got, want := "("+ct.Key.Text()+")", "("+newChildKey.Text()+")"; got != want {
					t.Errorf("target Child key %s, want %s", got, want)
				}
				if ct.Parent != v.targetTable || !ct.OnDeleteCascade {
					t.Errorf("target Child is interleaved in %q (cascade %t), want %s ON DELETE CASCADE", ct.Parent, ct.OnDeleteCascade, v.targetTable)
				}

				check := func(run string) {
					t.Helper()
					checkSpannerRows(t, run, readRows(t, dst, v.targetTable), newParentKey, wantParents)
					checkSpannerRows(t, run, readRows(t, dst, "Child"), newChildKey, wantChildren)
					var on []string
					for _, c := range newParentKey.Columns {
						on = append(on, fmt.Sprintf("p.%s = c.%s", c.Name, c.Name))
					}
					var orphans int64
					err := dst.Single().Query(ctx, spanner.Statement{SQL: fmt.Sprintf(
						"SELECT COUNT(*) FROM Child c WHERE NOT EXISTS (SELECT 1 FROM %s p WHERE %s)", v.targetTable, strings.Join(on, " AND "))}).
						Do(func(r *spanner.Row) error { return r.Columns(&orphans) })
					if err != nil {
						t.Fatal(err)
					}
					if orphans != 0 {
						t.Errorf("%s: %d Child rows without their parent", run, orphans)
					}
				}
				check("run 1")

				// A re-run of the same config converges.
				cfg = loadYAML(t, yaml(v.rewrite, filepath.Join(dir, "dead2.jsonl")))
				start = time.Now()
				res = migrate(t, cfg, runner)
				t.Logf("run 2: %s in %s", res.Counters.String(), time.Since(start).Round(time.Millisecond))
				wantCounters(t, res, total, total, total, 0)
				check("run 2")

				// Another rewrite against the same target: refused by the
				// manifest, unless forced.
				other := loadYAML(t, yaml(v.other, filepath.Join(dir, "dead3.jsonl")))
				plan, err = migration.Resolve(ctx, other)
				if err != nil {
					t.Fatalf("Resolve (other rewrite): %v", err)
				}
				err = plan.Prepare(ctx, migration.Options{CreateTarget: true})
				if !errors.Is(err, migration.ErrManifestMismatch) {
					t.Errorf("Prepare with %s after %s: %v, want ErrManifestMismatch", v.other, v.rewrite, err)
				}
				if err := plan.Prepare(ctx, migration.Options{CreateTarget: true, Force: true}); err != nil {
					t.Errorf("Prepare with Force: %v", err)
				}
			})
		}
	}
}

// checkSpannerRows checks that the target rows are exactly want (by new
// key), each once, values equal column by column (columns in skip are
// left out).
func checkSpannerRows(t *testing.T, run string, got []record.Record, key rewrite.KeySchema, want map[string]record.Record, skip ...string) {
	t.Helper()
	seen := map[string]int{}
	bad := 0
	for _, r := range got {
		k := keyText(rowKey(t, &r, key))
		seen[k]++
		w, ok := want[k]
		if !ok {
			t.Errorf("%s: unexpected %s row with key %s", run, key.Table, k)
			continue
		}
		if d := record.FieldsDiff(r.Fields, w.Fields, skip...); d != "" {
			if bad++; bad <= 5 {
				t.Errorf("%s: %s row %s: %s", run, key.Table, k, d)
			}
		}
	}
	missing := 0
	for k := range want {
		if seen[k] != 1 {
			if missing++; missing <= 5 {
				t.Errorf("%s: %s row %s arrived %d times", run, key.Table, k, seen[k])
			}
		}
	}
	if bad > 0 || missing > 0 || len(got) != len(want) {
		t.Errorf("%s: %s: %d rows, want %d; %d differ, %d missing or repeated", run, key.Table, len(got), len(want), bad, missing)
	}
}
