package sim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Write is one write of the load, in the order the loader issues it.
type Write struct {
	Key   []byte // order-preserving key encoding (bytes.Compare gives the store's key order)
	Bytes int    // size of the row/entity written (0 → Params.RowBytes)
}

// Writes is a load's writes in the order the loader issues them, as
// SimulateWrites reads them: Key(i) and Bytes(i) are the ith write's
// (see Write). A caller holding many keys in compact form gives them
// without a Write each.
type Writes interface {
	Len() int
	Key(i int) []byte
	Bytes(i int) int
}

// WriteSlice is a slice of Write as Writes.
type WriteSlice []Write

func (ws WriteSlice) Len() int         { return len(ws) }
func (ws WriteSlice) Key(i int) []byte { return ws[i].Key }
func (ws WriteSlice) Bytes(i int) int  { return ws[i].Bytes }

// Params configures the store and the loader. The zero value of a field
// means its default (see the package doc for which are published figures
// and which are assumptions); negative values are errors.
type Params struct {
	Nodes          int           // servers (default 3)
	NodeWrites     float64       // writes/s one node can take (default 3,500, Spanner regional)
	SplitWrites    float64       // writes/s one split can take (default 2,000, assumption)
	SplitBytes     int64         // size split threshold (default 8 GB)
	LoadThreshold  float64       // writes/s offered to a split, sustained, that triggers a load split (default SplitWrites/2, assumption)
	LoadSplitDelay time.Duration // how long the load must last before the split happens (default 5m, assumption)
	NoLoadSplits   bool          // turn load splitting off
	PreSplits      [][]byte      // initial split points (encodings, strictly increasing), optional
	InitialSplits  int           // 0/1 = one split for the empty table; k > 1 = k equal ranges of the 64-bit key prefix space
	// Ramp is the loader's offered rate in writes/s at elapsed time t
	// (nil → unlimited: as fast as the store takes them). Negative and NaN
	// rates count as 0.
	Ramp        func(elapsed time.Duration) float64
	Scale       float64       // each Write stands for Scale real writes (a sample of n keys from N rows: N/n); default 1
	Concurrency int           // sampled writes that may wait before the loader stops issuing (default 64)
	Step        time.Duration // simulation tick (default 1s)
	RowBytes    int           // default row size (default 1 KiB)
	MaxDuration time.Duration // stop after this much simulated time and report the load unfinished (default 30 days)
}

// Defaults of the fields the store profiles do not set.
const (
	DefaultNodes       = 3
	DefaultSplitBytes  = 8 << 30
	DefaultDelay       = 5 * time.Minute
	DefaultConcurrency = 64
	DefaultStep        = time.Second
	DefaultRowBytes    = 1 << 10
	DefaultMaxDuration = 30 * 24 * time.Hour

	// SpannerRegionalNodeWrites and SpannerMultiRegionNodeWrites are the
	// published peak writes/s of one Spanner node.
	SpannerRegionalNodeWrites    = 3500
	SpannerMultiRegionNodeWrites = 2700
	// SpannerSplitWrites is the assumed writes/s of one Spanner split.
	SpannerSplitWrites = 2000

	// FirestoreStartRate and FirestoreGrowth every FirestoreGrowthEvery
	// are the published 500/50/5 ramp.
	FirestoreStartRate   = 500
	FirestoreGrowth      = 1.5
	FirestoreGrowthEvery = 5 * time.Minute
	// FirestoreSplitDelay is the assumed delay of a Firestore load split:
	// short enough that splitting keeps ahead of the 500/50/5 ramp, which
	// is what the rule is meant to ensure.
	FirestoreSplitDelay = 4 * time.Minute
)

// SpannerDefaults is a regional Spanner instance of the given nodes with
// the loader unthrottled.
func SpannerDefaults(nodes int) Params {
	return Params{
		Nodes:          nodes,
		NodeWrites:     SpannerRegionalNodeWrites,
		SplitWrites:    SpannerSplitWrites,
		SplitBytes:     DefaultSplitBytes,
		LoadThreshold:  SpannerSplitWrites / 2,
		LoadSplitDelay: DefaultDelay,
	}
}

// SpannerMultiRegionDefaults is SpannerDefaults for a dual- or
// multi-region instance (2,700 writes/s per node).
func SpannerMultiRegionDefaults(nodes int) Params {
	p := SpannerDefaults(nodes)
	p.NodeWrites = SpannerMultiRegionNodeWrites
	return p
}

// FirestoreDefaults models Firestore/Datastore under the 500/50/5 rule.
// Firestore publishes no server count or per-split figure, so the store is
// an assumption fitted to the published numbers: a key range (split)
// takes 500 writes/s, which is both where a new range starts and the cap
// of a monotonically increasing key; it is cut by load after 4 minutes at
// half of that, so a uniformly loaded range doubles its capacity about
// every 5 minutes, ahead of the ×1.5 the loader is allowed; 20 servers of 1,000
// writes/s bound the whole database. The loader follows the rule: 500
// writes/s, ×1.5 every 5 minutes (FirestoreRamp).
func FirestoreDefaults() Params {
	return Params{
		Nodes:          20,
		NodeWrites:     1000,
		SplitWrites:    FirestoreStartRate,
		SplitBytes:     DefaultSplitBytes,
		LoadThreshold:  FirestoreStartRate / 2,
		LoadSplitDelay: FirestoreSplitDelay,
		Ramp:           FirestoreRamp,
	}
}

// FirestoreRamp is the 500/50/5 schedule: 500 writes/s, raised by 50%
// at the end of every 5 minutes.
func FirestoreRamp(elapsed time.Duration) float64 {
	return FirestoreStartRate * math.Pow(FirestoreGrowth, math.Floor(float64(elapsed)/float64(FirestoreGrowthEvery)))
}

// withDefaults fills the zero fields and checks the rest.
func (p Params) withDefaults() (Params, error) {
	if err := p.checkSigns(); err != nil {
		return p, err
	}
	setInt(&p.Nodes, DefaultNodes)
	setFloat(&p.NodeWrites, SpannerRegionalNodeWrites)
	setFloat(&p.SplitWrites, SpannerSplitWrites)
	if p.SplitBytes == 0 {
		p.SplitBytes = DefaultSplitBytes
	}
	setFloat(&p.LoadThreshold, p.SplitWrites/2)
	setDuration(&p.LoadSplitDelay, DefaultDelay)
	setFloat(&p.Scale, 1)
	setInt(&p.Concurrency, DefaultConcurrency)
	setDuration(&p.Step, DefaultStep)
	setInt(&p.RowBytes, DefaultRowBytes)
	setDuration(&p.MaxDuration, DefaultMaxDuration)
	return p, p.checkRelations()
}

// checkSigns rejects negative and non-finite values before defaults hide
// them.
func (p Params) checkSigns() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"Nodes", float64(p.Nodes)},
		{"NodeWrites", p.NodeWrites},
		{"SplitWrites", p.SplitWrites},
		{"SplitBytes", float64(p.SplitBytes)},
		{"LoadThreshold", p.LoadThreshold},
		{"LoadSplitDelay", float64(p.LoadSplitDelay)},
		{"InitialSplits", float64(p.InitialSplits)},
		{"Scale", p.Scale},
		{"Concurrency", float64(p.Concurrency)},
		{"Step", float64(p.Step)},
		{"RowBytes", float64(p.RowBytes)},
		{"MaxDuration", float64(p.MaxDuration)},
	} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("sim: Params.%s = %v: must be a finite number ≥ 0 (0 takes the default)", f.name, f.v)
		}
	}
	return nil
}

func (p Params) checkRelations() error {
	if p.LoadThreshold > p.SplitWrites && !p.NoLoadSplits {
		return fmt.Errorf("sim: Params.LoadThreshold = %v writes/s is above SplitWrites = %v: no split can be offered that much for long, so load splits would never happen; lower it or set NoLoadSplits", p.LoadThreshold, p.SplitWrites)
	}
	if p.MaxDuration < p.Step {
		return fmt.Errorf("sim: Params.MaxDuration = %v is shorter than one Step = %v", p.MaxDuration, p.Step)
	}
	if p.MaxDuration/p.Step > math.MaxInt32 {
		return fmt.Errorf("sim: Params.MaxDuration/Step = %v/%v is more than %d steps; take a longer Step", p.MaxDuration, p.Step, math.MaxInt32)
	}
	if len(p.PreSplits) > 0 && p.InitialSplits > 1 {
		return fmt.Errorf("sim: Params.PreSplits (%d points) and InitialSplits = %d both set: give one", len(p.PreSplits), p.InitialSplits)
	}
	for i, k := range p.PreSplits {
		if len(k) == 0 {
			return fmt.Errorf("sim: Params.PreSplits[%d] is empty: the first split already starts at the lowest key", i)
		}
		if i > 0 && bytes.Compare(p.PreSplits[i-1], k) >= 0 {
			return fmt.Errorf("sim: Params.PreSplits[%d] = %x is not above PreSplits[%d] = %x: split points must be strictly increasing", i, k, i-1, p.PreSplits[i-1])
		}
	}
	return nil
}

func setInt(v *int, d int) {
	if *v == 0 {
		*v = d
	}
}

func setFloat(v *float64, d float64) {
	if *v == 0 {
		*v = d
	}
}

func setDuration(v *time.Duration, d time.Duration) {
	if *v == 0 {
		*v = d
	}
}

// initialPoints is the split points of the table before the load.
func (p Params) initialPoints() [][]byte {
	if p.InitialSplits <= 1 {
		return p.PreSplits
	}
	return EvenSplits(p.InitialSplits)
}

// EvenSplits returns k-1 split points cutting the 64-bit key prefix space
// into k equal ranges, as 8-byte big-endian values: the split points of
// a table whose keys are spread uniformly (hash prefixes, bit-reversed
// or random ids).
func EvenSplits(k int) [][]byte {
	out := make([][]byte, 0, max(k-1, 0))
	step := math.MaxUint64/uint64(max(k, 1)) + 1
	for i := 1; i < k; i++ {
		v := uint64(i) * step
		out = append(out, binary.BigEndian.AppendUint64(nil, v))
	}
	return out
}
