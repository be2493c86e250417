package sim

import "time"

// series accumulates per-step rates into at most MaxSeries buckets,
// doubling the bucket width (in steps) when they run out.
type series struct {
	width   int32 // steps per bucket
	nodes   int
	buckets []bucket
}

type bucket struct {
	steps   int32
	offered float64   // Σ offered rate over its steps
	perNode []float64 // Σ rate per node over its steps
}

func (s *series) add(offered float64, perNode []float64) {
	if n := len(s.buckets); n == 0 || s.buckets[n-1].steps == s.width {
		if n == MaxSeries {
			s.halve()
		}
		if n := len(s.buckets); n == 0 || s.buckets[n-1].steps == s.width {
			s.buckets = append(s.buckets, bucket{perNode: make([]float64, s.nodes)})
		}
	}
	b := &s.buckets[len(s.buckets)-1]
	b.steps++
	b.offered += offered
	for i, v := range perNode {
		b.perNode[i] += v
	}
}

// halve merges neighbouring buckets pairwise.
func (s *series) halve() {
	out := s.buckets[:0]
	for i := 0; i < len(s.buckets); i += 2 {
		b := s.buckets[i]
		if i+1 < len(s.buckets) {
			c := s.buckets[i+1]
			b.steps += c.steps
			b.offered += c.offered
			for j, v := range c.perNode {
				b.perNode[j] += v
			}
		}
		out = append(out, b)
	}
	s.buckets = out
	s.width *= 2
}

// ticks returns the buckets as mean rates.
func (s *series) ticks(step time.Duration) []Tick {
	out := make([]Tick, len(s.buckets))
	for i, b := range s.buckets {
		n := float64(b.steps)
		t := Tick{
			At:      time.Duration(int64(i)*int64(s.width)) * step,
			Width:   time.Duration(b.steps) * step,
			Offered: b.offered / n,
			PerNode: make([]float64, len(b.perNode)),
		}
		for j, v := range b.perNode {
			t.PerNode[j] = v / n
			t.Done += t.PerNode[j]
		}
		out[i] = t
	}
	return out
}

// busiestShare is Σ busiest node per bucket / Σ all: the busiest node's
// share of each bucket's writes, weighted by them.
func (s *series) busiestShare() float64 {
	busiest, total := 0.0, 0.0
	for _, b := range s.buckets {
		top := 0.0
		for _, v := range b.perNode {
			total += v
			top = max(top, v)
		}
		busiest += top
	}
	if total == 0 {
		return 0
	}
	return busiest / total
}
