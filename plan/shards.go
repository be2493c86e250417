package plan

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/rekeyio/rekey/plan/detect"
	"github.com/rekeyio/rekey/plan/keys"
	"github.com/rekeyio/rekey/plan/rules"
)

// UnevenShards is how far above an even share the busiest node's share
// of whole shards must be for a finding (8 shards on 3 nodes: 12.5%; 31
// signed values on 3, shard 0 counting twice: 3%, none).
const UnevenShards = 0.1

// shardFindings are the findings about the shard column the rewrite puts
// first, from the values the new keys show: shards that divide unevenly
// over the nodes (each value weighted by its share by design), and the
// signed form's 2N−1 values of which 0 takes twice the share of the
// others (with the shares counted in the sample).
func shardFindings(set *keys.Set, in Input, nodes int) []rules.Finding {
	if in.ShardColumn == "" || in.Datastore || nodes < 1 {
		return nil
	}
	count := map[int64]int{}
	for i := range set.Len() {
		if p, ok := set.First(false, i); ok && p.Kind == "int" {
			count[p.Int]++
		}
	}
	if len(count) < 2 {
		return nil
	}
	var values []int64
	total := 0
	for v, c := range count {
		values = append(values, v)
		total += c
	}
	slices.Sort(values)
	subject := in.Table + "." + in.ShardColumn
	sampled := detect.Count(int64(total), "sampled key")
	var out []rules.Finding
	if in.SignedShards && len(values) > 2 && count[0] > 0 {
		others := float64(total-count[0]) / float64(len(values)-1)
		out = append(out, rules.New(rules.SignedShards, subject, fmt.Sprintf(
			"n = %d in mode signed gives %d values of %s (%d..%d) in %s; 0 holds %.1f%% of them, each other value %.1f%% on average (%.1f×)",
			in.Shards, len(values), in.ShardColumn, values[0], values[len(values)-1], sampled,
			100*float64(count[0])/float64(total), 100*others/float64(total), float64(count[0])/others)))
	}
	// Each value's share by design: 1/n, the signed form's 0 twice that.
	units := map[int64]int{}
	for _, v := range values {
		units[v] = 1
		if in.SignedShards && v == 0 {
			units[v] = 2
		}
	}
	if busiest, held, all := wholeShards(units, nodes); float64(busiest)/float64(all) >= (1+UnevenShards)/float64(nodes) {
		twice := ""
		if in.SignedShards {
			twice = " (0 counting twice)"
		}
		out = append(out, rules.New(rules.ShardsUneven, subject, fmt.Sprintf(
			"%d values of %s over %s: placed whole, the busiest node holds %d of them%s, %.1f%% of the writes, against an even %.1f%%",
			len(values), in.ShardColumn, detect.Count(int64(nodes), "node"), held, twice, 100*float64(busiest)/float64(all), 100/float64(nodes))))
	}
	return out
}

// wholeShards places shards of the given sizes on nodes, the largest
// first onto the least loaded node, and returns the busiest node's load,
// how many shards it holds and the sizes' sum: the least that placing
// whole shards allows when every size is 1 or 2.
func wholeShards(size map[int64]int, nodes int) (busiest, held, all int) {
	sizes := make([]int, 0, len(size))
	for _, c := range size {
		sizes = append(sizes, c)
		all += c
	}
	slices.SortFunc(sizes, func(a, b int) int { return cmp.Compare(b, a) })
	load := make([]int, nodes)
	shards := make([]int, nodes)
	for _, s := range sizes {
		i := 0
		for j := range load {
			if load[j] < load[i] {
				i = j
			}
		}
		load[i] += s
		shards[i]++
	}
	top := 0
	for j := range load {
		if load[j] > load[top] || load[j] == load[top] && shards[j] > shards[top] {
			top = j
		}
	}
	return load[top], shards[top], all
}
