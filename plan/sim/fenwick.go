package sim

import "math/bits"

// fenwick is a binary indexed tree of float64 over positions 0..n-1: the
// bytes written at each key rank, for cutting a split at its byte median.
type fenwick []float64

func newFenwick(n int) fenwick { return make(fenwick, n+1) }

func (f fenwick) add(i int, v float64) {
	for i++; i < len(f); i += i & -i {
		f[i] += v
	}
}

// prefix is the sum over positions [0, i).
func (f fenwick) prefix(i int) float64 {
	s := 0.0
	for ; i > 0; i -= i & -i {
		s += f[i]
	}
	return s
}

// search returns the smallest i with prefix(i+1) ≥ target (len-1 if none).
func (f fenwick) search(target float64) int {
	pos := 0
	for step := 1 << (bits.Len(uint(len(f)-1)) - 1); step > 0; step >>= 1 {
		if next := pos + step; next < len(f) && f[next] < target {
			pos = next
			target -= f[next]
		}
	}
	return min(pos, len(f)-2)
}
