package spannerdb

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/rewrite"
)

// Column is one column of a table.
type Column struct {
	Name string
	// Type is the full Spanner type text, e.g. STRING(36), ARRAY<INT64>,
	// TIMESTAMP, JSON, NUMERIC (see ParseColumnType).
	Type    string
	NotNull bool
	// Generated marks a generated column (AS (Expression) [STORED]); it is
	// computed by Spanner and must not be written.
	Generated  bool
	Expression string
	Stored     bool
	// Default is the DEFAULT expression, "" if none.
	Default string
	// AllowCommitTimestamp is OPTIONS (allow_commit_timestamp=true).
	AllowCommitTimestamp bool
}

// Table is a Spanner table's schema.
type Table struct {
	Name    string
	Columns []Column
	// Key is the primary key, in key order.
	Key rewrite.KeySchema
	// Parent is the table this one is interleaved in, "" if none.
	Parent string
	// OnDeleteCascade is INTERLEAVE IN PARENT ... ON DELETE CASCADE.
	OnDeleteCascade bool
}

// ErrTableNotFound is matched (errors.Is) by ReadTable's error for a table
// that does not exist.
var ErrTableNotFound = errors.New("table not found")

type notFoundError struct{ table, database string }

func (e *notFoundError) Error() string {
	return fmt.Sprintf("table %s not found in database %s", e.table, e.database)
}

func (e *notFoundError) Is(target error) bool { return target == ErrTableNotFound }

// ColumnNames returns the names of t's columns, in order.
func (t *Table) ColumnNames() []string {
	out := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		out[i] = c.Name
	}
	return out
}

// Column returns the named column (case-insensitive, as Spanner names
// are), or nil.
func (t *Table) Column(name string) *Column {
	if i := t.columnIndex(name); i >= 0 {
		return &t.Columns[i]
	}
	return nil
}

func (t *Table) columnIndex(name string) int {
	for i := range t.Columns {
		if t.Columns[i].Name == name {
			return i
		}
	}
	for i := range t.Columns {
		if strings.EqualFold(t.Columns[i].Name, name) {
			return i
		}
	}
	return -1
}

// ReadTable reads the schema of table (matched case-insensitively) from
// the database's INFORMATION_SCHEMA. Only tables of the default schema
// are seen. A missing table is an error matching ErrTableNotFound.
//
// Each of its queries is a single-use read, not one multi-use read-only
// transaction: under a busy application's transactions the emulator
// refused such a transaction for more than 30 s (the staged end-to-end
// test's reverse backfill), and a job reads a schema it does not change
// while it runs. The whole read is tried again while the emulator
// refuses it (see Transact).
func ReadTable(ctx context.Context, client *spanner.Client, table string) (*Table, error) {
	var t *Table
	err := retryRefused(ctx, func() (err error) {
		t, err = readTable(ctx, singleUse{client}, table, client.DatabaseName())
		return err
	})
	return t, err
}

// querier runs a query: a read-only transaction, or singleUse.
type querier interface {
	Query(ctx context.Context, stmt spanner.Statement) *spanner.RowIterator
}

// singleUse runs each query in its own single-use read of c.
type singleUse struct{ c *spanner.Client }

func (s singleUse) Query(ctx context.Context, stmt spanner.Statement) *spanner.RowIterator {
	return s.c.Single().Query(ctx, stmt)
}

// readTable is ReadTable through tx.
func readTable(ctx context.Context, tx querier, table, db string) (*Table, error) {
	t := &Table{}
	var parent, onDelete spanner.NullString
	n := 0
	err := tx.Query(ctx, spanner.Statement{
		SQL: `SELECT TABLE_NAME, PARENT_TABLE_NAME, ON_DELETE_ACTION FROM INFORMATION_SCHEMA.TABLES
		      WHERE TABLE_SCHEMA = '' AND TABLE_TYPE = 'BASE TABLE' AND LOWER(TABLE_NAME) = LOWER(@table)`,
		Params: map[string]any{"table": table},
	}).Do(func(r *spanner.Row) error {
		n++
		return r.Columns(&t.Name, &parent, &onDelete)
	})
	if err != nil {
		return nil, fmt.Errorf("read schema of table %s: %w", table, err)
	}
	if n == 0 {
		return nil, &notFoundError{table: table, database: db}
	}
	if n > 1 {
		return nil, fmt.Errorf("table name %s matches %d tables of database %s", table, n, db)
	}
	t.Parent = parent.StringVal
	t.OnDeleteCascade = onDelete.StringVal == "CASCADE"

	err = tx.Query(ctx, spanner.Statement{
		SQL: `SELECT COLUMN_NAME, SPANNER_TYPE, IS_NULLABLE, IS_GENERATED, GENERATION_EXPRESSION, IS_STORED, COLUMN_DEFAULT
		      FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = '' AND TABLE_NAME = @table ORDER BY ORDINAL_POSITION`,
		Params: map[string]any{"table": t.Name},
	}).Do(func(r *spanner.Row) error {
		var name, typ, nullable, generated string
		var expr, stored, def spanner.NullString
		if err := r.Columns(&name, &typ, &nullable, &generated, &expr, &stored, &def); err != nil {
			return err
		}
		t.Columns = append(t.Columns, Column{
			Name: name, Type: typ, NotNull: nullable == "NO",
			Generated: generated == "ALWAYS", Expression: expr.StringVal, Stored: stored.StringVal == "YES",
			Default: def.StringVal,
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read columns of table %s: %w", t.Name, err)
	}

	err = tx.Query(ctx, spanner.Statement{
		SQL: `SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMN_OPTIONS
		      WHERE TABLE_SCHEMA = '' AND TABLE_NAME = @table AND OPTION_NAME = 'allow_commit_timestamp' AND OPTION_VALUE = 'TRUE'`,
		Params: map[string]any{"table": t.Name},
	}).Do(func(r *spanner.Row) error {
		var name string
		if err := r.Columns(&name); err != nil {
			return err
		}
		if c := t.Column(name); c != nil {
			c.AllowCommitTimestamp = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read column options of table %s: %w", t.Name, err)
	}

	t.Key = rewrite.KeySchema{Table: t.Name}
	err = tx.Query(ctx, spanner.Statement{
		SQL: `SELECT COLUMN_NAME, COLUMN_ORDERING FROM INFORMATION_SCHEMA.INDEX_COLUMNS
		      WHERE TABLE_SCHEMA = '' AND TABLE_NAME = @table AND INDEX_NAME = 'PRIMARY_KEY' AND INDEX_TYPE = 'PRIMARY_KEY'
		      ORDER BY ORDINAL_POSITION`,
		Params: map[string]any{"table": t.Name},
	}).Do(func(r *spanner.Row) error {
		var name string
		var ordering spanner.NullString
		if err := r.Columns(&name, &ordering); err != nil {
			return err
		}
		c := t.Column(name)
		if c == nil {
			return fmt.Errorf("key column %s is not among the columns", name)
		}
		kc, err := keyColumn(c)
		if err != nil {
			return err
		}
		kc.Desc = ordering.StringVal == "DESC"
		t.Key.Columns = append(t.Key.Columns, kc)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read primary key of table %s: %w", t.Name, err)
	}
	return t, nil
}

// keyColumn converts a column to a rewrite key column.
func keyColumn(c *Column) (rewrite.Column, error) {
	ct, err := ParseColumnType(c.Type)
	if err != nil {
		return rewrite.Column{}, fmt.Errorf("key column %s: %w", c.Name, err)
	}
	typ, err := rewrite.ParseType(ct.Base)
	if ct.Array || err != nil {
		return rewrite.Column{}, fmt.Errorf("key column %s has type %s, which rekey cannot key on", c.Name, c.Type)
	}
	return rewrite.Column{Name: c.Name, Type: typ, MaxLen: ct.MaxLen}, nil
}

// CreateDDL renders a CREATE TABLE statement for a table named name with
// t's columns, key and interleaving.
func (t *Table) CreateDDL(name string) string {
	var b strings.Builder
	b.WriteString("CREATE TABLE ")
	b.WriteString(rewrite.QuoteIdent(name))
	b.WriteString(" (\n")
	for i, c := range t.Columns {
		b.WriteString("  ")
		b.WriteString(c.DDL())
		if i < len(t.Columns)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString(") PRIMARY KEY (")
	for i, k := range t.Key.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(rewrite.QuoteIdent(k.Name))
		if k.Desc {
			b.WriteString(" DESC")
		}
	}
	b.WriteByte(')')
	if t.Parent != "" {
		b.WriteString(",\n  INTERLEAVE IN PARENT ")
		b.WriteString(rewrite.QuoteIdent(t.Parent))
		if t.OnDeleteCascade {
			b.WriteString(" ON DELETE CASCADE")
		} else {
			b.WriteString(" ON DELETE NO ACTION")
		}
	}
	return b.String()
}

// DDL renders the column definition: Name TYPE [NOT NULL] [DEFAULT (e) |
// AS (e) [STORED]] [OPTIONS (allow_commit_timestamp=true)].
func (c Column) DDL() string {
	s := rewrite.QuoteIdent(c.Name) + " " + c.Type
	if c.NotNull {
		s += " NOT NULL"
	}
	switch {
	case c.Generated:
		s += " AS (" + c.Expression + ")"
		if c.Stored {
			s += " STORED"
		}
	case c.Default != "":
		s += " DEFAULT (" + c.Default + ")"
	}
	if c.AllowCommitTimestamp {
		s += " OPTIONS (allow_commit_timestamp=true)"
	}
	return s
}

// WithKey returns the schema of a target table for t's rows under a new
// primary key:
//
//   - the new key's columns come first, in key order: a source column of
//     the same name keeps its NOT NULL and takes the key's type (it is now
//     written, never generated); a new column (ShardId, Bucket, a UUID
//     column...) is NOT NULL;
//   - every other source column follows in source order, old key columns
//     included, now plain columns (uuid keeps the old key this way);
//   - then the extra columns that are not there yet (e.g. a column keeping
//     the original key).
//
// Name, Parent and OnDeleteCascade are kept: a caller whose new key no
// longer starts with the parent's key clears Parent.
func (t *Table) WithKey(newKey rewrite.KeySchema, extra []Column) *Table {
	out := &Table{Name: t.Name, Parent: t.Parent, OnDeleteCascade: t.OnDeleteCascade, Key: newKey.Clone()}
	if out.Key.Table == "" {
		out.Key.Table = t.Name
	}
	have := func(name string) bool { return out.Column(name) != nil }
	for _, k := range newKey.Columns {
		if have(k.Name) {
			continue // listed twice in the key: KeySchema refuses that already
		}
		c := Column{Name: k.Name, Type: k.SQLType(), NotNull: true}
		if src := t.Column(k.Name); src != nil {
			c.Name, c.NotNull = src.Name, src.NotNull
		}
		out.Columns = append(out.Columns, c)
	}
	for _, c := range t.Columns {
		if !have(c.Name) {
			out.Columns = append(out.Columns, c)
		}
	}
	for _, c := range extra {
		if !have(c.Name) {
			out.Columns = append(out.Columns, c)
		}
	}
	return out
}
