package rewrite_test

import (
	"crypto/md5"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	farm "github.com/dgryski/go-farm"

	"github.com/rekeyio/rekey/rewrite"
)

// Benchmarks: every hash-based strategy next to the raw hash of the same
// bytes (its floor). Run: go test ./rewrite -run '^$' -bench . -benchmem
// Each reports keys/s; BENCHMARKS.md has the figures and ratios.

const benchKeys = 1024

var (
	byteKeys = func() [][]byte {
		ks := make([][]byte, benchKeys)
		for i := range ks {
			ks[i] = []byte(fmt.Sprintf("Customer%07d", i))
		}
		return ks
	}()
	stringVals = func() [][]rewrite.Value {
		ks := make([][]rewrite.Value, benchKeys)
		for i := range ks {
			ks[i] = []rewrite.Value{rewrite.String(string(byteKeys[i]))}
		}
		return ks
	}()
	intVals = func() [][]rewrite.Value {
		ks := make([][]rewrite.Value, benchKeys)
		for i := range ks {
			ks[i] = []rewrite.Value{rewrite.Int64(int64(1_000_000 + i))}
		}
		return ks
	}()
	logVals = func() [][]rewrite.Value {
		ks := make([][]rewrite.Value, benchKeys)
		base := time.Date(2024, 1, 31, 12, 0, 0, 0, time.UTC)
		for i := range ks {
			ks[i] = []rewrite.Value{rewrite.Timestamp(base.Add(time.Duration(i) * time.Millisecond)), rewrite.String(string(byteKeys[i]))}
		}
		return ks
	}()
	nsUUID = [16]byte{0x6f, 0x1c, 0x2a, 0x3e, 0x4b, 0x5d, 0x5e, 0x6f, 0x8a, 0x7b, 0x9c, 0x0d, 0x1e, 0x2f, 0x3a, 0x4b}
	sink   uint64
)

func keysPerSec(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "keys/s")
}

func BenchmarkFloor(b *testing.B) {
	b.Run("md5", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			s := md5.Sum(byteKeys[i%benchKeys])
			sink += uint64(s[0])
		}
		keysPerSec(b)
	})
	b.Run("farm", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			sink += farm.Fingerprint64(byteKeys[i%benchKeys])
		}
		keysPerSec(b)
	})
	b.Run("sha1", func(b *testing.B) { // UUIDv5 hashes namespace + key
		b.ReportAllocs()
		var buf [64]byte
		for i := 0; b.Loop(); i++ {
			s := sha1.Sum(append(append(buf[:0], nsUUID[:]...), byteKeys[i%benchKeys]...))
			sink += uint64(s[0])
		}
		keysPerSec(b)
	})
}

// BenchmarkFloorAppend is the raw hash of the same bytes measured through
// the same append harness as the strategies: the hash appended to a reused
// buffer (8 bytes for farm, 16 for md5, 20 for sha1).
func BenchmarkFloorAppend(b *testing.B) {
	b.Run("md5", func(b *testing.B) {
		dst := appendStart(b)
		for i := 0; b.Loop(); i++ {
			s := md5.Sum(byteKeys[i%benchKeys])
			dst = append(dst[:0], s[:]...)
		}
		appendEnd(b, dst)
	})
	b.Run("farm", func(b *testing.B) {
		dst := appendStart(b)
		for i := 0; b.Loop(); i++ {
			dst = binary.BigEndian.AppendUint64(dst[:0], farm.Fingerprint64(byteKeys[i%benchKeys]))
		}
		appendEnd(b, dst)
	})
	b.Run("sha1", func(b *testing.B) {
		dst := appendStart(b)
		for i := 0; b.Loop(); i++ {
			var buf [64]byte
			s := sha1.Sum(append(append(buf[:0], nsUUID[:]...), byteKeys[i%benchKeys]...))
			dst = append(dst[:0], s[:]...)
		}
		appendEnd(b, dst)
	})
}

// The append-API benchmarks, floors and kernels alike, write each key's
// output to a reused buffer and call the function directly in the loop,
// as the rewriters call the kernels: passed as a func value, every key
// would pay an indirect call, and a method value (h.Append) adds a
// wrapper around it, 15-20 instructions a key (cachegrind) that no caller
// of a kernel pays. appendStart and appendEnd are the loop's setup and
// teardown.
func appendStart(b *testing.B) []byte {
	b.ReportAllocs()
	return make([]byte, 0, 128)
}

func appendEnd(b *testing.B, dst []byte) {
	sink += uint64(len(dst))
	keysPerSec(b)
}

func benchRewrite(b *testing.B, r *rewrite.SpannerRewriter, keys [][]rewrite.Value) {
	b.ReportAllocs()
	dst := make([]rewrite.Value, 0, 8)
	var err error
	for i := 0; b.Loop(); i++ {
		if dst, err = r.Rewrite(dst[:0], keys[i%benchKeys]); err != nil {
			b.Fatal(err)
		}
	}
	keysPerSec(b)
}

func BenchmarkHashPrefix(b *testing.B) {
	md5 := mustNew(b, "hashprefix", rewrite.Params{"n": 4}).(*rewrite.HashPrefix)
	fm := mustNew(b, "hashprefix", rewrite.Params{"n": 6, "hash": "farm"}).(*rewrite.HashPrefix)
	b.Run("md5/append", func(b *testing.B) {
		dst := appendStart(b)
		for i := 0; b.Loop(); i++ {
			dst = md5.Append(dst[:0], byteKeys[i%benchKeys])
		}
		appendEnd(b, dst)
	})
	b.Run("farm/append", func(b *testing.B) {
		dst := appendStart(b)
		for i := 0; b.Loop(); i++ {
			dst = fm.Append(dst[:0], byteKeys[i%benchKeys])
		}
		appendEnd(b, dst)
	})
	b.Run("md5/rewrite-value", func(b *testing.B) { benchRewrite(b, mustBind(b, md5, "K STRING(MAX)"), stringVals) })
	ds, _ := md5.Datastore()
	b.Run("md5/datastore-key", func(b *testing.B) {
		b.ReportAllocs()
		k := dsKey("Customer", "Customer1")
		for i := 0; b.Loop(); i++ {
			k.Path[0].Name = string(byteKeys[i%benchKeys])
			if _, err := ds.Rewrite(k); err != nil {
				b.Fatal(err)
			}
		}
		keysPerSec(b)
	})
}

func BenchmarkShard(b *testing.B) {
	s := mustNew(b, "shard", rewrite.Params{"n": 10})
	b.Run("farm/append", func(b *testing.B) {
		b.ReportAllocs()
		sh := s.(*rewrite.Shard)
		for i := 0; b.Loop(); i++ {
			sink += uint64(sh.Of(byteKeys[i%benchKeys]))
		}
		keysPerSec(b)
	})
	b.Run("farm/string", func(b *testing.B) { benchRewrite(b, mustBind(b, s, "K STRING(MAX)"), stringVals) })
	b.Run("farm/int64", func(b *testing.B) { benchRewrite(b, mustBind(b, s, "K INT64"), intVals) })
	b.Run("farm/timestamp+string", func(b *testing.B) {
		benchRewrite(b, mustBind(b, s, "LastAccess TIMESTAMP, UserId STRING(MAX)"), logVals)
	})
}

func BenchmarkBitReverse(b *testing.B) {
	b.Run("func", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			sink += uint64(rewrite.ReverseBits(int64(i), true))
		}
		keysPerSec(b)
	})
	b.Run("rewrite", func(b *testing.B) { benchRewrite(b, mustBind(b, mustNew(b, "bitreverse", nil), "K INT64"), intVals) })
}

func BenchmarkUUID(b *testing.B) {
	u := mustNew(b, "uuid", nil).(*rewrite.UUID)
	b.Run("v5/append", func(b *testing.B) {
		dst := appendStart(b)
		for i := 0; b.Loop(); i++ {
			dst = u.AppendUUID(dst[:0], byteKeys[i%benchKeys])
		}
		appendEnd(b, dst)
	})
	v4 := mustNew(b, "uuid", rewrite.Params{"version": 4}).(*rewrite.UUID)
	b.Run("v4/append", func(b *testing.B) {
		dst := appendStart(b)
		for i := 0; b.Loop(); i++ {
			dst = v4.AppendUUID(dst[:0], byteKeys[i%benchKeys])
		}
		appendEnd(b, dst)
	})
}

func BenchmarkReverse(b *testing.B) {
	b.Run("append", func(b *testing.B) {
		dst := appendStart(b)
		for i := 0; b.Loop(); i++ {
			dst, _ = rewrite.AppendReversed(dst[:0], string(byteKeys[i%benchKeys]))
		}
		appendEnd(b, dst)
	})
}

func BenchmarkSwap(b *testing.B) {
	s := mustNew(b, "swap", rewrite.Params{"order": "UserId"})
	benchRewrite(b, mustBind(b, s, "LastAccess TIMESTAMP, UserId STRING(MAX)"), logVals)
}

func BenchmarkBucket(b *testing.B) {
	s := mustNew(b, "bucket", rewrite.Params{"n": 16})
	benchRewrite(b, mustBind(b, s, "LastAccess TIMESTAMP, UserId STRING(MAX)"), logVals)
}

func BenchmarkGeneration(b *testing.B) {
	benchRewrite(b, mustBind(b, mustNew(b, "generation", rewrite.Params{"g": 3}), "K INT64"), intVals)
}

func BenchmarkEncodeSpannerKey(b *testing.B) {
	schema := mustSchema(b, "LastAccess TIMESTAMP, UserId STRING(MAX)")
	b.ReportAllocs()
	dst := make([]byte, 0, 64)
	for i := 0; b.Loop(); i++ {
		dst = rewrite.AppendSpannerKey(dst[:0], schema, logVals[i%benchKeys])
	}
	keysPerSec(b)
}

// TestAppendAPIDoesNotAllocate pins the zero-allocation promise of the
// append-style API (an allocation count, not a timing).
func TestAppendAPIDoesNotAllocate(t *testing.T) {
	md5 := mustNew(t, "hashprefix", nil).(*rewrite.HashPrefix)
	fm := mustNew(t, "hashprefix", rewrite.Params{"hash": "farm"}).(*rewrite.HashPrefix)
	u := mustNew(t, "uuid", nil).(*rewrite.UUID)
	shard := mustBind(t, mustNew(t, "shard", rewrite.Params{"n": 10}), "LastAccess TIMESTAMP, UserId STRING(MAX)")
	bitrev := mustBind(t, mustNew(t, "bitreverse", nil), "K INT64")
	swap := mustBind(t, mustNew(t, "swap", rewrite.Params{"order": "UserId"}), "LastAccess TIMESTAMP, UserId STRING(MAX)")
	bucket := mustBind(t, mustNew(t, "bucket", nil), "LastAccess TIMESTAMP, UserId STRING(MAX)")
	schema := mustSchema(t, "LastAccess TIMESTAMP, UserId STRING(MAX)")
	buf := make([]byte, 0, 128)
	vals := make([]rewrite.Value, 0, 8)
	for name, f := range map[string]func(){
		"hashprefix/md5":  func() { buf = md5.Append(buf[:0], byteKeys[1]) },
		"hashprefix/farm": func() { buf = fm.Append(buf[:0], byteKeys[1]) },
		"uuid/v5":         func() { buf = u.AppendUUID(buf[:0], byteKeys[1]) },
		"reverse":         func() { buf, _ = rewrite.AppendReversed(buf[:0], "Customer0001") },
		"shard":           func() { vals, _ = shard.Rewrite(vals[:0], logVals[1]) },
		"bitreverse":      func() { vals, _ = bitrev.Rewrite(vals[:0], intVals[1]) },
		"swap":            func() { vals, _ = swap.Rewrite(vals[:0], logVals[1]) },
		"bucket":          func() { vals, _ = bucket.Rewrite(vals[:0], logVals[1]) },
		"encode":          func() { buf = rewrite.AppendSpannerKey(buf[:0], schema, logVals[1]) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations per key, want 0", name, n)
		}
	}
}
