package integration

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/civil"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/rewrite"
)

// maxRowsPerApply bounds the rows of one Apply (commit).
const maxRowsPerApply = 2000

// spannerValue converts a key value to what the Spanner client writes.
func spannerValue(v rewrite.Value) (any, error) {
	if v.Null {
		return nil, fmt.Errorf("NULL %s key value", v.Type)
	}
	switch v.Type {
	case rewrite.TypeInt64:
		return v.Int, nil
	case rewrite.TypeBool:
		return v.Int != 0, nil
	case rewrite.TypeString:
		return v.Str, nil
	case rewrite.TypeBytes:
		if v.Bytes == nil {
			return []byte{}, nil // nil would be NULL
		}
		return v.Bytes, nil
	case rewrite.TypeTimestamp:
		return v.Time, nil
	case rewrite.TypeDate:
		return civil.DateOf(time.Unix(v.Int*86400, 0).UTC()), nil
	case rewrite.TypeFloat64:
		return v.Float, nil
	case rewrite.TypeNumeric:
		r, ok := new(big.Rat).SetString(v.Str)
		if !ok {
			return nil, fmt.Errorf("NUMERIC %q", v.Str)
		}
		return r, nil
	}
	return nil, fmt.Errorf("unknown type %s", v.Type)
}

// rowValue reads column i of row as a key value of type t.
func rowValue(row *spanner.Row, i int, t rewrite.Type) (rewrite.Value, error) {
	switch t {
	case rewrite.TypeInt64:
		var x int64
		err := row.Column(i, &x)
		return rewrite.Int64(x), err
	case rewrite.TypeBool:
		var x bool
		err := row.Column(i, &x)
		return rewrite.Bool(x), err
	case rewrite.TypeString:
		var x string
		err := row.Column(i, &x)
		return rewrite.String(x), err
	case rewrite.TypeBytes:
		var x []byte
		err := row.Column(i, &x)
		return rewrite.Bytes(x), err
	case rewrite.TypeTimestamp:
		var x time.Time
		err := row.Column(i, &x)
		return rewrite.Timestamp(x), err
	case rewrite.TypeDate:
		var x civil.Date
		err := row.Column(i, &x)
		return rewrite.Date(x.Year, x.Month, x.Day), err
	case rewrite.TypeFloat64:
		var x float64
		err := row.Column(i, &x)
		return rewrite.Float64(x), err
	case rewrite.TypeNumeric:
		var x big.Rat
		if err := row.Column(i, &x); err != nil {
			return rewrite.Value{}, err
		}
		return rewrite.Numeric(spanner.NumericString(&x))
	}
	return rewrite.Value{}, fmt.Errorf("unknown type %s", t)
}

// columnDDL renders the key columns as column definitions.
func columnDDL(s rewrite.KeySchema) []string {
	out := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		out[i] = rewrite.QuoteIdent(c.Name) + " " + c.SQLType() + " NOT NULL"
	}
	return out
}

// ddlOf returns the column definition an Explain "DDL: " line gives.
func ddlOf(t testing.TB, explain []string) string {
	t.Helper()
	for _, l := range explain {
		if d, ok := strings.CutPrefix(l, "DDL: "); ok {
			return d
		}
	}
	t.Fatalf("Explain has no DDL line: %q", explain)
	return ""
}

// generatedExpr returns the expression of a "Name TYPE NOT NULL AS (expr)
// STORED" column definition.
func generatedExpr(t testing.TB, ddl string) string {
	t.Helper()
	i := strings.Index(ddl, " AS (")
	if i < 0 || !strings.HasSuffix(ddl, ") STORED") {
		t.Fatalf("DDL %q is not a STORED generated column", ddl)
	}
	return ddl[i+len(" AS (") : len(ddl)-len(") STORED")]
}

// keyTable is a table whose primary key is a key schema's columns, with an
// Idx column holding each key's position in keys and generated columns.
type keyTable struct {
	schema rewrite.KeySchema
	keys   [][]rewrite.Value
	// generated are the column definitions, e.g. from Explain's DDL line.
	generated []string
}

func (kt *keyTable) ddl() string {
	cols := append(columnDDL(kt.schema), "Idx INT64 NOT NULL")
	cols = append(cols, kt.generated...)
	pk := make([]string, len(kt.schema.Columns))
	for i, c := range kt.schema.Columns {
		pk[i] = rewrite.QuoteIdent(c.Name)
	}
	return fmt.Sprintf("CREATE TABLE %s (\n  %s\n) PRIMARY KEY (%s)", kt.schema.Table, strings.Join(cols, ",\n  "), strings.Join(pk, ", "))
}

// create makes a fresh database holding the table, inserts every key and
// returns a client on it.
func (kt *keyTable) create(t *testing.T, ctx context.Context) *spanner.Client {
	t.Helper()
	c := emulator.TestDB(t, kt.ddl())
	names := []string{"Idx"}
	for _, col := range kt.schema.Columns {
		names = append(names, col.Name)
	}
	ms := make([]*spanner.Mutation, 0, maxRowsPerApply)
	flush := func() {
		if len(ms) == 0 {
			return
		}
		if _, err := c.Apply(ctx, ms); err != nil {
			t.Fatalf("insert %d rows: %v", len(ms), err)
		}
		ms = ms[:0]
	}
	for i, k := range kt.keys {
		row := []any{int64(i)}
		for j, v := range k {
			sv, err := spannerValue(v)
			if err != nil {
				t.Fatalf("key %d column %s: %v", i, kt.schema.Columns[j].Name, err)
			}
			row = append(row, sv)
		}
		ms = append(ms, spanner.Insert(kt.schema.Table, names, row))
		if len(ms) == maxRowsPerApply {
			flush()
		}
	}
	flush()
	return c
}

// readBack reads every row: the key at Idx as stored, and the INT64 values
// of the named columns. It fails the test unless every key comes back
// exactly once and unchanged, so that a difference in a computed column
// cannot come from Spanner storing a different key than Go saw.
func (kt *keyTable) readBack(t *testing.T, ctx context.Context, c *spanner.Client, cols []string) [][]int64 {
	t.Helper()
	sel := []string{"Idx"}
	for _, col := range kt.schema.Columns {
		sel = append(sel, rewrite.QuoteIdent(col.Name))
	}
	sel = append(sel, cols...)
	got := make([][]int64, len(kt.keys))
	bad := 0
	err := c.Single().Query(ctx, spanner.Statement{SQL: "SELECT " + strings.Join(sel, ", ") + " FROM " + kt.schema.Table}).Do(func(row *spanner.Row) error {
		var idx int64
		if err := row.Column(0, &idx); err != nil {
			return err
		}
		if idx < 0 || int(idx) >= len(kt.keys) || got[idx] != nil {
			return fmt.Errorf("unexpected or repeated Idx %d", idx)
		}
		want := kt.keys[idx]
		for j, col := range kt.schema.Columns {
			v, err := rowValue(row, 1+j, col.Type)
			if err != nil {
				return fmt.Errorf("Idx %d column %s: %w", idx, col.Name, err)
			}
			if !v.Equal(want[j]) {
				bad++
				if bad <= 10 {
					t.Errorf("key %d column %s: wrote %s, Spanner stored %s", idx, col.Name, short(want[j]), short(v))
				}
			}
		}
		vals := make([]int64, len(cols))
		for j := range cols {
			if err := row.Column(1+len(kt.schema.Columns)+j, &vals[j]); err != nil {
				return fmt.Errorf("Idx %d column %s: %w", idx, cols[j], err)
			}
		}
		got[idx] = vals
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if bad > 0 {
		t.Fatalf("%d key values did not round-trip through Spanner unchanged", bad)
	}
	for i, g := range got {
		if g == nil {
			t.Fatalf("key %d (%s) missing from the table", i, keyString(kt.schema, kt.keys[i]))
		}
	}
	return got
}

// short renders a value for messages, eliding long ones.
func short(v rewrite.Value) string {
	s := v.String()
	if v.Type == rewrite.TypeString {
		s = fmt.Sprintf("%q", v.Str)
	}
	if len(s) > 80 {
		s = fmt.Sprintf("%s…(%d bytes)", s[:60], len(s))
	}
	return s
}

func keyString(s rewrite.KeySchema, k []rewrite.Value) string {
	parts := make([]string, len(k))
	for i, v := range k {
		parts[i] = s.Columns[i].Name + "=" + short(v)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// mismatches collects differences between Go and Spanner for one column,
// reporting the first few in full.
type mismatches struct {
	t      *testing.T
	what   string
	n      int
	shown  int
	report []string
}

func (m *mismatches) add(key string, goVal, sqlVal any) {
	m.n++
	if m.shown < 20 {
		m.shown++
		line := fmt.Sprintf("%s: key %s: Go %v, Spanner %v", m.what, key, goVal, sqlVal)
		m.report = append(m.report, line)
		m.t.Error(line)
	}
}

func (m *mismatches) done(compared int) {
	if m.n > 0 {
		m.t.Errorf("%s: %d of %d keys differ between Go and Spanner", m.what, m.n, compared)
		return
	}
	m.t.Logf("%s: %d keys compared, all equal", m.what, compared)
}

// runNotes collects the notes a run hands over (migration.Options.Notes,
// the library's facts that cmd/rekey words as lines).
type runNotes struct {
	mu   sync.Mutex
	list []migration.Note
}

// Say is the run's migration.Notes.
func (r *runNotes) Say(n migration.Note) {
	r.mu.Lock()
	r.list = append(r.list, n)
	r.mu.Unlock()
}

// notes is what was said so far.
func (r *runNotes) notes() []migration.Note {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]migration.Note(nil), r.list...)
}

// String lists the notes, one a line (a DDL note as its text), for a
// failure's message.
func (r *runNotes) String() string {
	var b strings.Builder
	for _, n := range r.notes() {
		if d, ok := n.(migration.TargetDDL); ok {
			b.WriteString(d.Text)
			continue
		}
		fmt.Fprintf(&b, "%T %+v\n", n, n)
	}
	return b.String()
}

// ddl is the text of every TargetDDL note.
func (r *runNotes) ddl() string {
	var b strings.Builder
	for _, n := range r.notes() {
		if d, ok := n.(migration.TargetDDL); ok {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

// readingAt is the read times the run said it reads the source at.
func (r *runNotes) readingAt() []time.Time {
	var at []time.Time
	for _, n := range r.notes() {
		if a, ok := n.(migration.ReadingAt); ok {
			at = append(at, a.At)
		}
	}
	return at
}

// index is the position of the first note that match accepts, or -1.
func (r *runNotes) index(match func(migration.Note) bool) int {
	for i, n := range r.notes() {
		if match(n) {
			return i
		}
	}
	return -1
}
