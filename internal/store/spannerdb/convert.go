package spannerdb

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/civil"
	"cloud.google.com/go/spanner"
	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// RowToRecord converts a row read from t (a query over t's columns) into
// a record: one field per row column, in row order, named as the row names
// it. Values are decoded by the type the row carries:
//
//	INT64 → int            FLOAT64, FLOAT32 → float   BOOL → bool
//	STRING → string        BYTES → bytes              TIMESTAMP → timestamp (UTC)
//	DATE → date            NUMERIC → numeric          JSON → json (Spanner's normalized text)
//	ARRAY<T> → array of T  NULL → null
//
// A column of another type (STRUCT, PROTO, ENUM, UUID, INTERVAL...) is an
// error naming it; the record returned with the error holds the columns
// that did convert, so a dead letter can show them.
func RowToRecord(row *spanner.Row, t *Table) (record.Record, error) {
	return RowToRecordSpare(row, t, 0)
}

// RowToRecordSpare is RowToRecord with room in the record's fields for
// spare more (the fields a rewrite adds in place: transforms.RewriteOwning).
func RowToRecordSpare(row *spanner.Row, t *Table, spare int) (record.Record, error) {
	rec := record.Record{Table: t.Name, Fields: make([]record.Field, 0, row.Size()+spare)}
	var firstErr error
	for i := range row.Size() {
		name := row.ColumnName(i)
		v, err := decodeValue(row.ColumnType(i), row.ColumnValue(i))
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("column %s: %w", name, err)
			}
			continue
		}
		rec.Fields = append(rec.Fields, record.Field{Name: name, Value: v})
	}
	return rec, firstErr
}

func decodeValue(t *sppb.Type, v *structpb.Value) (record.Value, error) {
	if t == nil || v == nil {
		return record.Value{}, fmt.Errorf("no type or value")
	}
	if _, ok := v.Kind.(*structpb.Value_NullValue); ok {
		return record.Value{}, nil
	}
	str := func() (string, error) {
		s, ok := v.Kind.(*structpb.Value_StringValue)
		if !ok {
			return "", fmt.Errorf("%s value is not encoded as a string: %v", t.Code, v)
		}
		return s.StringValue, nil
	}
	switch t.Code {
	case sppb.TypeCode_INT64:
		s, err := str()
		if err != nil {
			return record.Value{}, err
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return record.Value{}, fmt.Errorf("INT64 %q: %w", s, err)
		}
		return record.Int(n), nil
	case sppb.TypeCode_FLOAT64, sppb.TypeCode_FLOAT32:
		switch k := v.Kind.(type) {
		case *structpb.Value_NumberValue:
			if math.IsNaN(k.NumberValue) {
				return record.Float(math.NaN()), nil // one NaN, whatever its payload
			}
			return record.Float(k.NumberValue), nil
		case *structpb.Value_StringValue:
			switch k.StringValue {
			case "NaN":
				return record.Float(math.NaN()), nil
			case "Infinity":
				return record.Float(math.Inf(1)), nil
			case "-Infinity":
				return record.Float(math.Inf(-1)), nil
			}
		}
		return record.Value{}, fmt.Errorf("bad %s value %v", t.Code, v)
	case sppb.TypeCode_BOOL:
		b, ok := v.Kind.(*structpb.Value_BoolValue)
		if !ok {
			return record.Value{}, fmt.Errorf("bad BOOL value %v", v)
		}
		return record.Bool(b.BoolValue), nil
	case sppb.TypeCode_STRING:
		s, err := str()
		return record.String(s), err
	case sppb.TypeCode_BYTES:
		s, err := str()
		if err != nil {
			return record.Value{}, err
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return record.Value{}, fmt.Errorf("BYTES: %w", err)
		}
		return record.Bytes(b), nil
	case sppb.TypeCode_TIMESTAMP:
		s, err := str()
		if err != nil {
			return record.Value{}, err
		}
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return record.Value{}, fmt.Errorf("TIMESTAMP %q: %w", s, err)
		}
		return record.Time(ts), nil
	case sppb.TypeCode_DATE:
		s, err := str()
		if err != nil {
			return record.Value{}, err
		}
		d, err := rewrite.ParseDate(s)
		if err != nil {
			return record.Value{}, err
		}
		return record.Value{Kind: record.KindDate, Int: d.Int}, nil
	case sppb.TypeCode_NUMERIC:
		if t.TypeAnnotation == sppb.TypeAnnotationCode_PG_NUMERIC {
			return record.Value{}, fmt.Errorf("PostgreSQL NUMERIC is not supported")
		}
		s, err := str()
		if err != nil {
			return record.Value{}, err
		}
		n, err := rewrite.Numeric(s)
		if err != nil {
			return record.Value{}, err
		}
		return record.Value{Kind: record.KindNumeric, Str: n.Str}, nil
	case sppb.TypeCode_JSON:
		s, err := str()
		return record.Value{Kind: record.KindJSON, Str: s}, err
	case sppb.TypeCode_ARRAY:
		l, ok := v.Kind.(*structpb.Value_ListValue)
		if !ok {
			return record.Value{}, fmt.Errorf("bad ARRAY value %v", v)
		}
		arr := make([]record.Value, len(l.ListValue.Values))
		for i, e := range l.ListValue.Values {
			ev, err := decodeValue(t.ArrayElementType, e)
			if err != nil {
				return record.Value{}, fmt.Errorf("element %d: %w", i, err)
			}
			arr[i] = ev
		}
		return record.Value{Kind: record.KindArray, Array: arr}, nil
	}
	return record.Value{}, fmt.Errorf("Spanner type %s is not supported", t.Code)
}

// MutationFor converts a record into a mutation of table t: InsertOrUpdate
// for mode "upsert" (or ""), Insert for "insert" (see ConvertRow for the
// conversion and what it refuses), and for "delete" a Delete of the
// record's primary key (SpannerKey: only the key columns are read; a
// missing one is refused).
func MutationFor(rec *record.Record, t *Table, mode string) (*spanner.Mutation, error) {
	if err := storewrite.CheckMode(mode); err != nil {
		return nil, err
	}
	if mode == storewrite.ModeDelete {
		key, err := SpannerKey(rec, t)
		if err != nil {
			return nil, err
		}
		return spanner.Delete(t.Name, key), nil
	}
	cols, vals, err := ConvertRow(rec, t)
	if err != nil {
		return nil, err
	}
	if mode == storewrite.ModeInsert {
		return spanner.Insert(t.Name, cols, vals), nil
	}
	return spanner.InsertOrUpdate(t.Name, cols, vals), nil
}

// ConvertRow converts a record's fields into t's column names and Spanner
// values, in the record's order. Each value is converted to its column's
// type with record.Coerce, so a typeless source's strings become
// TIMESTAMP, DATE, BYTES, NUMERIC... (see Normalize); NULL becomes a typed
// NULL (spanner.NullInt64{} and so on, a nil typed slice for an array).
// Generated columns are skipped. It refuses, naming the column:
//
//   - a field that is not a column of t ("column X not in table T"), or
//     names a column twice;
//   - a value that does not convert, a STRING(N) or BYTES(N) value longer
//     than N, a string that is not valid UTF-8;
//   - a NOT NULL column (without a DEFAULT) that is missing or NULL.
func ConvertRow(rec *record.Record, t *Table) (cols []string, vals []any, err error) {
	cols = make([]string, 0, len(rec.Fields))
	vals = make([]any, 0, len(rec.Fields))
	err = eachColumn(rec, t, func(c *Column, ct ColumnType, v record.Value) {
		cols = append(cols, c.Name)
		vals = append(vals, spannerValue(v, ct))
	})
	if err != nil {
		return nil, nil, err
	}
	return cols, vals, nil
}

// Normalize returns the record as table t stores it: the fields of
// written columns (generated ones left out), named as t names them, each
// value converted to its column's type (FLOAT32 rounded to float32, JSON
// as text, NUMERIC canonical). A row read back with RowToRecord equals it,
// except JSON, which Spanner normalizes (compare JSON with record.JSONEqual).
func Normalize(rec *record.Record, t *Table) (record.Record, error) {
	out := record.Record{Table: t.Name, Fields: make([]record.Field, 0, len(rec.Fields))}
	err := eachColumn(rec, t, func(c *Column, _ ColumnType, v record.Value) {
		out.Fields = append(out.Fields, record.Field{Name: c.Name, Value: v})
	})
	return out, err
}

// eachColumn converts rec's fields for t and calls f for each written one.
func eachColumn(rec *record.Record, t *Table, f func(c *Column, ct ColumnType, v record.Value)) error {
	seen := make([]bool, len(t.Columns))
	for _, fd := range rec.Fields {
		i := t.columnIndex(fd.Name)
		if i < 0 {
			return fmt.Errorf("column %s not in table %s", fd.Name, t.Name)
		}
		c := &t.Columns[i]
		if seen[i] {
			return fmt.Errorf("column %s of table %s given twice", c.Name, t.Name)
		}
		seen[i] = true
		if c.Generated {
			continue
		}
		ct, err := ParseColumnType(c.Type)
		if err != nil {
			return fmt.Errorf("column %s: %w", c.Name, err)
		}
		v, err := convertValue(fd.Value, ct)
		if err != nil {
			return fmt.Errorf("column %s: %w", c.Name, err)
		}
		if c.NotNull && v.Kind == record.KindNull {
			return fmt.Errorf("column %s of table %s is NOT NULL, but the value is NULL", c.Name, t.Name)
		}
		f(c, ct, v)
	}
	for i, c := range t.Columns {
		if c.NotNull && !c.Generated && c.Default == "" && !seen[i] {
			return fmt.Errorf("column %s of table %s is NOT NULL, but the record has no value for it", c.Name, t.Name)
		}
	}
	return nil
}

// convertValue converts v to what a column of type ct stores.
func convertValue(v record.Value, ct ColumnType) (record.Value, error) {
	if !ct.Array {
		return convertScalar(v, ct)
	}
	switch v.Kind {
	case record.KindNull:
		return v, nil
	case record.KindArray:
	default:
		return record.Value{}, fmt.Errorf("cannot convert %s %s to %s", v.Kind, v.String(), ct)
	}
	out := make([]record.Value, len(v.Array))
	elem := ColumnType{Base: ct.Base, MaxLen: ct.MaxLen}
	for i, e := range v.Array {
		ev, err := convertScalar(e, elem)
		if err != nil {
			return record.Value{}, fmt.Errorf("element %d: %w", i, err)
		}
		out[i] = ev
	}
	return record.Value{Kind: record.KindArray, Array: out}, nil
}

// Earliest and latest TIMESTAMP Spanner stores.
var (
	minTimestamp = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTimestamp = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

func convertScalar(v record.Value, ct ColumnType) (record.Value, error) {
	if v.Kind == record.KindNull {
		return v, nil
	}
	switch ct.Base {
	case TypeJSON:
		return jsonValue(v)
	case TypeFloat32, TypeFloat64:
		cv, err := record.Coerce(v, rewrite.TypeFloat64)
		if err != nil {
			if ct.Base == TypeFloat32 {
				err = fmt.Errorf("%w (FLOAT32)", err)
			}
			return cv, err
		}
		f := cv.Float
		switch {
		case math.IsNaN(f):
			// Spanner keeps no NaN payload: one NaN reads back.
			return record.Float(math.NaN()), nil
		case ct.Base == TypeFloat64:
			return cv, nil
		case !math.IsInf(f, 0) && math.Abs(f) > math.MaxFloat32:
			return record.Value{}, fmt.Errorf("%g is out of the FLOAT32 range", f)
		}
		return record.Float(float64(float32(f))), nil
	}
	rt, err := rewrite.ParseType(ct.Base)
	if err != nil {
		return record.Value{}, err
	}
	cv, err := record.Coerce(v, rt)
	if err != nil {
		return cv, err
	}
	switch ct.Base {
	case TypeString:
		if !utf8.ValidString(cv.Str) {
			return record.Value{}, fmt.Errorf("string %q is not valid UTF-8", cv.Str)
		}
		if ct.MaxLen > 0 {
			if n := utf8.RuneCountInString(cv.Str); n > ct.MaxLen {
				return record.Value{}, fmt.Errorf("string of %d characters is longer than %s allows", n, ct)
			}
		}
	case TypeBytes:
		if ct.MaxLen > 0 && len(cv.Bytes) > ct.MaxLen {
			return record.Value{}, fmt.Errorf("%d bytes are more than %s allows", len(cv.Bytes), ct)
		}
		if cv.Bytes == nil {
			cv.Bytes = []byte{} // nil would be written as NULL
		}
	case TypeTimestamp:
		if cv.Time.Before(minTimestamp) || cv.Time.After(maxTimestamp) {
			return record.Value{}, fmt.Errorf("timestamp %s is outside 0001-01-01..9999-12-31", cv.Time.Format(time.RFC3339Nano))
		}
	case TypeDate:
		if cv.Int < minDate || cv.Int > maxDate {
			return record.Value{}, fmt.Errorf("date %s is outside 0001-01-01..9999-12-31", rewrite.DateString(cv.Int))
		}
	}
	return cv, nil
}

// Earliest and latest DATE Spanner stores, as days since 1970-01-01.
var (
	minDate = rewrite.Date(1, 1, 1).Int
	maxDate = rewrite.Date(9999, 12, 31).Int
)

// jsonValue converts a value to JSON text: json values are checked,
// strings are taken as JSON text (they must be valid JSON), other values
// (a typeless source's objects, arrays, numbers, booleans) are rendered as
// JSON.
func jsonValue(v record.Value) (record.Value, error) {
	var text string
	switch v.Kind {
	case record.KindJSON, record.KindString:
		text = v.Str
	case record.KindEntity, record.KindArray, record.KindInt, record.KindFloat, record.KindBool:
		text = string(record.AppendJSONValue(nil, v))
	default:
		return record.Value{}, fmt.Errorf("cannot convert %s %s to JSON", v.Kind, v.String())
	}
	if !json.Valid([]byte(text)) {
		return record.Value{}, fmt.Errorf("%q is not valid JSON text", text)
	}
	return record.Value{Kind: record.KindJSON, Str: text}, nil
}

// spannerValue turns a converted value (see convertValue) into the Go
// value the Spanner client encodes as type ct.
func spannerValue(v record.Value, ct ColumnType) any {
	if !ct.Array {
		return scalarValue(v, ct.Base)
	}
	null := v.Kind == record.KindNull
	n := len(v.Array)
	switch ct.Base {
	case TypeInt64:
		return typedSlice[spanner.NullInt64](null, n, v, ct.Base)
	case TypeFloat64:
		return typedSlice[spanner.NullFloat64](null, n, v, ct.Base)
	case TypeFloat32:
		return typedSlice[spanner.NullFloat32](null, n, v, ct.Base)
	case TypeString:
		return typedSlice[spanner.NullString](null, n, v, ct.Base)
	case TypeBool:
		return typedSlice[spanner.NullBool](null, n, v, ct.Base)
	case TypeBytes:
		return typedSlice[[]byte](null, n, v, ct.Base)
	case TypeTimestamp:
		return typedSlice[spanner.NullTime](null, n, v, ct.Base)
	case TypeDate:
		return typedSlice[spanner.NullDate](null, n, v, ct.Base)
	case TypeNumeric:
		return typedSlice[spanner.NullNumeric](null, n, v, ct.Base)
	case TypeJSON:
		return typedSlice[spanner.NullJSON](null, n, v, ct.Base)
	}
	panic("spannerdb: unsupported array type " + ct.String()) // ParseColumnType refuses it
}

func typedSlice[T any](null bool, n int, v record.Value, base string) []T {
	if null {
		return nil
	}
	out := make([]T, n)
	for i, e := range v.Array {
		out[i] = scalarValue(e, base).(T)
	}
	return out
}

func scalarValue(v record.Value, base string) any {
	ok := v.Kind != record.KindNull
	switch base {
	case TypeInt64:
		return spanner.NullInt64{Int64: v.Int, Valid: ok}
	case TypeFloat64:
		return spanner.NullFloat64{Float64: v.Float, Valid: ok}
	case TypeFloat32:
		return spanner.NullFloat32{Float32: float32(v.Float), Valid: ok}
	case TypeString:
		return spanner.NullString{StringVal: v.Str, Valid: ok}
	case TypeBool:
		return spanner.NullBool{Bool: v.Int != 0, Valid: ok}
	case TypeBytes:
		if !ok {
			return []byte(nil)
		}
		return v.Bytes
	case TypeTimestamp:
		return spanner.NullTime{Time: v.Time, Valid: ok}
	case TypeDate:
		if !ok {
			return spanner.NullDate{}
		}
		return spanner.NullDate{Date: civil.DateOf(time.Unix(v.Int*86400, 0).UTC()), Valid: true}
	case TypeNumeric:
		if !ok {
			return spanner.NullNumeric{}
		}
		var r big.Rat
		r.SetString(v.Str) // canonical decimal text from record.Coerce
		return spanner.NullNumeric{Numeric: r, Valid: true}
	case TypeJSON:
		if !ok {
			return spanner.NullJSON{}
		}
		return spanner.NullJSON{Value: json.RawMessage(v.Str), Valid: true}
	}
	panic("spannerdb: unsupported type " + base) // ParseColumnType refuses it
}

// KeyOf returns the record's primary key values in t's key order, each
// converted to its key column's type (record.KeyValue). A missing key
// column is an error.
func KeyOf(rec *record.Record, t *Table) ([]rewrite.Value, error) {
	key := make([]rewrite.Value, len(t.Key.Columns))
	for i, c := range t.Key.Columns {
		v, ok := rec.Get(c.Name)
		if !ok {
			return nil, fmt.Errorf("key column %s of table %s missing from the record", c.Name, t.Name)
		}
		kv, err := record.KeyValue(v, c.Type)
		if err != nil {
			return nil, fmt.Errorf("key column %s: %w", c.Name, err)
		}
		key[i] = kv
	}
	return key, nil
}

// SpannerKey returns the record's primary key as a spanner.Key, for reads
// by key.
func SpannerKey(rec *record.Record, t *Table) (spanner.Key, error) {
	key := make(spanner.Key, len(t.Key.Columns))
	for i, c := range t.Key.Columns {
		v, ok := rec.Get(c.Name)
		if !ok {
			return nil, fmt.Errorf("key column %s of table %s missing from the record", c.Name, t.Name)
		}
		ct := ColumnType{Base: c.Type.String(), MaxLen: c.MaxLen}
		cv, err := convertScalar(v, ct)
		if err != nil {
			return nil, fmt.Errorf("key column %s: %w", c.Name, err)
		}
		key[i] = scalarValue(cv, ct.Base)
	}
	return key, nil
}
