package datastoredb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"cloud.google.com/go/datastore/apiv1/datastorepb"
	"google.golang.org/genproto/googleapis/type/latlng"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// Entity JSON is the Datastore API's Entity (google.datastore.v1) in the
// proto3 JSON mapping, one entity per line: what Google's Dataflow
// templates "Datastore to Cloud Storage Text" write (JsonFormat.printer()
// of the v1 Entity, without insignificant whitespace) and "Cloud Storage
// Text to Datastore" read.
//
//	{"key":{"partitionId":{"projectId":"p","namespaceId":"ns"},"path":[{"kind":"User","name":"u1"}]},
//	 "properties":{"age":{"integerValue":"42"},"bio":{"stringValue":"…","excludeFromIndexes":true}}}
//
// FromProto and ToProto convert between a v1 Entity and a record, value by
// value as ToEntity and FromEntity do (see the package doc), with these
// rules of their own, each with a test:
//   - Exact: timestamps keep their nanoseconds, floats their bits (NaN is
//     written "NaN"), strings and blobs over 1500 bytes keep the index flag
//     they have, and an embedded entity's properties keep theirs: nothing
//     is normalised for the store, so a file read and written again holds
//     the same entities (proto.Equal).
//   - excludeFromIndexes is the record field's NoIndex. Datastore keeps the
//     flag of an array on its elements (an arrayValue must not set it), so
//     an array's elements must agree on it: the record model has one flag
//     per property, and an array whose elements differ is refused rather
//     than changed. An empty array has no flag.
//   - meaning (a legacy annotation of App Engine's SDKs) has no place in
//     the record model and is dropped, as the Go client does when it reads
//     from Datastore.
//   - The project: rekey's keys have none (DatastoreKey has the database and
//     namespace of partitionId). FromProto checks that every key of an
//     entity (its key, key values, embedded entities' keys) is in the
//     project given, or when none is given in the entity key's project,
//     or names none: a reference to another project would otherwise change
//     its meaning when written back. ToProto writes the project given into
//     every key (none when it is empty; the "Text to Datastore" template
//     writes into the project it is given whatever the file says).
//   - Property names and the entity key follow the package's rules
//     (rewrite.ValidatePropertyName, rewrite.ValidateDatastoreKey); an
//     embedded entity's key travels as its EmbeddedKeyField field. Arrays
//     inside arrays are refused, as Datastore refuses them.

// ParseEntityJSON parses one line of entity JSON into a record (see
// FromProto; project may be empty).
func ParseEntityJSON(line []byte, project string) (record.Record, error) {
	var e datastorepb.Entity
	if err := protojson.Unmarshal(line, &e); err != nil {
		return record.Record{}, fmt.Errorf("not a Datastore entity in JSON: %w", err)
	}
	return FromProto(&e, project)
}

// AppendEntityJSON appends rec as one line of entity JSON (see ToProto),
// without the newline, in the templates' compact form: protojson's
// output with insignificant whitespace removed.
func AppendEntityJSON(buf []byte, rec *record.Record, project string) ([]byte, error) {
	e, err := ToProto(rec, project)
	if err != nil {
		return buf, err
	}
	js, err := protojson.Marshal(e)
	if err != nil {
		return buf, fmt.Errorf("entity %s: %w", rec.Key, err)
	}
	out := bytes.NewBuffer(buf)
	if err := json.Compact(out, js); err != nil {
		return buf, err
	}
	return out.Bytes(), nil
}

// FromProto converts a Datastore API entity to a record: Table is the
// key's leaf kind, Fields the properties sorted by name (see the rules
// above). project, if not empty, is the project every key must be in.
func FromProto(e *datastorepb.Entity, project string) (record.Record, error) {
	if e.GetKey() == nil {
		return record.Record{}, errors.New("entity has no key")
	}
	c := protoReader{project: project}
	k, err := c.key(e.Key)
	if err != nil {
		return record.Record{}, fmt.Errorf("entity key: %w", err)
	}
	if err := rewrite.ValidateDatastoreKey(k); err != nil {
		return record.Record{}, err
	}
	fields, err := c.properties(e.Properties, nil)
	if err != nil {
		return record.Record{}, fmt.Errorf("entity %s: %w", k, err)
	}
	return record.Record{Table: k.Leaf().Kind, Key: &k, Fields: fields}, nil
}

// protoReader converts one entity's keys and values, checking that its
// keys share one project.
type protoReader struct {
	project string // the keys' project; "" until the first key names one
}

func (c *protoReader) key(k *datastorepb.Key) (rewrite.DatastoreKey, error) {
	p := k.GetPartitionId()
	if proj := p.GetProjectId(); proj != "" {
		if c.project == "" {
			c.project = proj
		} else if proj != c.project {
			return rewrite.DatastoreKey{}, fmt.Errorf("key in project %q, not %q: rekey's keys carry no project, so keys of one entity must be in one project (the source's project, if it names one)", proj, c.project)
		}
	}
	out := rewrite.DatastoreKey{Database: p.GetDatabaseId(), Namespace: p.GetNamespaceId(), Path: make([]rewrite.PathElement, len(k.GetPath()))}
	for i, e := range k.GetPath() {
		out.Path[i] = rewrite.PathElement{Kind: e.GetKind(), ID: e.GetId(), Name: e.GetName()}
	}
	return out, nil
}

// properties converts an entity's properties, sorted by name; an embedded
// entity's key comes first as EmbeddedKeyField.
func (c *protoReader) properties(props map[string]*datastorepb.Value, embeddedKey *datastorepb.Key) ([]record.Field, error) {
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	slices.Sort(names)
	fields := make([]record.Field, 0, len(names)+1)
	if embeddedKey != nil {
		k, err := c.key(embeddedKey)
		if err != nil {
			return nil, fmt.Errorf("embedded entity key: %w", err)
		}
		fields = append(fields, record.Field{Name: EmbeddedKeyField, Value: record.Key(k)})
	}
	for _, name := range names {
		if err := rewrite.ValidatePropertyName(name); err != nil {
			return nil, err
		}
		v, noIndex, err := c.value(props[name], false)
		if err != nil {
			return nil, fmt.Errorf("property %q: %w", name, err)
		}
		fields = append(fields, record.Field{Name: name, Value: v, NoIndex: noIndex})
	}
	if len(fields) == 0 {
		return nil, nil
	}
	return fields, nil
}

// value converts a value and returns its excludeFromIndexes (an array's:
// its elements').
func (c *protoReader) value(v *datastorepb.Value, inArray bool) (record.Value, bool, error) {
	noIndex := v.GetExcludeFromIndexes()
	switch x := v.GetValueType().(type) {
	case *datastorepb.Value_NullValue:
		return record.Value{}, noIndex, nil
	case *datastorepb.Value_BooleanValue:
		return record.Bool(x.BooleanValue), noIndex, nil
	case *datastorepb.Value_IntegerValue:
		return record.Int(x.IntegerValue), noIndex, nil
	case *datastorepb.Value_DoubleValue:
		return record.Float(x.DoubleValue), noIndex, nil
	case *datastorepb.Value_TimestampValue:
		return record.Time(x.TimestampValue.AsTime()), noIndex, nil
	case *datastorepb.Value_StringValue:
		return record.String(x.StringValue), noIndex, nil
	case *datastorepb.Value_BlobValue:
		return record.Bytes(x.BlobValue), noIndex, nil
	case *datastorepb.Value_GeoPointValue:
		return record.Value{Kind: record.KindGeoPoint, Lat: x.GeoPointValue.GetLatitude(), Lng: x.GeoPointValue.GetLongitude()}, noIndex, nil
	case *datastorepb.Value_KeyValue:
		k, err := c.key(x.KeyValue)
		if err != nil {
			return record.Value{}, false, err
		}
		return record.Key(k), noIndex, nil
	case *datastorepb.Value_EntityValue:
		fields, err := c.properties(x.EntityValue.GetProperties(), x.EntityValue.GetKey())
		if err != nil {
			return record.Value{}, false, err
		}
		return record.Value{Kind: record.KindEntity, Entity: fields}, noIndex, nil
	case *datastorepb.Value_ArrayValue:
		return c.array(x.ArrayValue, noIndex, inArray)
	}
	return record.Value{}, false, errors.New("value has no type (one of nullValue, booleanValue, integerValue, doubleValue, timestampValue, keyValue, stringValue, blobValue, geoPointValue, entityValue, arrayValue)")
}

func (c *protoReader) array(a *datastorepb.ArrayValue, arrayNoIndex, inArray bool) (record.Value, bool, error) {
	switch {
	case inArray:
		return record.Value{}, false, errors.New("an array inside an array (Datastore refuses nested arrays)")
	case arrayNoIndex:
		return record.Value{}, false, errors.New("excludeFromIndexes is set on an arrayValue: Datastore keeps it on the array's elements")
	}
	vals := a.GetValues()
	out := record.Value{Kind: record.KindArray, Array: make([]record.Value, len(vals))}
	noIndex := false
	for i, e := range vals {
		ev, eNoIndex, err := c.value(e, true)
		if err != nil {
			return record.Value{}, false, fmt.Errorf("element %d: %w", i, err)
		}
		if i == 0 {
			noIndex = eNoIndex
		} else if eNoIndex != noIndex {
			return record.Value{}, false, fmt.Errorf("element %d has excludeFromIndexes %t, element 0 %t: rekey keeps one index flag per property, so the elements of an array must agree", i, eNoIndex, noIndex)
		}
		out.Array[i] = ev
	}
	return out, noIndex, nil
}

// ToProto converts a record to a Datastore API entity (see the rules
// above), with project in every key. The record's key must pass
// rewrite.ValidateDatastoreKey and its property names
// rewrite.ValidatePropertyName.
func ToProto(rec *record.Record, project string) (*datastorepb.Entity, error) {
	if rec == nil || rec.Key == nil {
		return nil, errors.New("record has no Datastore key (a Spanner row needs a key rewrite to a Datastore key first)")
	}
	if err := rewrite.ValidateDatastoreKey(*rec.Key); err != nil {
		return nil, err
	}
	w := protoWriter{project: project}
	props, _, err := w.properties(rec.Fields, false)
	if err != nil {
		return nil, fmt.Errorf("entity %s: %w", rec.Key, err)
	}
	return &datastorepb.Entity{Key: w.key(*rec.Key), Properties: props}, nil
}

// protoWriter converts records' keys and values, with project in every
// key.
type protoWriter struct {
	project string
}

func (w protoWriter) key(k rewrite.DatastoreKey) *datastorepb.Key {
	out := &datastorepb.Key{Path: make([]*datastorepb.Key_PathElement, len(k.Path))}
	if w.project != "" || k.Database != "" || k.Namespace != "" {
		out.PartitionId = &datastorepb.PartitionId{ProjectId: w.project, DatabaseId: k.Database, NamespaceId: k.Namespace}
	}
	for i, e := range k.Path {
		pe := &datastorepb.Key_PathElement{Kind: e.Kind}
		switch {
		case e.IsName():
			pe.IdType = &datastorepb.Key_PathElement_Name{Name: e.Name}
		case e.ID != 0:
			pe.IdType = &datastorepb.Key_PathElement_Id{Id: e.ID}
		}
		out.Path[i] = pe
	}
	return out
}

// properties converts fields; in an embedded entity (embedded true) a
// field named EmbeddedKeyField becomes the returned key.
func (w protoWriter) properties(fields []record.Field, embedded bool) (map[string]*datastorepb.Value, *datastorepb.Key, error) {
	props := make(map[string]*datastorepb.Value, len(fields))
	var key *datastorepb.Key
	for i := range fields {
		f := &fields[i]
		if embedded && f.Name == EmbeddedKeyField {
			if f.Value.Kind != record.KindKey || f.Value.Key == nil {
				return nil, nil, fmt.Errorf("embedded entity field %s must hold a key, not %s", EmbeddedKeyField, f.Value.Kind)
			}
			key = w.key(*f.Value.Key)
			continue
		}
		if err := rewrite.ValidatePropertyName(f.Name); err != nil {
			return nil, nil, err
		}
		if _, dup := props[f.Name]; dup {
			return nil, nil, fmt.Errorf("property %q appears twice", f.Name)
		}
		v, err := w.value(f.Value, f.NoIndex, false)
		if err != nil {
			return nil, nil, fmt.Errorf("property %q: %w", f.Name, err)
		}
		props[f.Name] = v
	}
	return props, key, nil
}

func (w protoWriter) value(v record.Value, noIndex, inArray bool) (*datastorepb.Value, error) {
	out := &datastorepb.Value{ExcludeFromIndexes: noIndex}
	switch v.Kind {
	case record.KindNull:
		out.ValueType = &datastorepb.Value_NullValue{NullValue: structpb.NullValue_NULL_VALUE}
	case record.KindInt:
		out.ValueType = &datastorepb.Value_IntegerValue{IntegerValue: v.Int}
	case record.KindFloat:
		out.ValueType = &datastorepb.Value_DoubleValue{DoubleValue: v.Float}
	case record.KindBool:
		out.ValueType = &datastorepb.Value_BooleanValue{BooleanValue: v.Int != 0}
	case record.KindString, record.KindNumeric, record.KindJSON:
		if !utf8.ValidString(v.Str) {
			return nil, fmt.Errorf("%s value is not valid UTF-8", v.Kind)
		}
		out.ValueType = &datastorepb.Value_StringValue{StringValue: v.Str}
	case record.KindDate:
		out.ValueType = &datastorepb.Value_StringValue{StringValue: rewrite.DateString(v.Int)}
	case record.KindBytes:
		out.ValueType = &datastorepb.Value_BlobValue{BlobValue: v.Bytes}
	case record.KindTimestamp:
		if v.Time.Before(minTime) || v.Time.After(maxTime.Add(999)) {
			return nil, fmt.Errorf("timestamp %s is outside Datastore's range 0001-01-01..9999-12-31", v.Time.Format("2006-01-02T15:04:05.999999999Z07:00"))
		}
		out.ValueType = &datastorepb.Value_TimestampValue{TimestampValue: timestamppb.New(v.Time)}
	case record.KindKey:
		if v.Key == nil {
			out.ValueType = &datastorepb.Value_NullValue{}
			break
		}
		out.ValueType = &datastorepb.Value_KeyValue{KeyValue: w.key(*v.Key)}
	case record.KindGeoPoint:
		out.ValueType = &datastorepb.Value_GeoPointValue{GeoPointValue: &latlng.LatLng{Latitude: v.Lat, Longitude: v.Lng}}
	case record.KindArray:
		return w.array(v.Array, noIndex, inArray)
	case record.KindEntity:
		props, key, err := w.properties(v.Entity, true)
		if err != nil {
			return nil, err
		}
		out.ValueType = &datastorepb.Value_EntityValue{EntityValue: &datastorepb.Entity{Key: key, Properties: props}}
	default:
		return nil, fmt.Errorf("unknown value kind %s", v.Kind)
	}
	return out, nil
}

// array converts an array: the index flag goes on its elements.
func (w protoWriter) array(vals []record.Value, noIndex, inArray bool) (*datastorepb.Value, error) {
	if inArray {
		return nil, errors.New("an array cannot contain an array (Datastore refuses nested arrays)")
	}
	arr := &datastorepb.ArrayValue{Values: make([]*datastorepb.Value, len(vals))}
	for i, e := range vals {
		ev, err := w.value(e, noIndex, true)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		arr.Values[i] = ev
	}
	return &datastorepb.Value{ValueType: &datastorepb.Value_ArrayValue{ArrayValue: arr}}, nil
}
