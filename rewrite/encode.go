package rewrite

import (
	"encoding/binary"
	"math"
	"math/big"
)

// The order-preserving encodings below map keys to byte strings whose
// bytewise order (bytes.Compare) is the store's key order. They are used to
// sort mutations, cut key ranges and compute split points; they are not a
// storage format and carry no type tags (the schema supplies the types).
//
// Spanner, per column:
//
//	NULL      0x00
//	non-NULL  0x01 then the value:
//	  INT64, DATE, BOOL   8 bytes big-endian with the sign bit flipped
//	  FLOAT64             8 bytes: IEEE bits, negatives inverted, positives
//	                      with the sign bit set; -0 as +0; every NaN as 0
//	                      (NaN sorts first, as in Spanner)
//	  TIMESTAMP           seconds as INT64, then nanoseconds as 4 bytes
//	  NUMERIC             value×10^9 as a 128-bit integer, sign bit flipped
//	  STRING, BYTES       bytes with 0x00 written 0x00 0xFF, then 0x00 0x01
//
// A DESC column's bytes (marker included) are inverted, so NULL sorts last
// there, as in Spanner. Every column encoding is prefix-free, which is what
// makes concatenation and inversion order-preserving.
//
// Datastore: database and namespace as escaped strings, then per path
// element 0x01, the kind (escaped), then 0x01 and the id as INT64 or 0x02 and
// the name (escaped); 0x00 ends the path, so an ancestor sorts before its
// descendants and ids before names.

// AppendSpannerKey appends the order-preserving encoding of vals (a key of
// schema s) to dst.
func AppendSpannerKey(dst []byte, s KeySchema, vals []Value) []byte {
	for i, v := range vals {
		start := len(dst)
		dst = appendNullable(dst, v)
		if i < len(s.Columns) && s.Columns[i].Desc {
			for j := start; j < len(dst); j++ {
				dst[j] = ^dst[j]
			}
		}
	}
	return dst
}

func appendNullable(dst []byte, v Value) []byte {
	if v.Null {
		return append(dst, 0x00)
	}
	dst = append(dst, 0x01)
	switch v.Type {
	case TypeInt64, TypeDate, TypeBool:
		dst = appendInt64(dst, v.Int)
	case TypeFloat64:
		dst = binary.BigEndian.AppendUint64(dst, floatOrderBits(v.Float))
	case TypeTimestamp:
		dst = appendInt64(dst, v.Time.Unix())
		dst = binary.BigEndian.AppendUint32(dst, uint32(v.Time.Nanosecond()))
	case TypeNumeric:
		dst = appendNumeric(dst, v.Str)
	case TypeString:
		dst = appendEscaped(dst, v.Str)
	case TypeBytes:
		dst = appendEscapedBytes(dst, v.Bytes)
	}
	return dst
}

func appendInt64(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v)^(1<<63))
}

func floatOrderBits(f float64) uint64 {
	if math.IsNaN(f) {
		return 0
	}
	if f == 0 {
		f = 0 // folds -0 into +0
	}
	b := math.Float64bits(f)
	if b&(1<<63) != 0 {
		return ^b
	}
	return b | 1<<63
}

func appendNumeric(dst []byte, s string) []byte {
	u, err := parseNumeric(s)
	if err != nil {
		u = new(big.Int)
	}
	var buf [16]byte
	// two's complement in 128 bits
	if u.Sign() < 0 {
		u = new(big.Int).Add(u, new(big.Int).Lsh(big.NewInt(1), 128))
	}
	u.FillBytes(buf[:])
	buf[0] ^= 0x80
	return append(dst, buf[:]...)
}

func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		dst = append(dst, s[i])
		if s[i] == 0 {
			dst = append(dst, 0xFF)
		}
	}
	return append(dst, 0x00, 0x01)
}

func appendEscapedBytes(dst []byte, b []byte) []byte {
	for _, c := range b {
		dst = append(dst, c)
		if c == 0 {
			dst = append(dst, 0xFF)
		}
	}
	return append(dst, 0x00, 0x01)
}

// AppendDatastoreKey appends the order-preserving encoding of k to dst.
func AppendDatastoreKey(dst []byte, k DatastoreKey) []byte {
	dst = appendEscaped(dst, k.Database)
	dst = appendEscaped(dst, k.Namespace)
	for _, e := range k.Path {
		dst = append(dst, 0x01)
		dst = appendEscaped(dst, e.Kind)
		if e.IsName() {
			dst = append(dst, 0x02)
			dst = appendEscaped(dst, e.Name)
		} else {
			dst = append(dst, 0x01)
			dst = appendInt64(dst, e.ID)
		}
	}
	return append(dst, 0x00)
}
