// Package writeorder is the pure core of write planning (see
// transforms/writeplan, which wraps it in Beam DoFns): the options with
// their defaults and limits, the store key order (Keyer), the stratified
// deal of records to shard keys (Deal), and the cut of a sorted buffer
// into key-local batches emitted in an even random order (Cut, Order,
// Plan). It imports no Beam, so config can refer to its limits and the
// Beam-free migration core can describe a run's write plan.
package writeorder

import (
	"bytes"
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// Item is a record with its key in the store's order (a Keyer's
// encoding): items sort by Key with bytes.Compare. The record is either
// decoded (Rec) or still encoded (Raw, a record's bytes from
// record.EachRaw).
type Item struct {
	Key []byte
	Rec record.Record
	Raw []byte
}

// Keyer computes records' keys in the target store's order: Spanner
// primary keys with rewrite.AppendSpannerKey (a child row's key starts
// with its parent's, so it sorts right after the parent, as Spanner
// stores interleaved rows), Datastore keys with rewrite.AppendDatastoreKey.
type Keyer struct {
	store    string
	main     rewrite.KeySchema
	children map[string]rewrite.KeySchema // by lower-case table name
	vals     []rewrite.Value
}

// NewKeyer returns the Keyer for o (which must be valid).
func NewKeyer(o Options) (*Keyer, error) {
	k := &Keyer{store: o.Store}
	if o.Store != record.Spanner {
		return k, nil
	}
	var err error
	if k.main, err = rewrite.ParseKeySchema("", o.Key); err != nil {
		return nil, err
	}
	k.children = map[string]rewrite.KeySchema{}
	for name, text := range o.Children {
		ks, err := rewrite.ParseKeySchema(name, text)
		if err != nil {
			return nil, err
		}
		k.children[strings.ToLower(name)] = ks
	}
	return k, nil
}

// Append appends rec's key encoding to dst. A record whose key cannot be
// computed (a missing key column, a value of the wrong type, an entity
// without a key) gets an empty key, which sorts first: planning moves
// records, it does not judge them; the sink dead-letters such a record.
func (k *Keyer) Append(dst []byte, rec *record.Record) []byte {
	if k.store == record.Datastore {
		if rec.Key == nil {
			return dst
		}
		return rewrite.AppendDatastoreKey(dst, *rec.Key)
	}
	schema := k.main
	if len(k.children) > 0 {
		if c, ok := k.children[strings.ToLower(rec.Table)]; ok {
			schema = c
		}
	}
	k.vals = k.vals[:0]
	for _, c := range schema.Columns {
		v, ok := rec.Get(c.Name)
		if !ok {
			return dst
		}
		kv, err := record.KeyValue(v, c.Type)
		if err != nil {
			return dst
		}
		k.vals = append(k.vals, kv)
	}
	return rewrite.AppendSpannerKey(dst, schema, k.vals)
}

// Deal assigns each of items, sorted by key, to one of n shards and
// returns the shards' records (some may be empty), each in key order.
// Every record's shard is uniformly random, and the shards are stratified
// samples: each run of n consecutive items goes to n different shards (a
// random permutation per run), so every shard holds the same share of
// every part of the key range, give or take one record, which makes its
// sorted batches line up with the store's ranges as evenly as possible (a
// last, partial run goes to a uniformly random subset of the shards).
func Deal(items []Item, n int, rng *rand.Rand) [][]record.Record {
	return DealBy(items, n, rng, func(it *Item) record.Record { return it.Rec })
}

// DealBy is Deal giving what of each item (Deal gives Rec): the same
// draws, so the same shards.
func DealBy[T any](items []Item, n int, rng *rand.Rand, what func(*Item) T) [][]T {
	shards := make([][]T, n)
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	for i := range items {
		j := i % n
		if j == 0 {
			rng.Shuffle(n, func(a, b int) { perm[a], perm[b] = perm[b], perm[a] })
		}
		shards[perm[j]] = append(shards[perm[j]], what(&items[i]))
	}
	return shards
}

// Sort sorts items by key; items with equal keys keep their order (so the
// sink sees repeated versions of a key in arrival order, last one wins).
func Sort(items []Item) {
	slices.SortStableFunc(items, func(a, b Item) int { return bytes.Compare(a.Key, b.Key) })
}

// Cut splits n sorted items into the fewest batches of at most rows items,
// as equal in size as possible (sizes differ by at most one), and returns
// each batch's [start, end).
func Cut(n, rows int) [][2]int {
	if n <= 0 {
		return nil
	}
	rows = max(rows, 1)
	k := (n + rows - 1) / rows
	out := make([][2]int, k)
	start := 0
	for i := range k {
		size := n / k
		if i < n%k {
			size++
		}
		out[i] = [2]int{start, start + size}
		start += size
	}
	return out
}

// Order returns the order in which to write n batches cut from one sorted
// buffer: a permutation of 0..n-1 in which every run of consecutive
// batches is spread evenly over the buffer's key range. phase, in [0, 1),
// chooses which permutation; a random phase makes the order random.
//
// Batch b is written at the rank of frac(b·φ + phase), φ = (√5-1)/2: a run
// of consecutive writes is the set of batches whose value falls in one
// interval, and for the golden ratio those batches are spaced almost
// exactly evenly over 0..n-1 (the three-distance theorem: gaps of at most
// three lengths), at every scale, without knowing where the store splits
// its key space. Orders of the same phase continue each other: the end of
// one buffer's order and the start of the next form one interval too, so
// a worker that keeps its phase stays even across buffers. A uniformly
// random permutation is as random per batch but leaves clumps: over a run
// of c batches each sixteenth of the key range receives c/16 ± sqrt(c/16)
// of them rather than c/16 ± 1 (see TestOrderIsEven).
func Order(n int, phase float64) []int {
	if n <= 0 {
		return nil
	}
	pos := make([]float64, n)
	out := make([]int, n)
	for b := range out {
		out[b] = b
		_, pos[b] = math.Modf(float64(b)*goldenFrac + phase)
	}
	slices.SortFunc(out, func(a, b int) int { return cmp.Compare(pos[a], pos[b]) })
	return out
}

// goldenFrac is the golden ratio's fractional part, (√5-1)/2.
var goldenFrac = (math.Sqrt(5) - 1) / 2

// Plan sorts items by key, cuts them into batches of at most rows records
// and returns the batches in write order (Order with phase).
func Plan(items []Item, rows int, phase float64) [][]record.Record {
	Sort(items)
	cuts := Cut(len(items), rows)
	out := make([][]record.Record, 0, len(cuts))
	for _, i := range Order(len(cuts), phase) {
		c := cuts[i]
		b := make([]record.Record, 0, c[1]-c[0])
		for _, it := range items[c[0]:c[1]] {
			b = append(b, it.Rec)
		}
		out = append(out, b)
	}
	return out
}
