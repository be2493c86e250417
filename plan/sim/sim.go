package sim

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Result is the outcome of one simulated load.
type Result struct {
	Duration         time.Duration // estimated time to load all writes (×Scale); MaxDuration if unfinished
	Finished         bool
	Writes           int64   // real writes simulated (len(writes)×Scale)
	Splits           int     // splits at the end
	BusiestNodeShare float64 // the busiest node's share of each Series bucket's writes, weighted by them: 1/Nodes even, 1 all on one
	HotspotScore     float64 // Nodes × BusiestNodeShare: 1 even, Nodes all on one
	// BusiestNodeOfRun is the share of all writes of the run taken by the
	// node that took the most (a hotspot moving from node to node has a
	// share near 1/Nodes).
	BusiestNodeOfRun float64
	TimeToFullSpeed  time.Duration
	ReachedFullSpeed bool   // false: TimeToFullSpeed is Duration, full speed was never reached
	Series           []Tick // the run in at most MaxSeries time buckets, for charts
	Params           Params // with defaults filled

	order []int32 // key rank → index into writes
	done  []int32 // index into writes → step it completed in, -1 never
	steps int32   // steps simulated
}

// Tick is one time bucket of Result.Series; rates are means over the
// bucket.
type Tick struct {
	At      time.Duration // start of the bucket
	Width   time.Duration
	Offered float64   // writes/s the loader offered (an unlimited loader: Nodes×NodeWrites)
	Done    float64   // writes/s achieved
	PerNode []float64 // writes/s per node
}

// MaxSeries bounds len(Result.Series): buckets double in width as the run
// grows, so a run of more than MaxSeries/2 steps has between MaxSeries/2
// and MaxSeries buckets.
const MaxSeries = 256

// loadWindow is how many times shorter than LoadSplitDelay the time
// constant of a split's load average is.
const loadWindow = 5

// fullSpeed is the share of the possible rate that counts as full speed.
const fullSpeed = 0.9

// Simulate runs the load of writes, in order, against the store of p.
func Simulate(writes []Write, p Params) (Result, error) {
	return SimulateWrites(WriteSlice(writes), p)
}

// SimulateWrites is Simulate of writes given as Writes.
func SimulateWrites(writes Writes, p Params) (Result, error) {
	p, err := p.withDefaults()
	if err != nil {
		return Result{}, err
	}
	n := writes.Len()
	for i := range n {
		if b := writes.Bytes(i); b < 0 {
			return Result{}, fmt.Errorf("sim: writes[%d].Bytes = %d: must be ≥ 0 (0 takes Params.RowBytes)", i, b)
		}
	}
	if n > math.MaxInt32 {
		return Result{}, fmt.Errorf("sim: %d writes: at most %d (sample them and set Params.Scale)", n, math.MaxInt32)
	}
	s := newState(writes, p)
	s.run()
	return s.result(), nil
}

// split is one key range [start, next split's start) of key ranks.
type split struct {
	start    int32 // rank of the first key in the range
	node     int
	bytes    float64
	capLeft  float64   // writes it can still take this step
	stamp    int32     // step capLeft belongs to; -1 before the first
	demand   float64   // writes offered to it this step
	load     float64   // moving average of demand, writes/s
	loadAt   int32     // step load is current to
	hotSince int32     // first step of the current run of steps with load ≥ LoadThreshold, -1 none
	sample   reservoir // ranks of the writes offered to it while hot
}

type node struct {
	capLeft float64
	demand  float64 // writes offered this step
	done    float64 // writes taken this step
	total   float64
	splits  int
}

type waiting struct {
	w    int32   // index into writes
	left float64 // real writes still to take
}

type state struct {
	p      Params
	writes Writes
	n      int     // writes.Len()
	order  []int32 // rank → write
	rank   []int32 // write → rank
	done   []int32
	bytes  fenwick

	splits  []*split
	starts  []int32 // starts[i] == splits[i].start
	nodes   []node
	touched []*split

	next      int // next write to issue
	waiting   []waiting
	remaining int // writes not done
	allowance float64

	step     int32
	series   series
	capacity float64 // Nodes × NodeWrites
	full     time.Duration
	reached  bool
	lastDone int32
	rng      uint64  // xorshift state of the load samples
	decay    float64 // per step, of a split's load average
}

func newState(writes Writes, p Params) *state {
	n := writes.Len()
	s := &state{p: p, writes: writes, n: n, remaining: n, lastDone: -1, rng: 0x9e3779b97f4a7c15,
		nodes:    make([]node, p.Nodes),
		capacity: float64(p.Nodes) * p.NodeWrites,
		series:   series{width: 1, nodes: p.Nodes},
	}
	s.order = keyOrder(writes)
	s.rank = make([]int32, n)
	s.done = make([]int32, n)
	for r, w := range s.order {
		s.rank[w] = int32(r)
		s.done[w] = -1
	}
	if n > 0 {
		s.bytes = newFenwick(n)
	}
	s.decay = math.Exp(-1 / float64(max(p.LoadSplitDelay/loadWindow/p.Step, 1)))
	s.renewNodes()
	s.addSplit(0, 0)
	for i, k := range p.initialPoints() {
		r := sort.Search(n, func(r int) bool { return bytes.Compare(writes.Key(int(s.order[r])), k) >= 0 })
		s.addSplit(int32(r), (i+1)%p.Nodes)
	}
	return s
}

// keyOrder returns the indexes of writes sorted by key, equal keys in
// write order. Keys are compared by their first 8 bytes as a number first.
func keyOrder(writes Writes) []int32 {
	n := writes.Len()
	prefix := make([]uint64, n)
	order := make([]int32, n)
	for i := range n {
		var b [8]byte
		copy(b[:], writes.Key(i))
		prefix[i] = binary.BigEndian.Uint64(b[:])
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := cmp.Compare(prefix[a], prefix[b]); c != 0 {
			return c
		}
		if c := bytes.Compare(writes.Key(int(a)), writes.Key(int(b))); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return order
}

// addSplit inserts a split starting at rank start on node nd, after any
// split with the same start (an empty range keeps its place).
func (s *state) addSplit(start int32, nd int) *split {
	i, _ := slices.BinarySearch(s.starts, start+1)
	sp := &split{start: start, node: nd, stamp: -1, hotSince: -1}
	s.splits = slices.Insert(s.splits, i, sp)
	s.starts = slices.Insert(s.starts, i, start)
	s.nodes[nd].splits++
	return sp
}

// find returns the index of the split holding key rank r.
func (s *state) find(r int32) int {
	i, _ := slices.BinarySearch(s.starts, r+1)
	return i - 1
}

// end is the first rank past split i.
func (s *state) end(i int) int32 {
	if i+1 < len(s.starts) {
		return s.starts[i+1]
	}
	return int32(len(s.order))
}

func (s *state) run() {
	maxSteps := int32(s.p.MaxDuration / s.p.Step)
	for s.step = 0; s.remaining > 0 && s.step < maxSteps; s.step++ {
		offered := s.offer()
		s.retry()
		s.issue()
		s.endStep(offered)
	}
}

// offer adds this step's allowance and returns the offered rate.
func (s *state) offer() float64 {
	if s.p.Ramp == nil {
		s.allowance = math.Inf(1)
		return s.capacity
	}
	rate := s.p.Ramp(time.Duration(s.step) * s.p.Step)
	if !(rate > 0) {
		rate = 0
	}
	s.allowance += rate * s.p.Step.Seconds()
	return rate
}

// retry offers the waiting writes again, oldest first.
func (s *state) retry() {
	kept := s.waiting[:0]
	for _, wt := range s.waiting {
		if wt.left = s.attempt(wt.w, wt.left); wt.left > 0 {
			kept = append(kept, wt)
		}
	}
	s.waiting = kept
}

// issue offers new writes until the allowance is spent, Concurrency writes
// wait, or none are left.
func (s *state) issue() {
	for s.next < s.n && s.allowance > 0 && len(s.waiting) < s.p.Concurrency {
		w := int32(s.next)
		s.next++
		s.allowance -= s.p.Scale
		if left := s.attempt(w, s.p.Scale); left > 0 {
			s.waiting = append(s.waiting, waiting{w, left})
		}
	}
	if s.allowance > 0 {
		s.allowance = 0 // a loader held back does not save its rate up
	}
}

// attempt offers left real writes of write w to its split and returns how
// many it could not take this step.
func (s *state) attempt(w int32, left float64) float64 {
	r := s.rank[w]
	sp := s.touch(s.splits[s.find(r)])
	nd := &s.nodes[sp.node]
	sp.demand += left
	nd.demand += left
	sp.sample.add(r, &s.rng)
	take := min(left, sp.capLeft, nd.capLeft)
	if take <= 0 {
		return left
	}
	sp.capLeft -= take
	nd.capLeft -= take
	nd.done += take
	b := take * float64(s.rowBytes(w))
	sp.bytes += b
	s.bytes.add(int(r), b)
	if take < left {
		return left - take
	}
	s.done[w] = s.step
	s.lastDone = s.step
	s.remaining--
	return 0
}

func (s *state) rowBytes(w int32) int {
	if b := s.writes.Bytes(int(w)); b > 0 {
		return b
	}
	return s.p.RowBytes
}

// touch renews the split's capacity on its first use in a step.
func (s *state) touch(sp *split) *split {
	if sp.stamp == s.step {
		return sp
	}
	sp.stamp = s.step
	sp.capLeft = s.p.SplitWrites * s.p.Step.Seconds()
	s.touched = append(s.touched, sp)
	return sp
}

func (s *state) endStep(offered float64) {
	secs := s.p.Step.Seconds()
	perNode := make([]float64, len(s.nodes))
	doneRate := 0.0
	for i := range s.nodes {
		perNode[i] = s.nodes[i].done / secs
		doneRate += perNode[i]
	}
	s.series.add(offered, perNode)
	if !s.reached && s.remaining > 0 && doneRate >= fullSpeed*min(offered, s.capacity) {
		s.reached = true
		s.full = time.Duration(s.step+1) * s.p.Step
	}
	for _, sp := range s.touched {
		s.maybeSplit(sp)
	}
	for _, sp := range s.touched {
		sp.demand = 0
	}
	s.touched = s.touched[:0]
	s.renewNodes()
}

// renewNodes starts a step: full capacity, no writes yet.
func (s *state) renewNodes() {
	capLeft := s.p.NodeWrites * s.p.Step.Seconds()
	for i := range s.nodes {
		nd := &s.nodes[i]
		nd.total += nd.done
		nd.capLeft, nd.demand, nd.done = capLeft, 0, 0
	}
}

// maybeSplit cuts a split that is over the size threshold or has been hot
// for LoadSplitDelay.
func (s *state) maybeSplit(sp *split) {
	if sp.bytes > float64(s.p.SplitBytes) {
		s.cutBySize(sp)
		return
	}
	if s.p.NoLoadSplits {
		return
	}
	sp.load = sp.load*math.Pow(s.decay, float64(s.step-sp.loadAt)) + (1-s.decay)*sp.demand/s.p.Step.Seconds()
	sp.loadAt = s.step
	if sp.load < s.p.LoadThreshold {
		sp.cool()
		return
	}
	if sp.hotSince < 0 {
		sp.hotSince = s.step
	}
	if time.Duration(s.step-sp.hotSince+1)*s.p.Step < s.p.LoadSplitDelay {
		return
	}
	s.cut(sp, sp.sample.median())
}

// cool ends a run of hot steps.
func (sp *split) cool() {
	sp.hotSince = -1
	sp.sample.reset()
}

// cutBySize cuts sp at its byte median, and the halves again, until every
// piece is within SplitBytes or is one key.
func (s *state) cutBySize(sp *split) {
	if sp.bytes <= float64(s.p.SplitBytes) {
		return
	}
	lo := s.bytes.prefix(int(sp.start))
	upper := s.cut(sp, int32(s.bytes.search(lo+sp.bytes/2)))
	if upper == nil {
		return
	}
	s.cutBySize(sp)
	s.cutBySize(upper)
}

// cut divides sp at the key of rank r, moved to a key boundary; the upper
// half, returned, goes to the least-loaded node. A range of one key is not
// cut (nil).
func (s *state) cut(sp *split, r int32) *split {
	i := s.find(sp.start) // the last split starting there: sp, after any empty ones
	at, ok := s.boundary(sp.start, s.end(i), r)
	if !ok {
		return nil
	}
	nd := s.leastLoaded()
	upper := s.addSplit(at, nd)
	lowerBytes := s.bytes.prefix(int(at)) - s.bytes.prefix(int(sp.start))
	upper.bytes = max(sp.bytes-lowerBytes, 0)
	sp.bytes = lowerBytes
	share := sp.demand / 2 // the moved half's load, for the next placement in this step
	s.nodes[sp.node].demand -= share
	s.nodes[nd].demand += share
	sp.load /= 2
	upper.load, upper.loadAt = sp.load, sp.loadAt
	sp.cool()
	return upper
}

// boundary returns the rank in (lo, hi) nearest r where the key changes.
func (s *state) boundary(lo, hi, r int32) (int32, bool) {
	key := func(r int32) []byte { return s.writes.Key(int(s.order[r])) }
	k := key(r)
	first := lo + int32(sort.Search(int(r-lo), func(i int) bool { return bytes.Compare(key(lo+int32(i)), k) >= 0 }))
	if first > lo {
		return first, true
	}
	past := r + int32(sort.Search(int(hi-r), func(i int) bool { return bytes.Compare(key(r+int32(i)), k) > 0 }))
	return past, past < hi
}

func (s *state) leastLoaded() int {
	best := 0
	for i := 1; i < len(s.nodes); i++ {
		a, b := &s.nodes[i], &s.nodes[best]
		if a.demand < b.demand || a.demand == b.demand && a.splits < b.splits {
			best = i
		}
	}
	return best
}

func (s *state) result() Result {
	p := s.p
	res := Result{
		Finished:         s.remaining == 0,
		Writes:           int64(math.Round(float64(s.n) * p.Scale)),
		Splits:           len(s.splits),
		Params:           p,
		order:            s.order,
		done:             s.done,
		steps:            s.step,
		Series:           s.series.ticks(p.Step),
		ReachedFullSpeed: s.reached,
	}
	res.Duration = time.Duration(s.step) * p.Step
	if res.Finished {
		res.Duration = time.Duration(s.lastDone+1) * p.Step
		res.steps = s.lastDone + 1
	}
	res.TimeToFullSpeed = res.Duration
	if s.reached {
		res.TimeToFullSpeed = s.full
	}
	total, busiest := 0.0, 0.0
	for _, nd := range s.nodes {
		total += nd.total
		busiest = max(busiest, nd.total)
	}
	if total > 0 {
		res.BusiestNodeOfRun = busiest / total
		res.BusiestNodeShare = s.series.busiestShare()
		res.HotspotScore = float64(p.Nodes) * res.BusiestNodeShare
	}
	return res
}
