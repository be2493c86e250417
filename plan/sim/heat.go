package sim

import "time"

// Grid is writes per (key range × time bucket), for a heatmap.
type Grid struct {
	Cells    [][]float64     // [row][col]: real writes
	RowStart []int           // index into the writes of the lowest key of each row
	ColEnd   []time.Duration // end of each column's time bucket
}

// Heat returns the grid of simulated writes: rows = `ranges` key ranges
// holding equal numbers of the given writes' keys, in key order (row 0 =
// lowest keys; fewer rows if there are fewer writes); cols = `cols` equal
// time buckets over the simulated duration; cell = real writes in that
// range and bucket, counted in the step each write completed. RowStart[i]
// is the index (into writes) of the lowest key of row i, so the caller can
// label the row with that key's readable text. The cells sum to Writes
// when the load finished; unfinished writes are left out.
func (r Result) Heat(ranges, cols int) Grid {
	n := len(r.order)
	ranges = min(ranges, n)
	if ranges <= 0 || cols <= 0 || r.steps == 0 {
		return Grid{}
	}
	g := Grid{Cells: make([][]float64, ranges), RowStart: make([]int, ranges), ColEnd: make([]time.Duration, cols)}
	for i := range g.Cells {
		g.Cells[i] = make([]float64, cols)
		g.RowStart[i] = int(r.order[(i*n+ranges-1)/ranges])
	}
	steps := int64(r.steps)
	for c := range g.ColEnd {
		// column c holds the steps k with k*cols/steps == c
		end := (int64(c+1)*steps + int64(cols) - 1) / int64(cols)
		g.ColEnd[c] = time.Duration(end) * r.Params.Step
	}
	for rank, w := range r.order {
		k := r.done[w]
		if k < 0 {
			continue
		}
		g.Cells[rank*ranges/n][int64(k)*int64(cols)/steps] += r.Params.Scale
	}
	return g
}

// PerSecond returns the cells as writes/s over each column's bucket, so
// grids of runs of different lengths compare on one colour scale.
func (g Grid) PerSecond() [][]float64 {
	out := make([][]float64, len(g.Cells))
	for i, row := range g.Cells {
		out[i] = make([]float64, len(row))
		for c, v := range row {
			start := time.Duration(0)
			if c > 0 {
				start = g.ColEnd[c-1]
			}
			if w := (g.ColEnd[c] - start).Seconds(); w > 0 {
				out[i][c] = v / w
			}
		}
	}
	return out
}
