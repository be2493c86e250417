package hotspot

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

func seqKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = binary.BigEndian.AppendUint64(nil, uint64(i))
	}
	return keys
}

func TestSortedStreamIsHot(t *testing.T) {
	r := Measure(seqKeys(10000), Options{})
	if r.Busiest < 12 || r.Busiest > 16 || r.Touched > 2 {
		t.Errorf("sorted stream: %v; want busiest 12..16 and at most 2 ranges per window", r)
	}
}

func TestShuffledStreamIsEven(t *testing.T) {
	keys := seqKeys(10000)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	r := Measure(keys, Options{})
	if r.Busiest > 1.6 || r.Touched < 15.5 {
		t.Errorf("shuffled stream: %v; want busiest near 1 and all 16 ranges touched", r)
	}
	for i, c := range r.PerRange {
		if c != 625 {
			t.Errorf("range %d holds %d keys, want 625", i, c)
		}
	}
}

func TestRoundRobinIsPerfect(t *testing.T) {
	keys := seqKeys(1600)
	var rr [][]byte
	for i := range 100 {
		for r := range 16 {
			rr = append(rr, keys[r*100+i])
		}
	}
	if r := Measure(rr, Options{}); r.Busiest != 1 {
		t.Errorf("round robin: %v, want exactly 1.0", r)
	}
}

func TestBoundaries(t *testing.T) {
	keys := seqKeys(100)
	b := Boundaries(keys, 4)
	if len(b) != 3 || RangeOf(b, keys[0]) != 0 || RangeOf(b, keys[24]) != 0 || RangeOf(b, keys[25]) != 1 || RangeOf(b, keys[99]) != 3 {
		t.Errorf("boundaries %x", b)
	}
	if r := Measure(nil, Options{}); r.Writes != 0 || r.Busiest != 0 {
		t.Errorf("empty: %v", r)
	}
}
