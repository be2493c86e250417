package datastoredb

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// Limits of Datastore (Firestore in Datastore mode), from its published
// quotas; the emulator enforces the same (see the package doc).
const (
	// MaxIndexedBytes is the longest string or bytes value that can be
	// indexed.
	MaxIndexedBytes = 1500
	// MaxEntityBytes is the largest entity Datastore stores.
	MaxEntityBytes = 1 << 20
	// MaxCommitEntities is the most mutations one commit may hold.
	MaxCommitEntities = 500
	// MaxCommitBytes is the largest commit request the service accepts.
	MaxCommitBytes = 10 << 20
)

// EmbeddedKeyField names the field that carries an embedded entity's key
// inside a record.KindEntity value (the record model has no key slot in a
// value).
const EmbeddedKeyField = "__key__"

// canonicalNaN is the NaN Datastore returns for every NaN stored (bits
// 0x7ff8000000000000, Java's Double.NaN; Go's math.NaN() has another
// payload).
var canonicalNaN = math.Float64frombits(0x7ff8000000000000)

// Timestamps Datastore can store, at microsecond precision.
var (
	minTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// ToEntity converts a record to the key and properties to write. The key
// must pass rewrite.ValidateDatastoreKey and every property name
// rewrite.ValidatePropertyName; values convert as the package doc lists.
// The properties keep the record's order. The result is normalised the way
// Datastore stores it (times truncated to microseconds, NoIndex where the
// store forces it), so FromEntity of it equals what a later read returns.
func ToEntity(rec *record.Record) (*datastore.Key, datastore.PropertyList, error) {
	key, err := entityKey(rec)
	if err != nil {
		return nil, nil, err
	}
	props, _, err := toProperties(rec.Fields, false, false)
	if err != nil {
		return nil, nil, fmt.Errorf("entity %s: %w", rec.Key, err)
	}
	return key, props, nil
}

// entityKey converts the record's key, which must pass
// rewrite.ValidateDatastoreKey.
func entityKey(rec *record.Record) (*datastore.Key, error) {
	if rec == nil || rec.Key == nil {
		return nil, errors.New("record has no Datastore key (a Spanner row needs a key rewrite to a Datastore key first)")
	}
	if err := rewrite.ValidateDatastoreKey(*rec.Key); err != nil {
		return nil, err
	}
	return KeyToDatastore(*rec.Key), nil
}

// toProperties converts fields; in an embedded entity (embedded true) a
// field named EmbeddedKeyField becomes the returned key.
func toProperties(fields []record.Field, parentNoIndex, embedded bool) (datastore.PropertyList, *datastore.Key, error) {
	props := make(datastore.PropertyList, 0, len(fields))
	var key *datastore.Key
	seen := make(map[string]struct{}, len(fields))
	for i := range fields {
		f := &fields[i]
		if _, dup := seen[f.Name]; dup {
			return nil, nil, fmt.Errorf("property %q appears twice", f.Name)
		}
		seen[f.Name] = struct{}{}
		if embedded && f.Name == EmbeddedKeyField {
			if f.Value.Kind != record.KindKey || f.Value.Key == nil {
				return nil, nil, fmt.Errorf("embedded entity field %s must hold a key, not %s", EmbeddedKeyField, f.Value.Kind)
			}
			key = KeyToDatastore(*f.Value.Key)
			continue
		}
		if err := rewrite.ValidatePropertyName(f.Name); err != nil {
			return nil, nil, err
		}
		noIndex := f.NoIndex || parentNoIndex || tooLongToIndex(f.Value)
		if f.Value.Kind == record.KindArray && len(f.Value.Array) == 0 {
			// An array keeps the flag on its elements: an empty one has
			// none to keep and always reads back indexed.
			noIndex = false
		}
		v, err := toValue(f.Value, noIndex, false)
		if err != nil {
			return nil, nil, fmt.Errorf("property %q: %w", f.Name, err)
		}
		props = append(props, datastore.Property{Name: f.Name, Value: v, NoIndex: noIndex})
	}
	return props, key, nil
}

// tooLongToIndex reports whether v (or an element of it, for an array)
// is a string or bytes value Datastore cannot index.
func tooLongToIndex(v record.Value) bool {
	switch v.Kind {
	case record.KindString, record.KindNumeric, record.KindJSON:
		return len(v.Str) > MaxIndexedBytes
	case record.KindBytes:
		return len(v.Bytes) > MaxIndexedBytes
	case record.KindArray:
		for _, e := range v.Array {
			if tooLongToIndex(e) {
				return true
			}
		}
	}
	return false
}

func toValue(v record.Value, noIndex, inArray bool) (any, error) {
	switch v.Kind {
	case record.KindNull:
		return nil, nil
	case record.KindInt:
		return v.Int, nil
	case record.KindFloat:
		if math.IsNaN(v.Float) {
			// The store keeps one NaN (Java's canonical quiet NaN).
			return canonicalNaN, nil
		}
		return v.Float, nil
	case record.KindBool:
		return v.Int != 0, nil
	case record.KindString, record.KindNumeric, record.KindJSON:
		if !utf8.ValidString(v.Str) {
			return nil, fmt.Errorf("%s value is not valid UTF-8", v.Kind)
		}
		return v.Str, nil
	case record.KindDate:
		return rewrite.DateString(v.Int), nil
	case record.KindBytes:
		if v.Bytes == nil {
			return []byte{}, nil
		}
		return v.Bytes, nil
	case record.KindTimestamp:
		t := v.Time.UTC().Truncate(time.Microsecond)
		if t.Before(minTime) || t.After(maxTime) {
			return nil, fmt.Errorf("timestamp %s is outside Datastore's range 0001-01-01..9999-12-31", v.Time.Format(time.RFC3339Nano))
		}
		return t, nil
	case record.KindKey:
		if v.Key == nil {
			return nil, nil
		}
		if err := checkKeyValue(v.Key); err != nil {
			return nil, err
		}
		return KeyToDatastore(*v.Key), nil
	case record.KindGeoPoint:
		g := datastore.GeoPoint{Lat: v.Lat, Lng: v.Lng}
		if !g.Valid() {
			return nil, fmt.Errorf("geo point (%g, %g) is invalid: latitude must be in [-90, 90], longitude in [-180, 180]", v.Lat, v.Lng)
		}
		return g, nil
	case record.KindArray:
		if inArray {
			return nil, errors.New("an array cannot contain an array (Datastore refuses nested arrays)")
		}
		arr := make([]any, len(v.Array))
		for i, e := range v.Array {
			ev, err := toValue(e, noIndex, true)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			arr[i] = ev
		}
		return arr, nil
	case record.KindEntity:
		props, key, err := toProperties(v.Entity, noIndex, true)
		if err != nil {
			return nil, err
		}
		return &datastore.Entity{Key: key, Properties: props}, nil
	}
	return nil, fmt.Errorf("unknown value kind %s", v.Kind)
}

// FromEntity converts a stored entity to a record: Table is the key's leaf
// kind, Fields the properties sorted by name. The key must pass
// rewrite.ValidateDatastoreKey and every property name
// rewrite.ValidatePropertyName; a value of a type the package doc does not
// list (a projection query's opaque value, say) is an error.
func FromEntity(key *datastore.Key, props []datastore.Property) (record.Record, error) {
	if key == nil {
		return record.Record{}, errors.New("entity has no key")
	}
	k := KeyFromDatastore(key)
	if err := rewrite.ValidateDatastoreKey(k); err != nil {
		return record.Record{}, err
	}
	fields, err := fromProperties(props, nil)
	if err != nil {
		return record.Record{}, fmt.Errorf("entity %s: %w", k, err)
	}
	return record.Record{Table: k.Leaf().Kind, Key: &k, Fields: fields}, nil
}

// fromProperties converts properties, sorted by name; an embedded entity's
// key (entityKey) comes first as EmbeddedKeyField.
func fromProperties(props []datastore.Property, entityKey *datastore.Key) ([]record.Field, error) {
	n := len(props)
	if entityKey != nil {
		n++
	}
	if n == 0 {
		return nil, nil
	}
	fields := make([]record.Field, 0, n)
	for i := range props {
		p := &props[i]
		if err := rewrite.ValidatePropertyName(p.Name); err != nil {
			return nil, err
		}
		v, err := fromValue(p.Value, false)
		if err != nil {
			return nil, fmt.Errorf("property %q: %w", p.Name, err)
		}
		fields = append(fields, record.Field{Name: p.Name, Value: v, NoIndex: p.NoIndex})
	}
	slices.SortFunc(fields, func(a, b record.Field) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(fields); i++ {
		if fields[i].Name == fields[i-1].Name {
			return nil, fmt.Errorf("property %q appears twice", fields[i].Name)
		}
	}
	if entityKey != nil {
		fields = slices.Insert(fields, 0, record.Field{Name: EmbeddedKeyField, Value: record.Key(KeyFromDatastore(entityKey))})
	}
	return fields, nil
}

func fromValue(v any, inArray bool) (record.Value, error) {
	switch x := v.(type) {
	case nil:
		return record.Value{}, nil
	case int64:
		return record.Int(x), nil
	case float64:
		return record.Float(x), nil
	case string:
		return record.String(x), nil
	case bool:
		return record.Bool(x), nil
	case []byte:
		return record.Bytes(x), nil
	case time.Time:
		return record.Time(x), nil
	case *datastore.Key:
		if x == nil {
			return record.Value{}, nil
		}
		return record.Key(KeyFromDatastore(x)), nil
	case datastore.GeoPoint:
		return record.Value{Kind: record.KindGeoPoint, Lat: x.Lat, Lng: x.Lng}, nil
	case []any:
		if inArray {
			return record.Value{}, errors.New("an array inside an array")
		}
		arr := make([]record.Value, len(x))
		for i, e := range x {
			ev, err := fromValue(e, true)
			if err != nil {
				return record.Value{}, fmt.Errorf("element %d: %w", i, err)
			}
			arr[i] = ev
		}
		return record.Value{Kind: record.KindArray, Array: arr}, nil
	case *datastore.Entity:
		if x == nil {
			return record.Value{}, nil
		}
		fields, err := fromProperties(x.Properties, x.Key)
		if err != nil {
			return record.Value{}, err
		}
		return record.Value{Kind: record.KindEntity, Entity: fields}, nil
	}
	return record.Value{}, fmt.Errorf("unsupported value type %T", v)
}

// EntitySize estimates an entity's stored size with Datastore's published
// storage-size rules: the key, then per property its name plus one byte
// and its value (strings and blobs their length plus one, integers,
// doubles and timestamps 8, geo points 16, booleans and nulls 1, keys
// their key size, arrays and embedded entities the sum of their parts),
// plus 32 bytes. The service's limits (1 MiB an entity, 10 MiB a commit)
// are on the encoded request, which this tracks within a few percent.
func EntitySize(key *datastore.Key, props []datastore.Property) int {
	return keySize(key) + propertiesSize(props) + 32
}

func keySize(k *datastore.Key) int {
	if k == nil {
		return 0
	}
	n := 16 + len(k.Namespace) + 1
	for p := k; p != nil; p = p.Parent {
		n += len(p.Kind) + 1
		if p.Name != "" {
			n += len(p.Name) + 1
		} else {
			n += 8
		}
	}
	return n
}

func propertiesSize(props []datastore.Property) int {
	n := 0
	for i := range props {
		n += len(props[i].Name) + 1 + valueSize(props[i].Value)
	}
	return n
}

func valueSize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x) + 1
	case []byte:
		return len(x) + 1
	case int64, float64, time.Time:
		return 8
	case datastore.GeoPoint:
		return 16
	case *datastore.Key:
		return keySize(x)
	case []any:
		n := 0
		for _, e := range x {
			n += valueSize(e)
		}
		return n
	case *datastore.Entity:
		if x == nil {
			return 1
		}
		return keySize(x.Key) + propertiesSize(x.Properties)
	}
	return 1
}
