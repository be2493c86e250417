// Package spannerexport writes Spanner's Avro export format, the one
// `gcloud spanner databases export` and the "Cloud Spanner to Avro Files
// on Cloud Storage" template write and `gcloud spanner databases import`
// and the "Avro Files on Cloud Storage to Cloud Spanner" template read:
//
//	DIR/spanner-export.json      {"tables": [{"name": T, "manifestFile": "T-manifest.json"}, ...], "dialect": "GOOGLE_STANDARD_SQL"}
//	DIR/T-manifest.json          {"files": [{"name": "T.avro-00000-of-00002", "md5": base64(MD5)}, ...]}
//	DIR/T.avro-00000-of-00002    Avro object container files
//
// The two JSON files are the proto3 JSON forms of the templates' Export
// and TableManifest messages (DataflowTemplates v1/src/main/proto/
// export.proto). Each table's Avro schema is a record named after the
// table, in namespace "spannerexport", whose properties carry what the
// import needs to create the table: googleFormatVersion, googleStorage
// "CloudSpanner", spannerName, spannerPrimaryKey (and _0, _1, ...),
// spannerParent with spannerOnDeleteAction for an interleaved table, and
// spannerIndex_N, the CREATE INDEX statements. Its fields are the
// columns in table order, each with its Spanner type in "sqlType"; a
// nullable column is a union with null; types map as the export maps
// them: INT64 long, FLOAT64 double, FLOAT32 float, BOOL boolean, STRING,
// DATE, TIMESTAMP and JSON string (TIMESTAMP in RFC 3339, UTC), BYTES
// bytes, NUMERIC bytes with the decimal(38, 9) logical type, ARRAY<T> an
// array of nullable T. A generated column is a "null" field carrying its
// expression (notNull, generationExpression, stored): the import computes
// it. Every table gets at least one Avro file, empty if it has no rows,
// since the import reads a table's schema from its files.
package spannerexport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// File names of an export.
const (
	// ExportFile is the export's summary, written last: its presence
	// marks a complete export.
	ExportFile = "spanner-export.json"
	// Namespace is the Avro namespace of the export's schemas.
	Namespace = "spannerexport"
	// FormatVersion is the googleFormatVersion written.
	FormatVersion = "1.0.0"
	// Codec compresses the Avro blocks (every Avro reader has deflate).
	Codec = "deflate"
)

// ManifestName is table's manifest file name.
func ManifestName(table string) string { return table + "-manifest.json" }

// DataName is the name of table's file i of n.
func DataName(table string, i, n int) string {
	return fmt.Sprintf("%s.avro-%05d-of-%05d", table, i, n)
}

// Export is spanner-export.json.
type Export struct {
	Tables  []ExportTable `json:"tables"`
	Dialect string        `json:"dialect,omitempty"`
}

// ExportTable is one table of Export.
type ExportTable struct {
	Name         string `json:"name"`
	ManifestFile string `json:"manifestFile"`
}

// TableManifest is a table's manifest.
type TableManifest struct {
	Files []ManifestFile `json:"files"`
}

// ManifestFile is one Avro file of a table, with the base64 of its MD5.
type ManifestFile struct {
	Name string `json:"name"`
	MD5  string `json:"md5"`
}

// Marshal renders an export file as the templates write them (indented
// JSON).
func Marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		panic(err) // the types above always marshal
	}
	return b.Bytes()
}

// Schema is table t's Avro schema as JSON, with indexes (CREATE INDEX
// statements) in its spannerIndex_N properties. It fails on a column type
// rekey cannot convert (spannerdb.ParseColumnType).
func Schema(t *spannerdb.Table, indexes []string) (string, error) {
	tt, err := NewTable(t)
	if err != nil {
		return "", err
	}
	s := map[string]any{
		"type":                "record",
		"name":                t.Name,
		"namespace":           Namespace,
		"spannerName":         t.Name,
		"googleFormatVersion": FormatVersion,
		"googleStorage":       "CloudSpanner",
	}
	pk := make([]string, len(t.Key.Columns))
	for i, k := range t.Key.Columns {
		pk[i] = "`" + k.Name + "` ASC"
		if k.Desc {
			pk[i] = "`" + k.Name + "` DESC"
		}
		s[fmt.Sprintf("spannerPrimaryKey_%d", i)] = pk[i]
	}
	s["spannerPrimaryKey"] = strings.Join(pk, ",")
	if t.Parent != "" {
		s["spannerParent"] = t.Parent
		s["spannerOnDeleteAction"] = "no action"
		if t.OnDeleteCascade {
			s["spannerOnDeleteAction"] = "cascade"
		}
	}
	for i, ix := range indexes {
		s[fmt.Sprintf("spannerIndex_%d", i)] = ix
	}
	fields := make([]map[string]any, 0, len(t.Columns))
	for i, c := range t.Columns {
		f := map[string]any{"name": c.Name, "sqlType": c.Type}
		if c.AllowCommitTimestamp {
			f["spannerOption_0"] = "allow_commit_timestamp=TRUE"
		}
		if c.Generated {
			f["type"], f["default"] = "null", nil
			f["notNull"] = fmt.Sprint(c.NotNull)
			f["generationExpression"] = c.Expression
			f["stored"] = fmt.Sprint(c.Stored)
			fields = append(fields, f)
			continue
		}
		if c.Default != "" {
			f["defaultExpression"] = c.Default
		}
		ct := tt.types[i]
		var typ any = scalarType(ct.Base)
		if ct.Array {
			typ = map[string]any{"type": "array", "items": []any{"null", typ}}
		}
		if !c.NotNull {
			typ = []any{"null", typ}
		}
		f["type"] = typ
		fields = append(fields, f)
	}
	s["fields"] = fields
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // ARRAY<INT64> as written, not \u003c
	if err := enc.Encode(s); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// scalarType is the Avro type of a Spanner scalar type.
func scalarType(base string) any {
	switch base {
	case spannerdb.TypeInt64:
		return "long"
	case spannerdb.TypeFloat64:
		return "double"
	case spannerdb.TypeFloat32:
		return "float"
	case spannerdb.TypeBool:
		return "boolean"
	case spannerdb.TypeBytes:
		return "bytes"
	case spannerdb.TypeNumeric:
		return map[string]any{"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 9}
	}
	return "string" // STRING, DATE, TIMESTAMP, JSON
}

// Table is a table of the export with its columns' types parsed once,
// for Datum.
type Table struct {
	*spannerdb.Table
	types []spannerdb.ColumnType // by column; zero for a generated one
}

// NewTable prepares t for Datum. It fails on a column type rekey cannot
// convert (spannerdb.ParseColumnType).
func NewTable(t *spannerdb.Table) (*Table, error) {
	out := &Table{Table: t, types: make([]spannerdb.ColumnType, len(t.Columns))}
	for i, c := range t.Columns {
		if c.Generated {
			continue
		}
		ct, err := spannerdb.ParseColumnType(c.Type)
		if err != nil {
			return nil, fmt.Errorf("table %s column %s: %w", t.Name, c.Name, err)
		}
		out.types[i] = ct
	}
	return out, nil
}

// Datum is rec as a datum of the table's schema (for goavro): rec is
// first normalized for the table (spannerdb.Normalize: every value
// converted to its column's type, NOT NULL and lengths checked), so a
// record the Spanner sink would refuse is refused here with the same
// error. A NOT NULL column with a DEFAULT that the record leaves out is
// refused too: the export holds values, not defaults.
func (t *Table) Datum(rec *record.Record) (map[string]any, error) {
	norm, err := spannerdb.Normalize(rec, t.Table)
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(t.Columns))
	for i, c := range t.Columns {
		if c.Generated {
			out[c.Name] = nil
			continue
		}
		v, _ := norm.Get(c.Name)
		if v.Kind == record.KindNull && c.NotNull {
			return nil, fmt.Errorf("column %s of table %s is NOT NULL with a DEFAULT, but the record has no value for it (an export holds values, not defaults)", c.Name, t.Name)
		}
		ct := t.types[i]
		d := datum(v, ct)
		if !c.NotNull && d != nil {
			d = union(d, ct)
		}
		out[c.Name] = d
	}
	return out, nil
}

// union wraps a nullable column's or element's value as goavro takes a
// union branch: {"long": v}.
func union(d any, ct spannerdb.ColumnType) any {
	if ct.Array {
		return map[string]any{"array": d}
	}
	name := scalarType(ct.Base)
	if m, ok := name.(map[string]any); ok {
		return map[string]any{m["type"].(string) + ".decimal": d}
	}
	return map[string]any{name.(string): d}
}

// datum is one normalized value of type ct, nil for NULL.
func datum(v record.Value, ct spannerdb.ColumnType) any {
	if v.Kind == record.KindNull {
		return nil
	}
	if ct.Array {
		elem := spannerdb.ColumnType{Base: ct.Base, MaxLen: ct.MaxLen}
		items := make([]any, len(v.Array))
		for i, e := range v.Array {
			if d := datum(e, elem); d != nil {
				items[i] = union(d, elem)
			}
		}
		return items
	}
	switch ct.Base {
	case spannerdb.TypeInt64:
		return v.Int
	case spannerdb.TypeFloat64:
		return v.Float
	case spannerdb.TypeFloat32:
		return float32(v.Float)
	case spannerdb.TypeBool:
		return v.Int != 0
	case spannerdb.TypeBytes:
		return v.Bytes
	case spannerdb.TypeNumeric:
		r, _ := new(big.Rat).SetString(v.Str) // canonical decimal text
		return r
	case spannerdb.TypeTimestamp:
		return v.Time.UTC().Format(time.RFC3339Nano)
	case spannerdb.TypeDate:
		return rewrite.DateString(v.Int)
	}
	return v.Str // STRING, JSON
}
