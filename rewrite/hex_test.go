package rewrite

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"testing"

	farm "github.com/dgryski/go-farm"
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

// TestFarmLen8to16 checks the inlined hash against farm.Fingerprint64 (the
// bits of Spanner's FARM_FINGERPRINT) for every length it takes, on random
// bytes and on bytes that are all zero or all one.
func TestFarmLen8to16(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var buf [16]byte
	for l := 8; l <= 16; l++ {
		key := buf[:l]
		check := func() {
			t.Helper()
			got := farmLen8to16(binary.LittleEndian.Uint64(key), binary.LittleEndian.Uint64(key[l-8:]), uint64(l))
			if want := farm.Fingerprint64(key); got != want {
				t.Fatalf("farmLen8to16(%x) = %#x, farm.Fingerprint64 = %#x", key, got, want)
			}
		}
		clear(key)
		check()
		for i := range key {
			key[i] = 0xff
		}
		check()
		for range 100_000 {
			for i := range key {
				key[i] = byte(r.Uint32())
			}
			check()
		}
	}
}

func FuzzFarmLen8to16(f *testing.F) {
	f.Add([]byte("Customer0000001"))
	f.Fuzz(func(t *testing.T, key []byte) {
		if len(key) < 8 || len(key) > 16 {
			return
		}
		l := len(key)
		got := farmLen8to16(binary.LittleEndian.Uint64(key), binary.LittleEndian.Uint64(key[l-8:]), uint64(l))
		if want := farm.Fingerprint64(key); got != want {
			t.Fatalf("farmLen8to16(%x) = %#x, farm.Fingerprint64 = %#x", key, got, want)
		}
	})
}
