// Package spannerdbtest holds fixtures for tests that read and write
// Spanner through spannerdb: a table with a column of every supported type
// and deterministic rows for it that cover each type's edge values and
// NULLs, plus helpers to write and read tables and to compare records.
package spannerdbtest

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// AllTypesDDL returns the DDL of a table with key Id INT64 and a column of
// every type rekey converts, scalar and ARRAY, plus a generated column G
// (MOD(Id, 7)) that must never be written.
func AllTypesDDL(table string) string {
	return `CREATE TABLE ` + table + ` (
  Id INT64 NOT NULL,
  I INT64, F FLOAT64, F32 FLOAT32, S STRING(MAX), S5 STRING(5), B BOOL, Byt BYTES(MAX),
  Ts TIMESTAMP, D DATE, N NUMERIC, J JSON,
  AI ARRAY<INT64>, AF ARRAY<FLOAT64>, AF32 ARRAY<FLOAT32>, AS_ ARRAY<STRING(MAX)>, AB ARRAY<BOOL>,
  AByt ARRAY<BYTES(MAX)>, ATs ARRAY<TIMESTAMP>, AD ARRAY<DATE>, AN ARRAY<NUMERIC>, AJ ARRAY<JSON>,
  G INT64 AS (MOD(Id, 7)) STORED
) PRIMARY KEY (Id)`
}

// Edge values, chosen per row by row number.
var (
	ints   = []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 1 << 53, 42}
	floats = []float64{0, 0.1, -2.5e300, math.Inf(1), math.Inf(-1), math.NaN(), math.SmallestNonzeroFloat64, math.Copysign(0, -1)}
	f32s   = []float64{0, 1.5, -3.25, float64(math.MaxFloat32), float64(float32(0.1)), math.Inf(1), math.NaN()}
	strs   = []string{"", "a", "日本語 🙂", "quote \" backslash \\ newline \n tab \t", strings.Repeat("x", 1000), "\u0000nul"}
	short  = []string{"", "abcde", "日本語🙂", "x"}
	byteVs = [][]byte{{}, {0}, {0xff, 0x00, 'x'}, []byte(strings.Repeat("\x01\x02", 300))}
	times  = []time.Time{
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 123456789, time.UTC),
		time.Date(2024, 1, 31, 12, 0, 0, 1000, time.UTC),
		time.Unix(0, 0).UTC(),
	}
	dates    = []string{"0001-01-01", "9999-12-31", "1969-12-31", "1970-01-01", "2024-02-29"}
	numerics = []string{"0", "1.5", "-0.000000001", "99999999999999999999999999999.999999999", "-99999999999999999999999999999.999999999", "123456789"}
	jsons    = []string{`{}`, `[]`, `{"a":[1,2.5,"x"],"b":null}`, `"text"`, `123`, `true`, `null`, `{"nested":{"k":"日本"}}`}
)

func pick[T any](xs []T, i, salt int) T { return xs[(i+salt)%len(xs)] }

// Row returns row i of an AllTypesDDL table: every column set, values
// cycling through each type's edge values; every 11th row has NULL in
// each nullable column and every 13th empty arrays. The record's fields
// are in column order, G left out.
func Row(table string, i int) record.Record {
	id := int64(i)
	rec := record.Record{Table: table, Fields: []record.Field{{Name: "Id", Value: record.Int(id)}}}
	add := func(name string, v record.Value) { rec.Fields = append(rec.Fields, record.Field{Name: name, Value: v}) }
	if i%11 == 10 {
		for _, n := range []string{"I", "F", "F32", "S", "S5", "B", "Byt", "Ts", "D", "N", "J", "AI", "AF", "AF32", "AS_", "AB", "AByt", "ATs", "AD", "AN", "AJ"} {
			add(n, record.Value{})
		}
		return rec
	}
	dateVal := func(s string) record.Value {
		v, err := record.Coerce(record.String(s), rewrite.TypeDate)
		if err != nil {
			panic(err)
		}
		return v
	}
	num := func(s string) record.Value { return record.Value{Kind: record.KindNumeric, Str: s} }
	js := func(s string) record.Value { return record.Value{Kind: record.KindJSON, Str: s} }
	add("I", record.Int(pick(ints, i, 0)))
	add("F", record.Float(pick(floats, i, 0)))
	add("F32", record.Float(pick(f32s, i, 0)))
	add("S", record.String(pick(strs, i, 0)+fmt.Sprint(i)))
	add("S5", record.String(pick(short, i, 0)))
	add("B", record.Bool(i%2 == 0))
	add("Byt", record.Bytes(pick(byteVs, i, 0)))
	add("Ts", record.Time(pick(times, i, 0)))
	add("D", dateVal(pick(dates, i, 0)))
	add("N", num(pick(numerics, i, 0)))
	add("J", js(pick(jsons, i, 0)))
	arr := func(vs ...record.Value) record.Value {
		if i%13 == 12 {
			return record.Value{Kind: record.KindArray, Array: []record.Value{}}
		}
		return record.Value{Kind: record.KindArray, Array: vs}
	}
	null := record.Value{}
	add("AI", arr(record.Int(pick(ints, i, 1)), null, record.Int(pick(ints, i, 2))))
	add("AF", arr(record.Float(pick(floats, i, 1)), record.Float(pick(floats, i, 2)), null))
	add("AF32", arr(null, record.Float(pick(f32s, i, 3))))
	add("AS_", arr(record.String(pick(strs, i, 1)), null, record.String("")))
	add("AB", arr(record.Bool(true), null, record.Bool(false)))
	add("AByt", arr(record.Bytes(pick(byteVs, i, 1)), null))
	add("ATs", arr(record.Time(pick(times, i, 1)), null))
	add("AD", arr(dateVal(pick(dates, i, 1)), null))
	add("AN", arr(num(pick(numerics, i, 1)), null))
	add("AJ", arr(js(pick(jsons, i, 1)), null))
	return rec
}

// Rows returns rows 0..n-1 of an AllTypesDDL table.
func Rows(table string, n int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = Row(table, i)
	}
	return recs
}

// Write writes records into t with the Spanner writer (upsert); a record
// it refuses is an error.
func Write(ctx context.Context, c *spanner.Client, t *spannerdb.Table, recs []record.Record) error {
	w := &spannerdb.Writer{Table: t, Commit: spannerdb.ClientCommit(c), Read: spannerdb.ClientRead(c)}
	out, err := w.Write(ctx, recs)
	if err != nil {
		return err
	}
	if n := len(out.DeadLetters); n > 0 {
		return fmt.Errorf("%d records refused, the first: %s", n, out.DeadLetters[0])
	}
	return nil
}

// ReadAll reads the given columns of every row of table t, in key order,
// with RowToRecord.
func ReadAll(ctx context.Context, c *spanner.Client, t *spannerdb.Table, columns ...string) ([]record.Record, error) {
	var keys []string
	for _, k := range t.Key.Columns {
		keys = append(keys, k.Name)
	}
	sql := fmt.Sprintf("SELECT %s FROM %s ORDER BY %s", strings.Join(columns, ", "), t.Name, strings.Join(keys, ", "))
	var out []record.Record
	err := c.Single().Query(ctx, spanner.Statement{SQL: sql}).Do(func(r *spanner.Row) error {
		rec, err := spannerdb.RowToRecord(r, t)
		if err != nil {
			return err
		}
		out = append(out, rec)
		return nil
	})
	return out, err
}

// Diff describes how got differs from want ("" if equal): the same
// fields in the same order (the order RowToRecord keeps), and the same
// content (record.Diff).
func Diff(got, want *record.Record) string {
	if got.Table != want.Table {
		return fmt.Sprintf("table %q, want %q", got.Table, want.Table)
	}
	if len(got.Fields) != len(want.Fields) {
		return fmt.Sprintf("%d fields %v, want %d %v", len(got.Fields), names(got), len(want.Fields), names(want))
	}
	for i := range got.Fields {
		g, w := got.Fields[i], want.Fields[i]
		if g.Name != w.Name {
			return fmt.Sprintf("field %d is %s, want %s", i, g.Name, w.Name)
		}
	}
	return record.Diff(got, want)
}

func names(r *record.Record) []string {
	var out []string
	for _, f := range r.Fields {
		out = append(out, f.Name)
	}
	return out
}
