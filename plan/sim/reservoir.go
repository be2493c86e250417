package sim

import "slices"

// reservoirSize bounds the sample of key ranks a split keeps while hot.
const reservoirSize = 512

// reservoir is a uniform sample of the key ranks offered to a split while
// it is hot (Algorithm R), for placing a load split at the median of the
// load, not only of the last step's.
type reservoir struct {
	seen  int
	ranks []int32
}

func (r *reservoir) add(rank int32, rng *uint64) {
	r.seen++
	if len(r.ranks) < reservoirSize {
		r.ranks = append(r.ranks, rank)
		return
	}
	if j := int(xorshift(rng) % uint64(r.seen)); j < reservoirSize {
		r.ranks[j] = rank
	}
}

func (r *reservoir) reset() {
	r.seen = 0
	r.ranks = r.ranks[:0]
}

// median is the median rank of the sample; it must not be empty.
func (r *reservoir) median() int32 {
	slices.Sort(r.ranks)
	return r.ranks[len(r.ranks)/2]
}

func xorshift(x *uint64) uint64 {
	*x ^= *x << 13
	*x ^= *x >> 7
	*x ^= *x << 17
	return *x
}
