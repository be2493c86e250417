package rewrite

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"testing"
)

// hex8Want is hex8's result the plain way: encoding/hex of v's 4
// big-endian bytes, read back as a big-endian uint64.
func hex8Want(v uint32) uint64 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	var d [8]byte
	hex.Encode(d[:], b[:])
	return binary.BigEndian.Uint64(d[:])
}

func TestHex8MatchesEncodingHex(t *testing.T) {
	check := func(v uint32) {
		if got, want := hex8(v), hex8Want(v); got != want {
			t.Fatalf("hex8(%#08x) = %q, want %q", v, binary.BigEndian.AppendUint64(nil, got), binary.BigEndian.AppendUint64(nil, want))
		}
	}
	// Every nibble value in every position, and the ends.
	for pos := range 8 {
		for d := range uint32(16) {
			check(d << (4 * pos))
			check(^uint32(0) ^ d<<(4*pos))
		}
	}
	check(0)
	check(^uint32(0))
	r := rand.New(rand.NewPCG(1, 2))
	for range 1_000_000 {
		check(r.Uint32())
	}
}

func FuzzHex8(f *testing.F) {
	f.Add(uint32(0))
	f.Add(uint32(0x9abcdef0))
	f.Add(^uint32(0))
	f.Fuzz(func(t *testing.T, v uint32) {
		if got, want := hex8(v), hex8Want(v); got != want {
			t.Fatalf("hex8(%#08x) = %#x, want %#x", v, got, want)
		}
	})
}
