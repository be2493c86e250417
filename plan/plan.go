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
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/rekeyio/rekey/plan/keys"
	"github.com/rekeyio/rekey/plan/rules"
	"github.com/rekeyio/rekey/plan/sim"
)

// Input is what a plan is made from.
type Input struct {
	// Streams are the plan sink's part files (keys.Read).
	Streams []keys.Stream
	// Source and Target describe the two ends, e.g. "JSON Lines
	// ./data/logs.jsonl" and "Spanner table UserAccessLogs".
	Source, Target string
	// Datastore is true for a Datastore target (false: Spanner);
	// SourceDatastore for a Datastore source.
	Datastore, SourceDatastore bool
	// Table is the target table or kind; SourceTable the source's.
	Table, SourceTable string
	// SourceColumn and TargetColumn are the first key columns (Spanner).
	SourceColumn, TargetColumn string
	// ShardColumn is the shard column the rewrite puts first ("" if
	// none): few values by design, so not a low-cardinality finding.
	ShardColumn string
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

	beforeWrites, afterWrites []sim.Write
	beforeText, afterText     []string
	// afterFirst is each new key's first column's value ("" for
	// Datastore keys), in afterWrites' order.
	afterFirst []string
}

// Run is one simulated load.
type Run struct {
	Name             string        `json:"name"`
	Order            string        `json:"order"`
	Duration         time.Duration `json:"duration_ns"`
	Finished         bool          `json:"finished"`
	Splits           int           `json:"splits"`
	BusiestNodeShare float64       `json:"busiest_node_share"`
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
	after := keys.Interleave(in.Streams)
	in.Streams = nil // after holds the keys; the plan keeps no second copy
	n := len(after)
	if n == 0 {
		return nil, fmt.Errorf("plan: no records were sampled (%d dead-lettered); nothing to plan", in.DeadLettered)
	}
	p := &Plan{Input: in, Created: time.Now().UTC(), Sampled: n, Rows: int64(n)}
	if in.Rows > int64(n) {
		p.Rows = in.Rows
	}
	p.Scale = float64(p.Rows) / float64(n)
	fraction := float64(n) / float64(p.Rows)
	p.Findings = Analyze(OldSide(after, in.SourceTable, in.SourceColumn, in.SourceDatastore, fraction))
	target := NewSide(after, in.Table, in.TargetColumn, in.Datastore, fraction)
	target.ShardColumn = in.ShardColumn
	p.Remaining = Analyze(target)
	for i := 0; i < min(SampleRows, n); i++ {
		k := after[i*n/min(SampleRows, n)]
		p.Samples = append(p.Samples, Pair{Old: k.OldText, New: k.NewText})
	}

	before, order := naturalOrder(after)
	params := in.Sim
	params.Scale = p.Scale
	p.beforeWrites, p.beforeText = writes(after, before, true)
	p.afterWrites, p.afterText = writes(after, nil, false)
	for i := range after {
		first := ""
		if !in.Datastore && len(after[i].NewParts) > 0 && max(after[i].NewColumns, len(after[i].NewParts)) > 1 {
			first = after[i].NewParts[0].Text
		}
		p.afterFirst = append(p.afterFirst, first)
	}
	var err error
	if p.Before, err = simulate("before", order, p.beforeWrites, params); err != nil {
		return nil, err
	}
	if in.PreSplitPerNode > 0 {
		nodes := p.Before.Result.Params.Nodes
		params.PreSplits = Quantiles(p.afterWrites, in.PreSplitPerNode*nodes)
	}
	if p.After, err = simulate("after", "the new keys in rekey's planned write order", p.afterWrites, params); err != nil {
		return nil, err
	}
	p.After.PreSplits = len(params.PreSplits)
	return p, nil
}

// naturalOrder orders the keys (as indexes into ks) as the old
// application or a plain copy would write them: by the records' timestamp
// when most have one, else by the old key.
func naturalOrder(ks []keys.Key) ([]int, string) {
	order := make([]int, len(ks))
	timed, field := 0, ""
	for i := range ks {
		order[i] = i
		if ks[i].Time != nil {
			timed++
			field = ks[i].TimeField
		}
	}
	if timed*10 >= len(ks)*9 {
		sort.SliceStable(order, func(a, b int) bool {
			ta, tb := ks[order[a]].Time, ks[order[b]].Time
			if ta == nil || tb == nil {
				return tb != nil
			}
			return ta.Before(*tb)
		})
		return order, "the old keys in the order of " + field + " (the order the records were created)"
	}
	if file, ok := oneFile(ks); ok {
		sort.SliceStable(order, func(a, b int) bool { return ks[order[a]].Pos < ks[order[b]].Pos })
		return order, "the old keys in the order of the records in " + file + " (the order they were written)"
	}
	sort.SliceStable(order, func(a, b int) bool { return bytes.Compare(ks[order[a]].Old, ks[order[b]].Old) < 0 })
	return order, "the old keys in key order (as a table scan or an export delivers them)"
}

// oneFile reports whether every key was read from one file, and which.
func oneFile(ks []keys.Key) (string, bool) {
	if len(ks) == 0 || ks[0].File == "" {
		return "", false
	}
	for i := range ks {
		if ks[i].File != ks[0].File {
			return "", false
		}
	}
	return ks[0].File, true
}

// writes are the keys' writes (old or new keys) in order (nil: as they
// are), with their texts.
func writes(ks []keys.Key, order []int, old bool) ([]sim.Write, []string) {
	ws := make([]sim.Write, len(ks))
	texts := make([]string, len(ks))
	for i := range ks {
		k := &ks[i]
		if order != nil {
			k = &ks[order[i]]
		}
		if old {
			ws[i], texts[i] = sim.Write{Key: k.Old, Bytes: k.Bytes}, k.OldText
		} else {
			ws[i], texts[i] = sim.Write{Key: k.New, Bytes: k.Bytes}, k.NewText
		}
	}
	return ws, texts
}

func simulate(name, order string, ws []sim.Write, p sim.Params) (Run, error) {
	r, err := sim.Simulate(ws, p)
	if err != nil {
		return Run{}, err
	}
	return Run{Name: name, Order: order, Duration: r.Duration, Finished: r.Finished, Splits: r.Splits,
		BusiestNodeShare: r.BusiestNodeShare, HotspotScore: r.HotspotScore,
		TimeToFullSpeed: r.TimeToFullSpeed, ReachedFullSpeed: r.ReachedFullSpeed, Result: r}, nil
}

// Quantiles returns k-1 distinct keys cutting ws's keys into k ranges of
// about equal count, in key order.
func Quantiles(ws []sim.Write, k int) [][]byte {
	if k < 2 || len(ws) < 2 {
		return nil
	}
	sorted := make([][]byte, len(ws))
	for i := range ws {
		sorted[i] = ws[i].Key
	}
	sort.Slice(sorted, func(a, b int) bool { return bytes.Compare(sorted[a], sorted[b]) < 0 })
	var out [][]byte
	for i := 1; i < k; i++ {
		q := sorted[i*len(sorted)/k]
		if len(q) > 0 && (len(out) == 0 || bytes.Compare(out[len(out)-1], q) < 0) {
			out = append(out, q)
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
	lowest := map[string][]byte{}
	n := map[string]float64{}
	for i, v := range first {
		if v == "" {
			return nil, nil, false
		}
		if k, seen := lowest[v]; !seen || bytes.Compare(ws[i].Key, k) < 0 {
			lowest[v] = ws[i].Key
		}
		n[v]++
		if len(n) > MaxDiscrete {
			return nil, nil, false
		}
	}
	for v := range n {
		labels = append(labels, v)
	}
	sort.Slice(labels, func(a, b int) bool { return bytes.Compare(lowest[labels[a]], lowest[labels[b]]) < 0 })
	for _, v := range labels {
		counts = append(counts, n[v])
	}
	return counts, labels, len(labels) > 0
}

// Spread counts keys in bins equal-width ranges of the key space they
// span: the bytes after the longest prefix all keys share, read as a
// number. Uniform keys (hashes, UUIDs, bit-reversed ids) fill the bins
// evenly; clustered keys pile up in a few. labels[i] is the lowest key
// text in bin i ("" for an empty bin).
func Spread(ws []sim.Write, texts []string, bins int) (counts []float64, labels []string) {
	counts, labels = make([]float64, bins), make([]string, bins)
	if len(ws) == 0 || bins <= 0 {
		return counts, labels
	}
	lo, hi := ws[0].Key, ws[0].Key
	for _, w := range ws {
		if bytes.Compare(w.Key, lo) < 0 {
			lo = w.Key
		}
		if bytes.Compare(w.Key, hi) > 0 {
			hi = w.Key
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
	low := make([][]byte, bins)
	for i, w := range ws {
		b := 0
		if h > l {
			b = min(bins-1, int(math.Floor((num(w.Key)-l)/(h-l)*float64(bins))))
		}
		counts[b]++
		if low[b] == nil || bytes.Compare(w.Key, low[b]) < 0 {
			low[b], labels[b] = w.Key, texts[i]
		}
	}
	return counts, labels
}
