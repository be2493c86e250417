package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/rewrite"
)

// These tests prove, on the Spanner emulator, that the rewrite strategies
// compute in Go exactly what GoogleSQL computes: for BIT_REVERSE directly,
// and for shard and bucket through a STORED generated column declared with
// the very DDL the strategy's Explain prints. Each test compares at least
// keysPerTest distinct keys, edge cases first, the rest from a fixed-seed
// generator.

func TestEqualityBitReverse(t *testing.T) {
	emulator.RequireSpanner(t)
	ctx := t.Context()
	c := emulator.TestDB(t)
	xs := int64s(newRand(1), keysPerTest)

	schema, err := rewrite.ParseKeySchema("T", "Id INT64")
	if err != nil {
		t.Fatal(err)
	}
	rws := map[bool]*rewrite.SpannerRewriter{}
	for _, keep := range []bool{true, false} {
		st, err := rewrite.New(rewrite.StepConfig{Strategy: "bitreverse", Params: rewrite.Params{"preserve_sign": keep}})
		if err != nil {
			t.Fatal(err)
		}
		if rws[keep], err = st.Spanner(schema); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("Id = BIT_REVERSE(Id, %t)", keep)
		if ex := rws[keep].Explain(); len(ex) == 0 || ex[0] != want {
			t.Errorf("Explain() = %q, want %q first", ex, want)
		}
	}

	fn := &mismatches{t: t, what: "ReverseBits(x, true) vs BIT_REVERSE(x, true)"}
	fnFalse := &mismatches{t: t, what: "ReverseBits(x, false) vs BIT_REVERSE(x, false)"}
	strat := &mismatches{t: t, what: "bitreverse strategy (preserve_sign true/false) vs BIT_REVERSE"}
	seen := map[int64]bool{}
	for i := 0; i < len(xs); i += maxRowsPerApply {
		chunk := xs[i:min(i+maxRowsPerApply, len(xs))]
		stmt := spanner.Statement{
			SQL:    `SELECT x, BIT_REVERSE(x, true), BIT_REVERSE(x, false) FROM UNNEST(@xs) AS x`,
			Params: map[string]any{"xs": chunk},
		}
		err := c.Single().Query(ctx, stmt).Do(func(row *spanner.Row) error {
			var x, keep, all int64
			if err := row.Columns(&x, &keep, &all); err != nil {
				return err
			}
			seen[x] = true
			if g := rewrite.ReverseBits(x, true); g != keep {
				fn.add(fmt.Sprint(x), g, keep)
			}
			if g := rewrite.ReverseBits(x, false); g != all {
				fnFalse.add(fmt.Sprint(x), g, all)
			}
			for b, want := range map[bool]int64{true: keep, false: all} {
				out, err := rws[b].Rewrite(nil, []rewrite.Value{rewrite.Int64(x)})
				if err != nil {
					strat.add(fmt.Sprintf("%d (preserve_sign=%t)", x, b), err, want)
				} else if out[0].Int != want {
					strat.add(fmt.Sprintf("%d (preserve_sign=%t)", x, b), out[0].Int, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != len(xs) {
		t.Fatalf("Spanner returned %d distinct values, sent %d", len(seen), len(xs))
	}
	fn.done(len(xs))
	fnFalse.done(len(xs))
	strat.done(len(xs))
}

// computedColumn is one strategy binding whose first output column is
// checked against a generated column.
type computedColumn struct {
	label string // for messages
	name  string // the generated column
	rw    *rewrite.SpannerRewriter
}

// checkComputed creates the table with the columns' DDL, inserts keys,
// reads every row back and compares, per key and column, the first value
// of Rewrite with what Spanner stored in the generated column.
func checkComputed(t *testing.T, schema rewrite.KeySchema, keys [][]rewrite.Value, cols []computedColumn) {
	t.Helper()
	if len(keys) < keysPerTest {
		t.Fatalf("only %d keys; want at least %d", len(keys), keysPerTest)
	}
	kt := &keyTable{schema: schema, keys: keys}
	names := make([]string, len(cols))
	for i, c := range cols {
		ddl := ddlOf(t, c.rw.Explain())
		if !strings.HasPrefix(ddl, c.name+" INT64 NOT NULL AS (") {
			t.Fatalf("%s: DDL %q does not declare %s", c.label, ddl, c.name)
		}
		kt.generated = append(kt.generated, ddl)
		names[i] = c.name
	}
	t.Logf("table:\n%s", kt.ddl())
	ctx := t.Context()
	client := kt.create(t, ctx)
	got := kt.readBack(t, ctx, client, names)
	for j, c := range cols {
		m := &mismatches{t: t, what: c.label}
		for i, k := range keys {
			out, err := c.rw.Rewrite(nil, k)
			switch {
			case err != nil:
				m.add(keyString(schema, k), err, got[i][j])
			case out[0].Int != got[i][j]:
				m.add(keyString(schema, k), out[0].Int, got[i][j])
			}
		}
		m.done(len(keys))
	}
}

type shardVariant struct {
	mode    string
	n       int64
	columns []string // nil: every key column
	sep     string   // "": the default
}

// everyShardVariant is each mode with N 10 and 7.
var everyShardVariant = []shardVariant{{mode: "signed", n: 10}, {mode: "abs", n: 10}, {mode: "signed", n: 7}, {mode: "abs", n: 7}}

// shardColumns builds one shard binding per variant, checking that the
// expression Shard.SQL prints is the one in Explain's DDL line.
func shardColumns(t *testing.T, schema rewrite.KeySchema, variants []shardVariant) []computedColumn {
	t.Helper()
	var cols []computedColumn
	for i, v := range variants {
		name := fmt.Sprintf("Shard%d", i)
		params := rewrite.Params{"n": v.n, "mode": v.mode, "name": name}
		columns := v.columns
		if columns == nil {
			for _, c := range schema.Columns {
				columns = append(columns, c.Name)
			}
		}
		params["columns"] = columns
		if v.sep != "" {
			params["sep"] = v.sep
		}
		st, err := rewrite.New(rewrite.StepConfig{Strategy: "shard", Params: params})
		if err != nil {
			t.Fatal(err)
		}
		rw, err := st.Spanner(schema)
		if err != nil {
			t.Fatal(err)
		}
		sh, ok := st.(*rewrite.Shard)
		if !ok {
			t.Fatalf("shard strategy is a %T", st)
		}
		expr, err := sh.SQL(schema)
		if err != nil {
			t.Fatal(err)
		}
		if got := generatedExpr(t, ddlOf(t, rw.Explain())); got != expr {
			t.Fatalf("Explain DDL expression %q differs from Shard.SQL %q", got, expr)
		}
		label := fmt.Sprintf("shard mode=%s n=%d columns=%s", v.mode, v.n, strings.Join(columns, ","))
		if v.sep != "" {
			label += fmt.Sprintf(" sep=%q", v.sep)
		}
		cols = append(cols, computedColumn{label: label + ": " + name + " = " + expr, name: name, rw: rw})
	}
	return cols
}

func mustSchema(t *testing.T, spec string) rewrite.KeySchema {
	t.Helper()
	s, err := rewrite.ParseKeySchema("T", spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestEqualityShardString(t *testing.T) {
	emulator.RequireSpanner(t)
	schema := mustSchema(t, "K STRING(MAX)")
	var keys [][]rewrite.Value
	for _, s := range strs(newRand(2), keysPerTest) {
		keys = append(keys, []rewrite.Value{rewrite.String(s)})
	}
	checkComputed(t, schema, keys, shardColumns(t, schema, everyShardVariant))
}

func TestEqualityShardInt64(t *testing.T) {
	emulator.RequireSpanner(t)
	schema := mustSchema(t, "K INT64")
	var keys [][]rewrite.Value
	for _, x := range int64s(newRand(3), keysPerTest) {
		keys = append(keys, []rewrite.Value{rewrite.Int64(x)})
	}
	checkComputed(t, schema, keys, shardColumns(t, schema, everyShardVariant))
}

func TestEqualityShardBytes(t *testing.T) {
	emulator.RequireSpanner(t)
	schema := mustSchema(t, "K BYTES(MAX)")
	var keys [][]rewrite.Value
	for _, b := range byteStrings(newRand(4), keysPerTest) {
		keys = append(keys, []rewrite.Value{rewrite.Bytes(b)})
	}
	checkComputed(t, schema, keys, shardColumns(t, schema, everyShardVariant))
}

// compositeKeys returns keysPerTest distinct keys of
// (UserId INT64, LastAccess TIMESTAMP, Name STRING(MAX), D DATE, B BOOL):
// every edge value of each column, with random values in the others, then
// random keys.
func compositeKeys(seed uint64) [][]rewrite.Value {
	r := newRand(seed)
	ids := int64s(r, 3000)
	ts := times(r, 3000)
	names := strs(r, 3000)
	var keys [][]rewrite.Value
	seen := map[string]bool{}
	key := func(id int64, t rewrite.Value, name string, d rewrite.Value, b bool) {
		k := fmt.Sprintf("%d|%s|%q|%d|%t", id, t.Time.Format(time.RFC3339Nano), name, d.Int, b)
		if !seen[k] && len(keys) < keysPerTest {
			seen[k] = true
			keys = append(keys, []rewrite.Value{rewrite.Int64(id), t, rewrite.String(name), d, rewrite.Bool(b)})
		}
	}
	pick := func() (int64, rewrite.Value, string, rewrite.Value, bool) {
		return ids[r.IntN(len(ids))], rewrite.Timestamp(ts[r.IntN(len(ts))]), names[r.IntN(len(names))], randomDate(r), r.IntN(2) == 0
	}
	for _, e := range timeEdges() {
		id, _, name, d, b := pick()
		key(id, rewrite.Timestamp(e), name, d, b)
	}
	for _, e := range int64Edges() {
		_, t, name, d, b := pick()
		key(e, t, name, d, b)
	}
	for _, e := range stringEdges() {
		id, t, _, d, b := pick()
		key(id, t, e, d, b)
	}
	for _, e := range dateEdges() {
		for _, b := range []bool{false, true} {
			id, t, name, _, _ := pick()
			key(id, t, name, e, b)
		}
	}
	for len(keys) < keysPerTest {
		key(pick())
	}
	return keys
}

func TestEqualityShardComposite(t *testing.T) {
	emulator.RequireSpanner(t)
	schema := mustSchema(t, "UserId INT64, LastAccess TIMESTAMP, Name STRING(MAX), D DATE, Order BOOL")
	variants := append(append([]shardVariant(nil), everyShardVariant...),
		shardVariant{mode: "abs", n: 10, columns: []string{"LastAccess", "Name"}},
		shardVariant{mode: "signed", n: 7, columns: []string{"Name", "UserId"}, sep: "#"},
		shardVariant{mode: "abs", n: 7, columns: []string{"D", "Order"}},
		shardVariant{mode: "signed", n: 10, columns: []string{"LastAccess"}},
	)
	checkComputed(t, schema, compositeKeys(5), shardColumns(t, schema, variants))
}

func TestEqualityShardNumeric(t *testing.T) {
	emulator.RequireSpanner(t)
	schema := mustSchema(t, "K NUMERIC")
	vals, err := numerics(newRand(6), keysPerTest)
	if err != nil {
		t.Fatal(err)
	}
	var keys [][]rewrite.Value
	for _, v := range vals {
		keys = append(keys, []rewrite.Value{v})
	}
	checkComputed(t, schema, keys, shardColumns(t, schema, everyShardVariant))
}

// bucketColumns builds one bucket binding per (unit, n).
func bucketColumns(t *testing.T, schema rewrite.KeySchema, column string, units []string, ns []int64) []computedColumn {
	t.Helper()
	var cols []computedColumn
	for _, unit := range units {
		for _, n := range ns {
			name := fmt.Sprintf("Bucket_%d", n)
			if unit != "" {
				name = fmt.Sprintf("Bucket_%s_%d", unit, n)
			}
			params := rewrite.Params{"column": column, "n": n, "name": name}
			if unit != "" {
				params["unit"] = unit
			}
			st, err := rewrite.New(rewrite.StepConfig{Strategy: "bucket", Params: params})
			if err != nil {
				t.Fatal(err)
			}
			rw, err := st.Spanner(schema)
			if err != nil {
				t.Fatal(err)
			}
			expr := generatedExpr(t, ddlOf(t, rw.Explain()))
			label := fmt.Sprintf("bucket n=%d", n)
			if unit != "" {
				label += " unit=" + unit
			}
			cols = append(cols, computedColumn{label: fmt.Sprintf("%s: %s = %s", label, name, expr), name: name, rw: rw})
		}
	}
	return cols
}

func TestEqualityBucketInt64(t *testing.T) {
	emulator.RequireSpanner(t)
	schema := mustSchema(t, "K INT64")
	var keys [][]rewrite.Value
	for _, x := range int64s(newRand(7), keysPerTest) {
		keys = append(keys, []rewrite.Value{rewrite.Int64(x)})
	}
	checkComputed(t, schema, keys, bucketColumns(t, schema, "K", []string{""}, []int64{16, 10, 7, 1, 1 << 31}))
}

func TestEqualityBucketTimestamp(t *testing.T) {
	emulator.RequireSpanner(t)
	schema := mustSchema(t, "Id INT64, At TIMESTAMP") // At is a reserved word: the printed SQL must quote it
	r := newRand(8)
	var keys [][]rewrite.Value
	for i, ts := range times(r, keysPerTest) {
		keys = append(keys, []rewrite.Value{rewrite.Int64(int64(i % 3)), rewrite.Timestamp(ts)})
	}
	checkComputed(t, schema, keys, bucketColumns(t, schema, "At", []string{"s", "ms", "us"}, []int64{16, 7, 1000}))
}
