package source

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
	"unicode/utf8"

	"github.com/linkedin/goavro/v2"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// Avro files as Spanner's export writes them: one Avro object container
// file per table part, a record schema named after the table whose fields
// are the columns in order, each field carrying its Spanner type in the
// "sqlType" property (e.g. "TIMESTAMP", "STRING(36)", "ARRAY<INT64>").
// Nullable columns are unions with null. Spanner exports TIMESTAMP, DATE,
// NUMERIC and JSON as strings; "sqlType" turns them back into their
// kinds, so a row read here equals the row read from Spanner.

type avroField struct {
	Name    string `json:"name"`
	SQLType string `json:"sqlType"`
}

type avroSchema struct {
	Name   string      `json:"name"`
	Fields []avroField `json:"fields"`
}

func readAvro(r io.Reader, name string, ok func(record.Record), bad func(int, string, error)) error {
	ocf, err := goavro.NewOCFReader(r)
	if err != nil {
		return fmt.Errorf("not an Avro object container file: %w", err)
	}
	var schema avroSchema
	if err := json.Unmarshal([]byte(ocf.Codec().Schema()), &schema); err != nil || len(schema.Fields) == 0 {
		return fmt.Errorf("Avro schema is not a record of columns: %v", err)
	}
	for n := 1; ocf.Scan(); n++ {
		datum, err := ocf.Read()
		if err != nil {
			return fmt.Errorf("Avro record %d: %w", n, err)
		}
		m, isMap := datum.(map[string]any)
		if !isMap {
			bad(n, fmt.Sprint(datum), fmt.Errorf("Avro record %d is not a record", n))
			continue
		}
		rec := record.Record{Table: schema.Name, Fields: make([]record.Field, 0, len(schema.Fields))}
		var ferr error
		for _, f := range schema.Fields {
			v, err := avroValue(m[f.Name], f.SQLType)
			if err != nil {
				ferr = fmt.Errorf("column %s: %w", f.Name, err)
				break
			}
			rec.Fields = append(rec.Fields, record.Field{Name: f.Name, Value: v})
		}
		if ferr != nil {
			bad(n, fmt.Sprint(datum), ferr)
			continue
		}
		ok(rec)
	}
	return ocf.Err()
}

// avroValue converts one decoded Avro value, using the column's Spanner
// type where the Avro type is not enough.
func avroValue(v any, sqlType string) (record.Value, error) {
	if u, isUnion := v.(map[string]any); isUnion && len(u) == 1 {
		for _, inner := range u {
			v = inner
		}
	}
	elem, isArray := strings.CutPrefix(strings.ToUpper(sqlType), "ARRAY<")
	if isArray {
		elem = strings.TrimSuffix(elem, ">")
	}
	switch t := v.(type) {
	case nil:
		return record.Value{}, nil
	case []any:
		out := make([]record.Value, len(t))
		for i, e := range t {
			ev, err := avroValue(e, elem)
			if err != nil {
				return record.Value{}, err
			}
			out[i] = ev
		}
		return record.Value{Kind: record.KindArray, Array: out}, nil
	case int64:
		return record.Int(t), nil
	case int32:
		return record.Int(int64(t)), nil
	case float64:
		return record.Float(t), nil
	case float32:
		return record.Float(float64(t)), nil
	case bool:
		return record.Bool(t), nil
	case []byte:
		return record.Bytes(t), nil
	case *big.Rat:
		n, err := rewrite.Numeric(t.FloatString(9))
		if err != nil {
			return record.Value{}, err
		}
		return record.Value{Kind: record.KindNumeric, Str: n.Str}, nil
	case string:
		if !utf8.ValidString(t) {
			// Refused at read, as a JSON line's: the record (its raw
			// text, bytes kept) is dead-lettered, not carried on.
			return record.Value{}, errors.New("string is not valid UTF-8")
		}
		base := elem
		if i := strings.IndexByte(base, '('); i >= 0 {
			base = base[:i]
		}
		switch base {
		case "JSON":
			return record.Value{Kind: record.KindJSON, Str: t}, nil
		case "TIMESTAMP", "DATE", "NUMERIC":
			typ, _ := rewrite.ParseType(base)
			return record.Coerce(record.String(t), typ)
		}
		return record.String(t), nil
	}
	return record.Value{}, fmt.Errorf("unsupported Avro value %T", v)
}
