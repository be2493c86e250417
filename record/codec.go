package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unsafe"

	"github.com/rekeyio/rekey/rewrite"
)

// EncodeBatch packs records into bytes: a Batch's encoding where Beam
// encodes one (its coder, registered by transforms/batchcoder), the write
// planning's shuffle and spill files, and single records kept as bytes
// (dead letters, the plan's old records, verify's join). The format is
// private to rekey and versioned by its first byte.

const batchVersion = 1

// EncodeBatch encodes records into one byte slice.
//
// The slice is sized from the first record's encoding (the records of a
// batch are mostly alike, give or take an eighth), so that a batch is
// mostly encoded without growing its slice: growing by doubling
// allocated about twice the batch's size again and copied it.
func EncodeBatch(recs []Record) []byte {
	b := make([]byte, 0, 256+16)
	b = append(b, batchVersion)
	b = binary.AppendUvarint(b, uint64(len(recs)))
	if len(recs) == 0 {
		return b
	}
	head := len(b)
	b = AppendRecord(b, &recs[0])
	if rest := len(recs) - 1; rest > 0 {
		one := len(b) - head
		b = slices.Grow(b, rest*one+rest*one/8)
	}
	for i := 1; i < len(recs); i++ {
		b = AppendRecord(b, &recs[i])
	}
	return b
}

// BatchLen returns the number of records of a batch from its header, or
// -1 if the header cannot be read.
func BatchLen(b []byte) int {
	_, n, err := openBatch(b)
	if err != nil {
		return -1
	}
	return n
}

// openBatch reads the header of a batch from EncodeBatch: it returns a decoder at the first record and the
// number of records.
func openBatch(b []byte) (decoder, int, error) {
	d := decoder{b: b, i: 1}
	if len(b) == 0 || b[0] != batchVersion {
		return d, 0, errors.New("record batch: unknown format")
	}
	n := d.uvarint()
	if d.err != nil {
		return d, 0, d.err
	}
	if n > uint64(len(b)) {
		return d, 0, errors.New("record batch: corrupt length")
	}
	return d, int(n), nil
}

// DecodeBatch decodes a batch written by EncodeBatch.
func DecodeBatch(b []byte) ([]Record, error) { return DecodeBatchSpare(b, 0) }

// DecodeBatchSpare is DecodeBatch leaving room for spare more fields in
// each record (a rewrite that adds key columns appends them without
// growing the slice).
func DecodeBatchSpare(b []byte, spare int) ([]Record, error) {
	d, n, err := openBatch(b)
	if err != nil {
		return nil, err
	}
	d.spare = spare
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = d.record()
	}
	if d.err != nil {
		return nil, d.err
	}
	return recs, nil
}

// AppendBatchHeader appends the header of a batch of n records (what
// EncodeBatch writes before them). The n records' encodings must follow
// it: AppendRecord's, or the raw encodings EachRaw gives.
func AppendBatchHeader(dst []byte, n int) []byte {
	dst = append(dst, batchVersion)
	return binary.AppendUvarint(dst, uint64(n))
}

// EachRaw calls fn with each record of a batch from EncodeBatch: the
// record's encoding within b (what AppendRecord wrote; a batch of such
// encodings after AppendBatchHeader decodes to the same records) and the
// record decoded without copying. That record, its fields, strings and
// bytes are valid only during the call: they point into b, and the fields
// into a slice reused for the next record. It is for reading each
// record's key and passing the records on still encoded (the write
// plan's shuffle), without a decode and an encode of every record.
func EachRaw(b []byte, fn func(raw []byte, rec *Record) error) error {
	d, n, err := openBatch(b)
	if err != nil {
		return err
	}
	d.view = true
	var rec Record
	var fields []Field
	for range n {
		start := d.i
		rec = Record{Table: d.str()}
		if d.byte() == 1 {
			rec.Key = d.key()
		}
		fields = d.fieldsInto(fields[:0])
		rec.Fields = fields
		if d.err != nil {
			return d.err
		}
		if err := fn(d.b[start:d.i:d.i], &rec); err != nil {
			return err
		}
	}
	return nil
}

// AppendRecord appends one encoded record.
func AppendRecord(b []byte, r *Record) []byte {
	b = appendString(b, r.Table)
	if r.Key == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = appendKey(b, r.Key)
	}
	return appendFields(b, r.Fields)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendKey(b []byte, k *rewrite.DatastoreKey) []byte {
	b = appendString(b, k.Database)
	b = appendString(b, k.Namespace)
	b = binary.AppendUvarint(b, uint64(len(k.Path)))
	for _, e := range k.Path {
		b = appendString(b, e.Kind)
		b = binary.AppendVarint(b, e.ID)
		b = appendString(b, e.Name)
	}
	return b
}

func appendFields(b []byte, fs []Field) []byte {
	b = binary.AppendUvarint(b, uint64(len(fs)))
	for _, f := range fs {
		b = appendString(b, f.Name)
		if f.NoIndex {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = appendValue(b, f.Value)
	}
	return b
}

func appendValue(b []byte, v Value) []byte {
	b = append(b, byte(v.Kind))
	switch v.Kind {
	case KindInt, KindBool, KindDate:
		b = binary.AppendVarint(b, v.Int)
	case KindFloat:
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Float))
	case KindString, KindNumeric, KindJSON:
		b = appendString(b, v.Str)
	case KindBytes:
		b = binary.AppendUvarint(b, uint64(len(v.Bytes)))
		b = append(b, v.Bytes...)
	case KindTimestamp:
		b = binary.AppendVarint(b, v.Time.Unix())
		b = binary.AppendUvarint(b, uint64(v.Time.Nanosecond()))
	case KindKey:
		if v.Key == nil {
			b = append(b, 0)
		} else {
			b = append(b, 1)
			b = appendKey(b, v.Key)
		}
	case KindGeoPoint:
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Lat))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Lng))
	case KindArray:
		b = binary.AppendUvarint(b, uint64(len(v.Array)))
		for _, e := range v.Array {
			b = appendValue(b, e)
		}
	case KindEntity:
		b = appendFields(b, v.Entity)
	}
	return b
}

type decoder struct {
	b   []byte
	i   int
	err error
	// spare is the room left in each record's fields (DecodeBatchSpare).
	spare int
	// prev is the previous record's fields.
	prev []Field
	// view: strings and bytes point into b instead of being copied
	// (EachRaw).
	view bool
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("record batch: corrupt at byte %d", d.i)
	}
	d.i = len(d.b)
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b[d.i:])
	if n <= 0 {
		d.fail()
		return 0
	}
	d.i += n
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b[d.i:])
	if n <= 0 {
		d.fail()
		return 0
	}
	d.i += n
	return v
}

func (d *decoder) byte() byte {
	if d.i >= len(d.b) {
		d.fail()
		return 0
	}
	c := d.b[d.i]
	d.i++
	return c
}

func (d *decoder) raw() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)-d.i) {
		d.fail()
		return nil
	}
	s := d.b[d.i : d.i+int(n)]
	d.i += int(n)
	return s
}

func (d *decoder) str() string {
	s := d.raw()
	if d.view {
		return unsafe.String(unsafe.SliceData(s), len(s))
	}
	return string(s)
}

// bytes is a BYTES value: a copy of its bytes, or them in b with view.
func (d *decoder) bytes() []byte {
	s := d.raw()
	if d.view {
		return s[:len(s):len(s)]
	}
	return append([]byte{}, s...)
}

func (d *decoder) u64() uint64 {
	if len(d.b)-d.i < 8 {
		d.fail()
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b[d.i:])
	d.i += 8
	return v
}

func (d *decoder) record() Record {
	r := Record{Table: d.str()}
	if d.byte() == 1 {
		r.Key = d.key()
	}
	r.Fields = d.fields(d.spare)
	return r
}

func (d *decoder) key() *rewrite.DatastoreKey {
	k := &rewrite.DatastoreKey{Database: d.str(), Namespace: d.str()}
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return k
	}
	k.Path = make([]rewrite.PathElement, n)
	for i := range k.Path {
		k.Path[i] = rewrite.PathElement{Kind: d.str(), ID: d.varint(), Name: d.str()}
	}
	return k
}

// fields decodes a record's field list, with room for spare more.
// Records of a batch mostly have the same fields in the same order: a
// name equal to the previous record's at the same place is that string
// again, not a new one.
func (d *decoder) fields(spare int) []Field {
	fs := d.fieldList(spare, d.prev)
	d.prev = fs
	return fs
}

// fieldsInto decodes a field list into dst's room (EachRaw).
func (d *decoder) fieldsInto(dst []Field) []Field {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return dst
	}
	for range n {
		f := Field{Name: d.str()}
		f.NoIndex = d.byte() == 1
		f.Value = d.value()
		dst = append(dst, f)
	}
	return dst
}

// fieldList decodes a field list with room for spare more, taking the
// names of prev where they are the same.
func (d *decoder) fieldList(spare int, prev []Field) []Field {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	if n == 0 {
		return nil
	}
	fs := make([]Field, n, int(n)+spare)
	for i := range fs {
		if name := d.raw(); i < len(prev) && prev[i].Name == string(name) {
			fs[i].Name = prev[i].Name
		} else {
			fs[i].Name = string(name)
		}
		fs[i].NoIndex = d.byte() == 1
		fs[i].Value = d.value()
	}
	return fs
}

func (d *decoder) value() Value {
	v := Value{Kind: Kind(d.byte())}
	switch v.Kind {
	case KindNull:
	case KindInt, KindBool, KindDate:
		v.Int = d.varint()
	case KindFloat:
		v.Float = math.Float64frombits(d.u64())
	case KindString, KindNumeric, KindJSON:
		v.Str = d.str()
	case KindBytes:
		v.Bytes = d.bytes()
	case KindTimestamp:
		sec := d.varint()
		v.Time = time.Unix(sec, int64(d.uvarint())).UTC()
	case KindKey:
		if d.byte() == 1 {
			v.Key = d.key()
		}
	case KindGeoPoint:
		v.Lat = math.Float64frombits(d.u64())
		v.Lng = math.Float64frombits(d.u64())
	case KindArray:
		n := d.uvarint()
		if n > uint64(len(d.b)) {
			d.fail()
			return v
		}
		v.Array = make([]Value, n)
		for i := range v.Array {
			v.Array[i] = d.value()
		}
	case KindEntity:
		v.Entity = d.fieldList(0, nil)
	default:
		d.fail()
	}
	return v
}
