package rewrite

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"

	farm "github.com/dgryski/go-farm"
)

const hexDigits = "0123456789abcdef"

// HashPrefix puts a short hash of the key in front of it:
//
//	new = hex(hash(t))[:N] + Sep + t
//
// where t is the key's text and hex is lowercase. Hash "md5" is
// hex(MD5(t)) (32 digits, so N is 1..32); hash "farm" is the 16-digit hex of
// farmhash Fingerprint64(t) as an unsigned big-endian number (N is 1..16),
// the same bits as Spanner's FARM_FINGERPRINT. The original key is kept after
// the separator, so the rewrite is injective and invertible: Invert strips
// N+len(Sep) bytes after checking that the prefix matches the rest.
//
// The text t of a Spanner STRING or BYTES column is its bytes; of an INT64
// column its decimal digits (the column becomes STRING). Of a Datastore path
// element it is the element's text form (id digits; a name, quoted with a
// leading ' if it is all digits or starts with '), and the element becomes a
// name.
//
// A longer prefix spreads writes over more key ranges: Lindorm uses N=4,
// Cloud Storage guidance uses 6 hex characters.
type HashPrefix struct {
	N      int
	Hash   string // "md5" or "farm"
	Sep    string
	Column string // Spanner: the key column to prefix (default: the first)
	scope  scope
	farm   bool
	fast   int  // N+1 when Append's inline path applies (farm, a one-byte Sep), else 0
	sep    byte // Sep[0]
	minKey int  // the shortest key the inline path takes; math.MaxInt: none
}

func init() {
	register(Info{
		Name: "hashprefix", Summary: "prefix the key with the first n hex digits of its md5 or farmhash, keeping the key after a separator",
		Invertible: true, Deterministic: true, Spanner: true, Datastore: true,
		Params: []ParamDoc{
			{Name: "n", Doc: "hex digits in the prefix: 1..32 with md5, 1..16 with farm; more spread writes over more key ranges"},
			{Name: "hash", Doc: "md5: hex(MD5(t)); farm: the 16 hex digits of farmhash Fingerprint64(t), the bits of Spanner's FARM_FINGERPRINT (t is the key's text)"},
			{Name: "sep", Doc: "text between the prefix and the original key (valid UTF-8)"},
			{Name: "column", Doc: "Spanner: the key column to prefix; empty: the first key column"},
			elementsParam,
		},
	}, func(p *paramReader, _ []StepConfig) (Strategy, error) {
		h := &HashPrefix{
			Hash:   p.enum("hash", "md5", "md5", "farm"),
			Sep:    p.str("sep", "-"),
			Column: p.str("column", ""),
			scope:  readScope(p, "all"),
		}
		max := int64(32)
		if h.Hash == "farm" {
			max = 16
		}
		h.N = int(p.integer("n", 4, 1, max))
		h.farm = h.Hash == "farm"
		h.minKey = math.MaxInt
		if h.farm && len(h.Sep) == 1 {
			h.fast, h.sep = h.N+1, h.Sep[0]
			// The digits go 8 at a time, so the output needs room for
			// 8 (N <= 8) or 16.
			h.minKey = 8*(1+(h.N-1)/8) - h.fast
		}
		if !utf8.ValidString(h.Sep) {
			p.fail("sep", "must be valid UTF-8")
		}
		return h, nil
	})
}

// Info describes the strategy.
func (h *HashPrefix) Info() Info { return registry["hashprefix"].info }

// Spec returns the canonical spec.
func (h *HashPrefix) Spec() Spec {
	return Spec{Strategy: "hashprefix", Params: map[string]string{
		"n": strconv.Itoa(h.N), "hash": h.Hash, "sep": h.Sep, "column": h.Column, "elements": string(h.scope),
	}}
}

// Append appends hex(hash(key))[:N] + Sep + key to dst. It does not
// allocate when dst has room.
func (h *HashPrefix) Append(dst, key []byte) []byte {
	l, off := len(key), len(dst)
	end := off + h.fast + l
	if uint(l-8) > 8 || l < h.minKey || end > cap(dst) {
		return h.appendFarm(dst, key)
	}
	// The common case (farm, a one-byte separator, room in dst, a key of
	// 8 to 16 bytes) in code with no call at all: around a call the
	// compiler saves the live registers, even on paths that do not make
	// it, so the other cases are elsewhere. The hash is inlined
	// (farmLen8to16); the digits go 8 at a time, and the separator and the
	// key then overwrite those past N; the key is two overlapping 8-byte
	// loads and stores. The stores go through at8, with no bounds checks:
	// the test above puts them all inside dst[off:end].
	lo, hi := binary.LittleEndian.Uint64(key), binary.LittleEndian.Uint64(key[l-8:])
	fp := farmLen8to16(lo, hi, uint64(l))
	dst = dst[:end]
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(dst)), off)
	binary.BigEndian.PutUint64(at8(p, 0), hex8(uint32(fp>>32)))
	if h.fast > 9 {
		binary.BigEndian.PutUint64(at8(p, 8), hex8(uint32(fp)))
	}
	*(*byte)(unsafe.Add(p, h.fast-1)) = h.sep
	binary.LittleEndian.PutUint64(at8(p, h.fast), lo)
	binary.LittleEndian.PutUint64(at8(p, h.fast+l-8), hi)
	return dst
}

// at8 is the 8 bytes at p+i, as a slice with no bounds to check: Append's
// stores, each within dst[off:end] by Append's first test (end <= cap(dst))
// and the offsets it writes at (0 and 8 for the digits, at most N+1 <= 17
// bytes with N > 8; fast-1 for the separator; fast and fast+l-8 for a key of
// l >= 8 bytes, the last ending at end). TestHashPrefixAppendMatchesReference
// checks the output for every N and key length and that nothing past it
// changes.
func at8(p unsafe.Pointer, i int) []byte { return (*[8]byte)(unsafe.Add(p, i))[:] }

// appendFarm is Append for farm, a one-byte separator and room in dst with
// a key not of 8 to 16 bytes, and hands any other case to appendGeneral.
func (h *HashPrefix) appendFarm(dst, key []byte) []byte {
	l, off := len(key), len(dst)
	end := off + h.fast + l
	if l < h.minKey || end > cap(dst) {
		return h.appendGeneral(dst, key)
	}
	fp := farm.Fingerprint64(key)
	dst = dst[:end]
	binary.BigEndian.PutUint64(dst[off:off+8:off+8], hex8(uint32(fp>>32)))
	if h.fast > 9 {
		binary.BigEndian.PutUint64(dst[off+8:off+16:off+16], hex8(uint32(fp)))
	}
	dst[end-l-1] = h.sep
	copy(dst[end-l:end], key)
	return dst
}

// farmLen8to16 is farm.Fingerprint64(key) for a key of l bytes, 8 to 16,
// whose first 8 bytes are lo and last 8 hi (little-endian): farmhash's
// hashLen0to16 (the same bits, TestFarmLen8to16), written here so that the
// compiler inlines it into Append. farm.Fingerprint64 is
// assembly on amd64, so a call to it takes its arguments through the stack
// and makes Append save and reload its own around the call: about 25
// instructions a key, as many as the hash of such a key itself.
func farmLen8to16(lo, hi, l uint64) uint64 {
	const k2 = 0x9ae16a3b2f90404f
	mul := k2 + l*2
	a, b := lo+k2, hi
	c := bits.RotateLeft64(b, -37)*mul + a
	d := (bits.RotateLeft64(a, -25) + b) * mul
	// farmhash's hashLen16Mul(c, d, mul).
	x := (c ^ d) * mul
	x ^= x >> 47
	y := (d ^ x) * mul
	y ^= y >> 47
	return y * mul
}

// copyKey copies key to dst, which has its length. For a key of 8 to 16
// bytes it is two overlapping 8-byte loads and stores: copy calls
// runtime.memmove when the length is not a constant, and that call and
// memmove's size dispatch cost more than the copy of so few bytes.
func copyKey(dst, key []byte) {
	l := len(key)
	if l < 8 || l > 16 || len(dst) != l {
		copy(dst, key)
		return
	}
	binary.LittleEndian.PutUint64(dst[:8:8], binary.LittleEndian.Uint64(key))
	binary.LittleEndian.PutUint64(dst[l-8:l:l], binary.LittleEndian.Uint64(key[l-8:]))
}

// appendGeneral is Append for any hash, N, separator, key and dst: md5,
// a separator not of one byte, a key too short for 8-byte stores of the
// digits, or no room in dst.
func (h *HashPrefix) appendGeneral(dst, key []byte) []byte {
	n := h.N + len(h.Sep) + len(key)
	off := len(dst)
	if cap(dst)-off < n {
		dst = slices.Grow(dst, n)
	}
	dst = dst[:off+n]
	out := dst[off:]
	if h.farm && len(out) >= 8 && (h.N <= 8 || len(out) >= 16) {
		// Write 8 (or 16) digits at once; the separator and key then
		// overwrite the digits past N.
		fp := farm.Fingerprint64(key)
		binary.BigEndian.PutUint64(out[0:8], hex8(uint32(fp>>32)))
		if h.N > 8 {
			binary.BigEndian.PutUint64(out[8:16], hex8(uint32(fp)))
		}
	} else {
		h.putPrefix(out[:h.N], key)
	}
	if len(h.Sep) == 1 {
		out[h.N] = h.Sep[0]
	} else {
		copy(out[h.N:], h.Sep)
	}
	copyKey(out[h.N+len(h.Sep):], key)
	return dst
}

// hex8 returns the 8 lowercase hex digits of v, most significant first,
// as the bytes of a big-endian uint64: the nibbles spread into bytes, then
// shifted into '0'-'9' and 'a'-'f' all at once, about 25 instructions and
// one store. encoding/hex would need the bytes in memory and goes a byte
// at a time (two table loads and two 1-byte stores each).
func hex8(v uint32) uint64 {
	x := uint64(v)
	x = (x | x<<16) & 0x0000ffff0000ffff
	x = (x | x<<8) & 0x00ff00ff00ff00ff
	x = (x | x<<4) & 0x0f0f0f0f0f0f0f0f
	letters := ((x + 0x0606060606060606) >> 4) & 0x0101010101010101
	return x + 0x3030303030303030 + letters*('a'-'0'-10)
}

// appendPrefix appends hex(hash(key))[:N] to dst.
func (h *HashPrefix) appendPrefix(dst, key []byte) []byte {
	off := len(dst)
	dst = slices.Grow(dst, h.N)[:off+h.N]
	h.putPrefix(dst[off:], key)
	return dst
}

// putPrefix writes the first len(out) hex digits of key's hash into out.
func (h *HashPrefix) putPrefix(out, key []byte) {
	if h.farm {
		fp := farm.Fingerprint64(key)
		for i := range out {
			out[i] = hexDigits[fp>>60]
			fp <<= 4
		}
		return
	}
	sum := md5.Sum(key)
	for i := range out {
		b := sum[i>>1]
		if i&1 == 0 {
			out[i] = hexDigits[b>>4]
		} else {
			out[i] = hexDigits[b&0x0f]
		}
	}
}

// strip checks that s has a valid prefix for its remainder and returns the
// remainder.
func (h *HashPrefix) strip(s []byte) ([]byte, error) {
	n := h.N + len(h.Sep)
	if len(s) < n || !bytes.Equal(s[h.N:n], []byte(h.Sep)) {
		return nil, fmt.Errorf("%q does not start with a %d-digit hash prefix and separator %q", s, h.N, h.Sep)
	}
	rest := s[n:]
	var buf [32]byte
	if want := h.appendPrefix(buf[:0], rest); !bytes.Equal(want, s[:h.N]) {
		return nil, fmt.Errorf("%q: prefix %q does not match the hash of the rest (want %q)", s, s[:h.N], want)
	}
	return rest, nil
}

// Spanner binds the strategy to a source key.
func (h *HashPrefix) Spanner(in KeySchema) (*SpannerRewriter, error) {
	i, err := columnIndex("hashprefix", in, h.Column, TypeString, TypeBytes, TypeInt64)
	if err != nil {
		return nil, err
	}
	out := in.Clone()
	c := &out.Columns[i]
	grow := h.N + utf8.RuneCountInString(h.Sep)
	srcType := c.Type
	switch srcType {
	case TypeInt64:
		c.Type, c.MaxLen = TypeString, grow+20
	case TypeString:
		if c.MaxLen > 0 {
			c.MaxLen += grow
		}
	case TypeBytes:
		if c.MaxLen > 0 {
			c.MaxLen += h.N + len(h.Sep)
		}
	}
	fwd := func(dst, key []Value) ([]Value, error) {
		dst = append(dst, key...)
		v := &dst[len(dst)-len(key)+i]
		if v.Null {
			return dst[:len(dst)-len(key)], &KeyError{Key: FormatSpannerKey(in, key), Rule: fmt.Sprintf("hashprefix: key column %s is NULL", in.Columns[i].Name)}
		}
		var buf [128]byte
		switch srcType {
		case TypeInt64:
			t := strconv.AppendInt(buf[:0], v.Int, 10)
			*v = String(string(h.Append(make([]byte, 0, h.N+len(h.Sep)+len(t)), t)))
		case TypeString:
			t := append(buf[:0], v.Str...)
			*v = String(string(h.Append(make([]byte, 0, h.N+len(h.Sep)+len(t)), t)))
		case TypeBytes:
			*v = Bytes(h.Append(nil, v.Bytes))
		}
		return dst, nil
	}
	inv := func(dst, key []Value) ([]Value, error) {
		dst = append(dst, key...)
		v := &dst[len(dst)-len(key)+i]
		bad := func(err error) ([]Value, error) {
			return dst[:len(dst)-len(key)], &KeyError{Key: FormatSpannerKey(out, key), Rule: "hashprefix: " + err.Error()}
		}
		if v.Null {
			return bad(fmt.Errorf("column %s is NULL", out.Columns[i].Name))
		}
		var raw []byte
		if srcType == TypeBytes {
			raw = v.Bytes
		} else {
			raw = []byte(v.Str)
		}
		rest, err := h.strip(raw)
		if err != nil {
			return bad(err)
		}
		switch srcType {
		case TypeInt64:
			n, err := strconv.ParseInt(string(rest), 10, 64)
			if err != nil || strconv.FormatInt(n, 10) != string(rest) {
				return bad(fmt.Errorf("%q is not an INT64", rest))
			}
			*v = Int64(n)
		case TypeString:
			*v = String(string(rest))
		case TypeBytes:
			*v = Bytes(append([]byte(nil), rest...))
		}
		return dst, nil
	}
	return &SpannerRewriter{in: in, out: out, fwd: fwd, inv: inv,
		explain: []string{fmt.Sprintf("%s = %s", out.Columns[i].Name, h.sqlExpr(in.Columns[i]))}}, nil
}

// sqlExpr renders the rewrite of column c in GoogleSQL, for --explain.
func (h *HashPrefix) sqlExpr(c Column) string {
	t := QuoteIdent(c.Name)
	if c.Type == TypeInt64 {
		t = fmt.Sprintf("CAST(%s AS STRING)", t)
	}
	var hexed string
	if h.Hash == "farm" {
		// FARM_FINGERPRINT is signed: print its two 32-bit halves so the
		// hex is that of the unsigned 64 bits.
		fp := fmt.Sprintf("FARM_FINGERPRINT(%s)", t)
		hexed = fmt.Sprintf("FORMAT('%%08x%%08x', (%s >> 32) & 0xFFFFFFFF, %s & 0xFFFFFFFF)", fp, fp)
	} else {
		hexed = fmt.Sprintf("TO_HEX(MD5(%s))", t)
	}
	if c.Type == TypeBytes {
		return fmt.Sprintf("CONCAT(CAST(SUBSTR(%s, 1, %d) AS BYTES), b%q, %s)", hexed, h.N, h.Sep, t)
	}
	return fmt.Sprintf("CONCAT(SUBSTR(%s, 1, %d), %q, %s)", hexed, h.N, h.Sep, t)
}

// Datastore returns the Datastore form: each chosen path element becomes a
// name prefixed with the hash of its text.
func (h *HashPrefix) Datastore() (*DatastoreRewriter, error) {
	fwd := func(k DatastoreKey) (DatastoreKey, error) {
		return mapElements(k, h.scope, func(e PathElement) (PathElement, error) {
			var buf [128]byte
			t := appendElementText(buf[:0], e)
			return PathElement{Kind: e.Kind, Name: string(h.Append(make([]byte, 0, h.N+len(h.Sep)+len(t)), t))}, nil
		})
	}
	inv := func(k DatastoreKey) (DatastoreKey, error) {
		return mapElements(k, h.scope, func(e PathElement) (PathElement, error) {
			if !e.IsName() {
				return PathElement{}, fmt.Errorf("hashprefix: has id %d, want a hash-prefixed name", e.ID)
			}
			rest, err := h.strip([]byte(e.Name))
			if err != nil {
				return PathElement{}, fmt.Errorf("hashprefix: %w", err)
			}
			return elementFromText(e.Kind, string(rest))
		})
	}
	return &DatastoreRewriter{fwd: fwd, inv: inv}, nil
}
