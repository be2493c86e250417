// Package plan is `rekey plan`'s analysis: given the old and new key of
// every sampled record in the write planner's order (package keys,
// written by the plan pipeline, pipeline.RunPlan), it
//
//   - checks both sides' keys against the rules of key design (Analyze,
//     package rules), so a report says what the source's keys break and
//     that the rewritten ones do not;
//   - simulates the load of the table into a range-partitioned store
//     (package sim) twice: (a) "before", the old keys in their natural
//     order — the order of the records' timestamp when they have one (the
//     order an application inserted them), else, for the records of one
//     file, the file's order, else key order (the order a table scan or an
//     export delivers them) — and (b) "after", the new
//     keys in rekey's planned write order, the plan sink's streams
//     interleaved batch by batch as workers committing side by side
//     would send them (keys.Interleave). Both runs have the same store
//     and loader parameters;
//   - draws the two runs as Key Visualizer heatmaps at one colour scale,
//     the rewritten keys' spread over the key space, and the write rate
//     against the ramp-up schedule (package chart), into a self-contained
//     HTML report.
//
// A sample of n of N records stands for the table: every sampled write
// counts N/n times in the simulation (sim.Params.Scale).
package plan

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rekeyio/rekey/plan/keys"
	"github.com/rekeyio/rekey/plan/rules"
	"github.com/rekeyio/rekey/plan/sim"
)

// Input is what a plan is made from.
type Input struct {
	// Keys are the sampled keys (keys.Load); if nil, Streams are, the
	// plan sink's part files read into memory (keys.Read).
	Keys    *keys.Set
	Streams []keys.Stream
	// Source and Target describe the two ends, e.g. "JSON Lines
	// ./data/logs.jsonl" and "Spanner table UserAccessLogs".
	Source, Target string
	// Datastore is true for a Datastore target (false: Spanner);
	// SourceDatastore for a Datastore source.
	Datastore, SourceDatastore bool
	// Table is the target table or kind; SourceTable the source's.
	Table, SourceTable string
	// SourceColumn and TargetColumn are the first key columns (Spanner);
	// SourceKeyColumns and TargetKeyColumns all of them, in key order.
	SourceColumn, TargetColumn         string
	SourceKeyColumns, TargetKeyColumns []string
	// ShardColumn is the shard column the rewrite puts first ("" if
	// none): few values by design, so not a low-cardinality finding.
	// Shards is its n, SignedShards true for the signed form (2n−1
	// values, -(n-1)..n-1).
	ShardColumn  string
	Shards       int64
	SignedShards bool
	// SourceKey, TargetKey and Strategy are shown as given.
	SourceKey, TargetKey, Strategy string
	// Method says how the sample was taken; Rows is the number of
	// records the sample stands for (0: the sample is everything).
	Method string
	Rows   int64
	// Sim are the store's and loader's parameters (Scale is set from
	// Rows).
	Sim sim.Params
	// PreSplitPerNode, if > 0, gives the "after" run that many split
	// points per node before the load, at quantiles of the new keys (as
	// `rekey splits` would create them).
	PreSplitPerNode int
	// DeadLettered counts records the plan pipeline refused.
	DeadLettered int64
}

// Plan is the result.
type Plan struct {
	Input    Input           `json:"-"`
	Created  time.Time       `json:"created"`
	Sampled  int             `json:"sampled"`
	Rows     int64           `json:"rows"`
	Scale    float64         `json:"scale"`
	Before   Run             `json:"before"`
	After    Run             `json:"after"`
	Findings []rules.Finding `json:"findings"`
	// Remaining are the findings of the same analysis on the new keys.
	Remaining []rules.Finding `json:"remaining"`
	Samples   []Pair          `json:"samples"`

	// beforeRows and afterRows label the heatmaps' rows (their lowest
	// keys' texts).
	beforeRows, afterRows []string
	// spread is the histogram of the new keys: by the first key
	// column's values (discrete) or over equal ranges of the key space.
	spread       []float64
	spreadLabels []string
	discrete     bool
}

// Run is one simulated load.
type Run struct {
	Name     string        `json:"name"`
	Order    string        `json:"order"`
	Duration time.Duration `json:"duration_ns"`
	Finished bool          `json:"finished"`
	Splits   int           `json:"splits"`
	// BusiestNodeShare is the busiest node's share of the writes at each
	// moment (sim.Result.BusiestNodeShare), BusiestNodeOfRun its share of
	// all the run's writes.
	BusiestNodeShare float64       `json:"busiest_node_share"`
	BusiestNodeOfRun float64       `json:"busiest_node_share_of_run"`
	HotspotScore     float64       `json:"hotspot_score"`
	TimeToFullSpeed  time.Duration `json:"time_to_full_speed_ns"`
	ReachedFullSpeed bool          `json:"reached_full_speed"`
	PreSplits        int           `json:"pre_splits"`
	Result           sim.Result    `json:"-"`
}

// Pair is one sampled record's key before and after.
type Pair struct {
	Old string `json:"old"`
	New string `json:"new"`
}

// SampleRows is how many old → new keys a plan shows.
const SampleRows = 20

// Build analyses the keys and simulates both loads.
func Build(in Input) (*Plan, error) {
	set := in.Keys
	if set == nil {
		var err error
		if set, err = keys.FromStreams(in.Streams); err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
	}
	// The plan keeps no keys: set holds them until the report's few texts
	// and pictures are made.
	in.Keys, in.Streams = nil, nil
	n := set.Len()
	if n == 0 {
		return nil, fmt.Errorf("plan: no records were sampled (%d dead-lettered); nothing to plan", in.DeadLettered)
	}
	p := &Plan{Input: in, Created: time.Now().UTC(), Sampled: n, Rows: int64(n)}
	if in.Rows > int64(n) {
		p.Rows = in.Rows
	}
	p.Scale = float64(p.Rows) / float64(n)
	fraction := float64(n) / float64(p.Rows)
	source := sideOf(set, true, in.SourceTable, in.SourceColumn, in.SourceDatastore, fraction)
	source.Key = in.SourceKeyColumns
	p.Findings = Analyze(source)
	target := sideOf(set, false, in.Table, in.TargetColumn, in.Datastore, fraction)
	target.Key = in.TargetKeyColumns
	target.ShardColumn = in.ShardColumn
	p.Remaining = Analyze(target)
	if err := set.Err(); err != nil {
		return nil, err
	}

	before, order := naturalOrder(set)
	params := in.Sim
	params.Scale = p.Scale
	beforeWrites := oldWrites{set, before}
	afterWrites := newWrites{set}
	var err error
	if p.Before, err = simulate("before", order, beforeWrites, params); err != nil {
		return nil, err
	}
	if in.PreSplitPerNode > 0 {
		nodes := p.Before.Result.Params.Nodes
		params.PreSplits = quantiles(afterWrites, in.PreSplitPerNode*nodes)
	}
	if p.After, err = simulate("after", "the new keys in rekey's planned write order", afterWrites, params); err != nil {
		return nil, err
	}
	p.After.PreSplits = len(params.PreSplits)
	p.Remaining = append(p.Remaining, shardFindings(set, in, p.After.Result.Params.Nodes)...)
	rules.Sort(p.Remaining)

	// The texts the report shows: samples, the heatmaps' and the
	// histogram's labels, and the first key of each order (labelScope).
	var samples []int
	for i := 0; i < min(SampleRows, n); i++ {
		samples = append(samples, i*n/min(SampleRows, n))
	}
	beforeRows := p.Before.Result.Heat(HeatRows, HeatCols).RowStart
	for j, r := range beforeRows {
		beforeRows[j] = int(before[r])
	}
	afterRows := p.After.Result.Heat(HeatRows, HeatCols).RowStart
	var lowest []int
	afterFirst := func(i int) string {
		if f, ok := set.First(false, i); ok && !in.Datastore && set.Multi(i) {
			return f.Text
		}
		return ""
	}
	var ok bool
	if p.spread, p.spreadLabels, ok = discrete(afterWrites, n, afterFirst); ok {
		p.discrete = true
	} else {
		p.spread, lowest = spread(afterWrites, Bins)
	}
	want := slices.Concat(samples, beforeRows, afterRows, lowest, []int{int(before[0]), 0})
	want = slices.DeleteFunc(want, func(i int) bool { return i < 0 })
	oldTexts, newTexts, err := set.Texts(context.Background(), want)
	if err != nil {
		return nil, err
	}
	oldText, newText := map[int]string{}, map[int]string{}
	for j, i := range want {
		oldText[i], newText[i] = oldTexts[j], newTexts[j]
	}
	for _, i := range samples {
		p.Samples = append(p.Samples, Pair{Old: oldText[i], New: newText[i]})
	}
	oldScope := labelScope(oldText[int(before[0])], set.TextPrefix(true))
	newScope := labelScope(newText[0], set.TextPrefix(false))
	for _, i := range beforeRows {
		p.beforeRows = append(p.beforeRows, oldText[i][len(oldScope):])
	}
	for _, i := range afterRows {
		p.afterRows = append(p.afterRows, newText[i][len(newScope):])
	}
	if !p.discrete {
		p.spreadLabels = make([]string, len(lowest))
		for b, i := range lowest {
			if i >= 0 {
				p.spreadLabels[b] = newText[i][len(newScope):]
			}
		}
	}
	return p, nil
}

// oldWrites are the old keys in the order of their indexes order;
// newWrites the new keys as they are.
type oldWrites struct {
	set   *keys.Set
	order []int32
}

func (w oldWrites) Len() int         { return len(w.order) }
func (w oldWrites) Key(i int) []byte { return w.set.Old(int(w.order[i])) }
func (w oldWrites) Bytes(i int) int  { return w.set.Bytes(int(w.order[i])) }

type newWrites struct{ set *keys.Set }

func (w newWrites) Len() int         { return w.set.Len() }
func (w newWrites) Key(i int) []byte { return w.set.New(i) }
func (w newWrites) Bytes(i int) int  { return w.set.Bytes(i) }

// naturalOrder orders the keys (as indexes into ks) as the old
// application or a plain copy would write them: by the records' timestamp
// when most have one, else by the old key. Equal keys keep their order.
func naturalOrder(ks *keys.Set) ([]int32, string) {
	order := make([]int32, ks.Len())
	timed, field := 0, ""
	for i := range order {
		order[i] = int32(i)
		if _, _, f, ok := ks.Time(i); ok {
			timed++
			field = f
		}
	}
	stable := func(less func(a, b int) int) {
		slices.SortFunc(order, func(a, b int32) int {
			if c := less(int(a), int(b)); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
	}
	if timed*10 >= len(order)*9 {
		stable(func(a, b int) int {
			sa, na, _, oka := ks.Time(a)
			sb, nb, _, okb := ks.Time(b)
			if !oka || !okb {
				return cmp.Compare(b2i(oka), b2i(okb)) // none first
			}
			if c := cmp.Compare(sa, sb); c != 0 {
				return c
			}
			return cmp.Compare(na, nb)
		})
		return order, "the old keys in the order of " + field + " (the order the records were created)"
	}
	if file, ok := oneFile(ks); ok {
		stable(func(a, b int) int { return cmp.Compare(ks.Pos(a), ks.Pos(b)) })
		return order, "the old keys in the order of the records in " + file + " (the order they were written)"
	}
	stable(func(a, b int) int { return bytes.Compare(ks.Old(a), ks.Old(b)) })
	return order, "the old keys in key order (as a table scan or an export delivers them)"
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// oneFile reports whether every key was read from one file, and which.
func oneFile(ks *keys.Set) (string, bool) {
	if ks.Len() == 0 || ks.File(0) == "" {
		return "", false
	}
	first := ks.File(0)
	for i := range ks.Len() {
		if ks.File(i) != first {
			return "", false
		}
	}
	return first, true
}

func simulate(name, order string, ws sim.Writes, p sim.Params) (Run, error) {
	r, err := sim.SimulateWrites(ws, p)
	if err != nil {
		return Run{}, err
	}
	return Run{Name: name, Order: order, Duration: r.Duration, Finished: r.Finished, Splits: r.Splits,
		BusiestNodeShare: r.BusiestNodeShare, BusiestNodeOfRun: r.BusiestNodeOfRun, HotspotScore: r.HotspotScore,
		TimeToFullSpeed: r.TimeToFullSpeed, ReachedFullSpeed: r.ReachedFullSpeed, Result: r}, nil
}

// Quantiles returns k-1 distinct keys cutting ws's keys into k ranges of
// about equal count, in key order.
func Quantiles(ws []sim.Write, k int) [][]byte { return quantiles(sim.WriteSlice(ws), k) }

func quantiles(ws sim.Writes, k int) [][]byte {
	n := ws.Len()
	if k < 2 || n < 2 {
		return nil
	}
	sorted := make([]int32, n)
	for i := range sorted {
		sorted[i] = int32(i)
	}
	slices.SortFunc(sorted, func(a, b int32) int { return bytes.Compare(ws.Key(int(a)), ws.Key(int(b))) })
	var out [][]byte
	for i := 1; i < k; i++ {
		q := ws.Key(int(sorted[i*n/k]))
		if len(q) > 0 && (len(out) == 0 || bytes.Compare(out[len(out)-1], q) < 0) {
			out = append(out, bytes.Clone(q))
		}
	}
	return out
}

// MaxDiscrete is the most distinct values of a leading key column (a
// shard column, an enum) that the key-spread histogram shows one bar
// each.
const MaxDiscrete = 64

// Discrete counts keys by the value of their first key column, in key
// order, when there are at most MaxDiscrete values and the key has more
// columns (a shard column and the old key); ok is false otherwise.
func Discrete(ws []sim.Write, first []string) (counts []float64, labels []string, ok bool) {
	return discrete(sim.WriteSlice(ws), len(first), func(i int) string { return first[i] })
}

// discrete is Discrete of the first n writes, first(i) the ith's value.
func discrete(ws sim.Writes, n int, first func(i int) string) (counts []float64, labels []string, ok bool) {
	lowest := map[string][]byte{}
	count := map[string]float64{}
	for i := range n {
		v := first(i)
		if v == "" {
			return nil, nil, false
		}
		if k, seen := lowest[v]; !seen || bytes.Compare(ws.Key(i), k) < 0 {
			lowest[v] = ws.Key(i)
		}
		count[v]++
		if len(count) > MaxDiscrete {
			return nil, nil, false
		}
	}
	for v := range count {
		labels = append(labels, strings.Clone(v))
	}
	sort.Slice(labels, func(a, b int) bool { return bytes.Compare(lowest[labels[a]], lowest[labels[b]]) < 0 })
	for _, v := range labels {
		counts = append(counts, count[v])
	}
	return counts, labels, len(labels) > 0
}

// Spread counts keys in bins equal-width ranges of the key space they
// span: the bytes after the longest prefix all keys share, read as a
// number. Uniform keys (hashes, UUIDs, bit-reversed ids) fill the bins
// evenly; clustered keys pile up in a few. labels[i] is the lowest key
// text in bin i ("" for an empty bin).
func Spread(ws []sim.Write, texts []string, bins int) (counts []float64, labels []string) {
	counts, lowest := spread(sim.WriteSlice(ws), bins)
	labels = make([]string, bins)
	for b, i := range lowest {
		if i >= 0 {
			labels[b] = texts[i]
		}
	}
	return counts, labels
}

// spread is Spread with the index of the lowest key of each bin (-1 for
// an empty bin) instead of its text.
func spread(ws sim.Writes, bins int) (counts []float64, lowest []int) {
	counts, lowest = make([]float64, max(bins, 0)), make([]int, max(bins, 0))
	for b := range lowest {
		lowest[b] = -1
	}
	n := ws.Len()
	if n == 0 || bins <= 0 {
		return counts, lowest
	}
	lo, hi := ws.Key(0), ws.Key(0)
	for i := range n {
		k := ws.Key(i)
		if bytes.Compare(k, lo) < 0 {
			lo = k
		}
		if bytes.Compare(k, hi) > 0 {
			hi = k
		}
	}
	common := 0
	for common < len(lo) && common < len(hi) && lo[common] == hi[common] {
		common++
	}
	num := func(k []byte) float64 {
		var b [8]byte
		if common < len(k) {
			copy(b[:], k[common:])
		}
		return float64(binary.BigEndian.Uint64(b[:]))
	}
	l, h := num(lo), num(hi)
	for i := range n {
		k := ws.Key(i)
		b := 0
		if h > l {
			b = min(bins-1, int(math.Floor((num(k)-l)/(h-l)*float64(bins))))
		}
		counts[b]++
		if lowest[b] < 0 || bytes.Compare(k, ws.Key(lowest[b])) < 0 {
			lowest[b] = i
		}
	}
	return counts, lowest
}
