// Package splits computes Spanner split points for a migration's target
// table, writes them in the form `gcloud spanner databases splits add
// --splits-file` reads, and builds the AddSplitPoints requests that add
// them through the API.
//
// The model: a new table is one split, served by one node, until Spanner
// splits it by size and by load, which takes minutes per step; a load
// into a fresh table is throttled by that. n split points added before
// the load divide the table's key range into n+1 splits from the start,
// about 10 a node. They should carry about equal shares of the load,
// which is the share of the rewritten keys that falls between them:
//
//   - For a strategy that fills the leading key column uniformly
//     (UniformSpace: hashprefix on the first column, shard, bitreverse on
//     the first column, uuid), that share is known without data: the
//     points are evenly spaced over the column's value space, weighted
//     where values are not equally likely (a signed shard's 0 gets twice
//     the keys of the others). Each point is then a key prefix of one
//     value, the leading column's.
//   - For any other strategy (none, swap, reverse, generation, chains),
//     the points are quantiles of a uniform sample of rewritten keys
//     (Quantiles): full keys drawn from the sample.
//
// Interleaved child rows are stored under their parent's key, so the
// points are for the root table written; a child splits with its parent.
package splits

import (
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// Point is one split point: where a new split of a table or an index
// starts. Key holds the leading parts of a key of the table (or of the
// index): one value per key column, in key order, as many as given.
type Point struct {
	// Table is the table split; for an index point, the index's base
	// table ("" if unknown: gcloud names only the index).
	Table string
	// Index names the index split; "" for a point of the table itself.
	Index string
	Key   []rewrite.Value
}

// Space is the value space of a target's leading key column that a
// uniform strategy fills: Size equally likely units, unit u holding the
// column value value(u), in key order.
type Space struct {
	// Column is the leading key column, Type its type.
	Column string
	Type   rewrite.Type
	// Size is the number of units; Desc describes the space for people.
	Size *big.Int
	Desc string
	// value is the column value of unit u (0 <= u < Size).
	value func(u *big.Int) rewrite.Value
}

// UniformSpace returns the space a strategy fills uniformly in the
// leading column of the key it produces from keys of schema in, and
// false for a strategy that keeps some of the old order in front (its
// points must come from a sample). A chain of one step is that step; a
// longer chain is not taken as uniform, since later steps may reorder or
// prefix what the first spread.
func UniformSpace(st rewrite.Strategy, in rewrite.KeySchema) (Space, bool) {
	if c, ok := st.(*rewrite.Chain); ok && len(c.Steps) == 1 {
		st = c.Steps[0]
	}
	if len(in.Columns) == 0 {
		return Space{}, false
	}
	switch s := st.(type) {
	case *rewrite.HashPrefix:
		if !leads(in, s.Column) {
			return Space{}, false
		}
		return hashSpace(s, in.Columns[0]), true
	case *rewrite.Shard:
		// One shard is no spread: the old key order follows it.
		return shardSpace(s), s.N > 1
	case *rewrite.BitReverse:
		if !leads(in, s.Column) || in.Columns[0].Type != rewrite.TypeInt64 {
			return Space{}, false
		}
		return bitReverseSpace(in.Columns[0].Name, s.PreserveSign), true
	case *rewrite.UUID:
		return uuidSpace(s.Name), true
	}
	return Space{}, false
}

// leads reports whether the named key column (the first if "") is the
// first of in.
func leads(in rewrite.KeySchema, column string) bool {
	return column == "" || in.Index(column) == 0
}

func hashSpace(h *rewrite.HashPrefix, c rewrite.Column) Space {
	typ := rewrite.TypeString
	if c.Type == rewrite.TypeBytes {
		typ = rewrite.TypeBytes
	}
	size := new(big.Int).Lsh(big.NewInt(1), uint(4*h.N))
	return Space{
		Column: c.Name, Type: typ, Size: size,
		Desc: fmt.Sprintf("the %s %d-hex-digit %s prefixes of %s", size, h.N, h.Hash, c.Name),
		value: func(u *big.Int) rewrite.Value {
			hex := fmt.Sprintf("%0*x", h.N, u)
			if typ == rewrite.TypeBytes {
				return rewrite.Bytes([]byte(hex))
			}
			return rewrite.String(hex)
		},
	}
}

// shardSpace: ABS(MOD(fp, N)) gives 0..N-1, each 1/N of the keys. The
// signed MOD(fp, N) gives -(N-1)..N-1: a negative fingerprint gives
// -(N-1)..0, a positive one 0..N-1, each value 1/(2N) of the keys, so 0
// gets 2/(2N). Its 2N units are the negative side's values, then the
// positive side's: unit u is u-(N-1) below N, u-N from N on.
func shardSpace(s *rewrite.Shard) Space {
	sp := Space{Column: s.Name, Type: rewrite.TypeInt64}
	n := s.N
	if s.Mode == "abs" {
		sp.Size = big.NewInt(n)
		sp.Desc = fmt.Sprintf("the %d shards of %s (0..%d)", n, s.Name, n-1)
		sp.value = func(u *big.Int) rewrite.Value { return rewrite.Int64(u.Int64()) }
		return sp
	}
	sp.Size = big.NewInt(2 * n)
	sp.Desc = fmt.Sprintf("the %d values of the signed %s (%d..%d; 0 takes twice the keys of the others)", 2*n-1, s.Name, -(n - 1), n-1)
	sp.value = func(u *big.Int) rewrite.Value {
		if v := u.Int64(); v < n {
			return rewrite.Int64(v - (n - 1))
		}
		return rewrite.Int64(u.Int64() - n)
	}
	return sp
}

// bitReverseSpace: bit-reversed non-negative ids with the sign kept fill
// 0..2^63-1; all 64 bits reversed fill the whole INT64 range.
func bitReverseSpace(column string, preserveSign bool) Space {
	sp := Space{Column: column, Type: rewrite.TypeInt64}
	lo := new(big.Int)
	if preserveSign {
		sp.Size = new(big.Int).Lsh(big.NewInt(1), 63)
		sp.Desc = fmt.Sprintf("the non-negative INT64 range of %s (bit-reversed ids, sign kept)", column)
	} else {
		sp.Size = new(big.Int).Lsh(big.NewInt(1), 64)
		lo.Neg(new(big.Int).Lsh(big.NewInt(1), 63))
		sp.Desc = fmt.Sprintf("the whole INT64 range of %s (all 64 bits reversed)", column)
	}
	sp.value = func(u *big.Int) rewrite.Value { return rewrite.Int64(new(big.Int).Add(lo, u).Int64()) }
	return sp
}

// uuidSpace: a UUID's text sorts as its 128 bits do (lowercase hex, dashes
// at fixed places), and v4 and v5 UUIDs are uniform in their leading bits.
func uuidSpace(column string) Space {
	return Space{
		Column: column, Type: rewrite.TypeString,
		Size: new(big.Int).Lsh(big.NewInt(1), 128),
		Desc: fmt.Sprintf("the 128-bit space of the UUIDs in %s", column),
		value: func(u *big.Int) rewrite.Value {
			h := fmt.Sprintf("%032x", u)
			return rewrite.String(h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32])
		},
	}
}

// Points returns about n points evenly spaced over the space, for the
// table of key schema out (the rewritten key, whose first column must be
// the space's). When the space has n or fewer distinct values there is a
// point at each but the lowest (where the table starts anyway).
func (s Space) Points(out rewrite.KeySchema, n int) ([]Point, error) {
	if n < 1 {
		return nil, fmt.Errorf("splits: %d points asked for; want at least 1", n)
	}
	if len(out.Columns) == 0 || !strings.EqualFold(out.Columns[0].Name, s.Column) || out.Columns[0].Type != s.Type {
		return nil, fmt.Errorf("splits: table %s's key %s does not start with the %s column %s the rewrite fills", out.Table, out, s.Type, s.Column)
	}
	var pts []Point
	for _, u := range evenly(s.Size, n) {
		v := s.value(u)
		if len(pts) > 0 && pts[len(pts)-1].Key[0].Equal(v) {
			continue
		}
		if v.Equal(s.value(new(big.Int))) {
			continue
		}
		pts = append(pts, Point{Table: out.Table, Key: []rewrite.Value{v}})
	}
	return pts, nil
}

// evenly returns the n offsets i*size/(n+1), i = 1..n, that cut [0, size)
// into n+1 nearly equal parts; every offset 1..size-1 when size <= n+1.
func evenly(size *big.Int, n int) []*big.Int {
	limit := new(big.Int).Sub(size, big.NewInt(1))
	if limit.Cmp(big.NewInt(int64(n))) <= 0 {
		out := make([]*big.Int, 0, limit.Int64())
		for u := int64(1); u <= limit.Int64(); u++ {
			out = append(out, big.NewInt(u))
		}
		return out
	}
	parts := big.NewInt(int64(n) + 1)
	out := make([]*big.Int, 0, n)
	for i := 1; i <= n; i++ {
		u := new(big.Int).Mul(size, big.NewInt(int64(i)))
		out = append(out, u.Quo(u, parts))
	}
	return out
}

// Quantiles returns about n points that cut a sample of rewritten records
// into n+1 equal parts in the key order of ks (the target's key; ks.Table
// names the table): each point is the full key of a sampled record. Every
// record must carry ks's key columns: the table's rows, and those of its
// interleaved children, whose keys start with the parent's and which are
// stored with their parent (so they count where they are stored). Equal
// keys give one point; there is none at the lowest sampled key.
func Quantiles(ks rewrite.KeySchema, recs []record.Record, n int) ([]Point, error) {
	if n < 1 {
		return nil, fmt.Errorf("splits: %d points asked for; want at least 1", n)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("splits: the sample of table %s is empty; there is nothing to take quantiles of", ks.Table)
	}
	keys := make([][]rewrite.Value, len(recs))
	for i := range recs {
		k, err := keyOf(&recs[i], ks)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	slices.SortFunc(keys, func(a, b []rewrite.Value) int { return rewrite.CompareSpanner(ks, a, b) })
	var pts []Point
	prev := keys[0]
	for _, u := range evenly(big.NewInt(int64(len(keys))), n) {
		k := keys[u.Int64()]
		if rewrite.CompareSpanner(ks, k, prev) == 0 {
			continue
		}
		pts = append(pts, Point{Table: ks.Table, Key: k})
		prev = k
	}
	return pts, nil
}

// keyOf reads the values of ks's key columns from a row.
func keyOf(rec *record.Record, ks rewrite.KeySchema) ([]rewrite.Value, error) {
	k := make([]rewrite.Value, len(ks.Columns))
	for i, c := range ks.Columns {
		v, ok := rec.Get(c.Name)
		if !ok {
			return nil, fmt.Errorf("splits: sampled record %s has no key column %s of %s", rec.Describe(), c.Name, ks.Table)
		}
		kv, err := record.KeyValue(v, c.Type)
		if err != nil {
			return nil, fmt.Errorf("splits: sampled record %s: key column %s: %w", rec.Describe(), c.Name, err)
		}
		k[i] = kv
	}
	return k, nil
}
