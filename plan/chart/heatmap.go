package chart

import (
	"fmt"
	"image"
	"image/color"
	"io"
	"math"
)

// Heatmap is a Key Visualizer style picture of a load: time on x, key
// ranges on y in key order with the lowest keys at the top, one colour per
// cell from cold (near-black blue) through red, orange and yellow to white
// at the scale's maximum, with the total per column along the bottom edge
// and per row along the right edge.
type Heatmap struct {
	Title     string
	Cells     [][]float64 // [row][col], ≥ 0
	RowLabels []string    // one per row (the range's start key) or none; those longer than 45% of the panel are cut with …
	ColLabels []string    // one per column or none, drawn under the column's left edge; "" for none
	Max       float64     // the value drawn white (0: the largest cell)
	Unit      string      // of the cells, e.g. "writes/s"
}

// Sizes of the pictures, in pixels.
const (
	heatmapW  = 980
	heatmapH  = 620
	sideW     = 1640
	legendW   = 96
	margin    = 12
	titleArea = 40 // the picture's title, in the big font
)

// PNG draws the heatmap.
func (h Heatmap) PNG(w io.Writer) error {
	if err := h.check("Heatmap"); err != nil {
		return err
	}
	c := newCanvas(heatmapW, heatmapH)
	c.bigText(h.Title, heatmapW/2, 8, 2, ink)
	s := scaleOf(h)
	l := h.layout(image.Rect(margin, titleArea, heatmapW-legendW, heatmapH-margin))
	c.panel(h, l, s)
	c.legend(image.Rect(l.heat.Max.X+l.rightW, l.heat.Min.Y, heatmapW-margin, l.heat.Max.Y), s.max, h.Unit)
	return c.encode(w)
}

// SideBySide draws two heatmaps in one picture, a ("before") on the left
// and b ("after") on the right, at one colour scale and one scale of the
// edge bars so their cells compare: the larger Max of the two if either is
// set, else the largest cell of both.
func SideBySide(w io.Writer, title string, a, b Heatmap) error {
	if err := a.check("SideBySide: a"); err != nil {
		return err
	}
	if err := b.check("SideBySide: b"); err != nil {
		return err
	}
	c := newCanvas(sideW, heatmapH)
	c.bigText(title, sideW/2, 8, 2, ink)
	s := scaleOf(a).join(scaleOf(b))
	half := (sideW - legendW - margin) / 2
	la := a.layout(image.Rect(margin, titleArea, margin+half-margin, heatmapH-margin))
	lb := b.layout(image.Rect(margin+half+margin, titleArea, margin+2*half, heatmapH-margin))
	c.panel(a, la, s)
	c.panel(b, lb, s)
	top, bottom := max(la.heat.Min.Y, lb.heat.Min.Y), min(la.heat.Max.Y, lb.heat.Max.Y)
	c.legend(image.Rect(lb.heat.Max.X+lb.rightW, top, sideW-margin, bottom), s.max, a.Unit)
	return c.encode(w)
}

// check reports cells and labels that cannot be drawn.
func (h Heatmap) check(what string) error {
	cols := 0
	if len(h.Cells) > 0 {
		cols = len(h.Cells[0])
	}
	for i, row := range h.Cells {
		if len(row) != cols {
			return fmt.Errorf("chart: %s: Cells[%d] has %d columns, Cells[0] has %d", what, i, len(row), cols)
		}
		for j, v := range row {
			if !(v >= 0) || math.IsInf(v, 0) {
				return fmt.Errorf("chart: %s: Cells[%d][%d] = %v: want a finite value ≥ 0", what, i, j, v)
			}
		}
	}
	if n := len(h.RowLabels); n != 0 && n != len(h.Cells) {
		return fmt.Errorf("chart: %s: %d RowLabels for %d rows", what, n, len(h.Cells))
	}
	if n := len(h.ColLabels); n != 0 && n != cols {
		return fmt.Errorf("chart: %s: %d ColLabels for %d columns", what, n, cols)
	}
	if !(h.Max >= 0) || math.IsInf(h.Max, 0) {
		return fmt.Errorf("chart: %s: Max = %v: want a finite value ≥ 0", what, h.Max)
	}
	return nil
}

// scale is what colours and bar lengths are relative to.
type scale struct {
	max            float64 // white
	fixed          bool    // max was given
	colMax, rowMax float64 // longest bottom and right bar
}

func scaleOf(h Heatmap) scale {
	s := scale{max: h.Max, fixed: h.Max > 0}
	cols, rows := h.totals()
	for i, row := range h.Cells {
		for _, v := range row {
			if !s.fixed {
				s.max = max(s.max, v)
			}
		}
		s.rowMax = max(s.rowMax, rows[i])
	}
	for _, v := range cols {
		s.colMax = max(s.colMax, v)
	}
	return s
}

// frac is v's place on the colour scale, 0 to 1.
func (s scale) frac(v float64) float64 {
	if s.max <= 0 {
		return 0
	}
	return v / s.max
}

func (s scale) join(t scale) scale {
	out := scale{fixed: s.fixed || t.fixed, colMax: max(s.colMax, t.colMax), rowMax: max(s.rowMax, t.rowMax)}
	switch {
	case s.fixed && t.fixed:
		out.max = max(s.max, t.max)
	case s.fixed:
		out.max = s.max
	case t.fixed:
		out.max = t.max
	default:
		out.max = max(s.max, t.max)
	}
	return out
}

// totals sums the cells per column and per row.
func (h Heatmap) totals() (cols, rows []float64) {
	rows = make([]float64, len(h.Cells))
	for i, row := range h.Cells {
		if cols == nil {
			cols = make([]float64, len(row))
		}
		for j, v := range row {
			cols[j] += v
			rows[i] += v
		}
	}
	return cols, rows
}

// heatLayout is where the parts of one heatmap panel go.
type heatLayout struct {
	panel  image.Rectangle
	heat   image.Rectangle // the cells
	labelW int             // row labels, left of heat
	rightW int             // the right bar and its gap
	bottom image.Rectangle // the bottom bar
	right  image.Rectangle // the right bar
}

const (
	panelTitleH = 22
	barLen      = 56 // of the longest edge bar
	barGap      = 6
	xLabelH     = 18
	// maxLabelShare is the most of a panel's width its row labels take:
	// a key of a shard, a timestamp and a string id (44 characters) is
	// shown whole beside the other heatmap, longer ones are cut with '…'.
	maxLabelShare = 0.45
)

func (h Heatmap) layout(p image.Rectangle) heatLayout {
	chars := len("total")
	for _, s := range h.RowLabels {
		chars = max(chars, len([]rune(s)))
	}
	most := max(int(maxLabelShare*float64(p.Dx()))-8, len("total")*charW) / charW
	l := heatLayout{panel: p, labelW: min(chars, most)*charW + 8, rightW: barGap + barLen + 4}
	l.heat = image.Rect(p.Min.X+l.labelW, p.Min.Y+panelTitleH, p.Max.X-l.rightW, p.Max.Y-barGap-barLen-xLabelH)
	l.bottom = image.Rect(l.heat.Min.X, l.heat.Max.Y+barGap, l.heat.Max.X, l.heat.Max.Y+barGap+barLen)
	l.right = image.Rect(l.heat.Max.X+barGap, l.heat.Min.Y, l.heat.Max.X+barGap+barLen, l.heat.Max.Y)
	return l
}

// span maps pixel i of n onto the cells [lo, hi] of count cells.
func span(i, n, count int) (lo, hi int) {
	lo = i * count / n
	hi = max(lo, ((i+1)*count-1)/n)
	return lo, min(hi, count-1)
}

// cellAt is the largest cell under pixel (x, y) of the heat area, so a hot
// cell stays visible when there are more cells than pixels.
func (h Heatmap) cellAt(l heatLayout, x, y int) float64 {
	r0, r1 := span(y-l.heat.Min.Y, l.heat.Dy(), len(h.Cells))
	c0, c1 := span(x-l.heat.Min.X, l.heat.Dx(), len(h.Cells[0]))
	v := 0.0
	for r := r0; r <= r1; r++ {
		for c := c0; c <= c1; c++ {
			v = max(v, h.Cells[r][c])
		}
	}
	return v
}

func (c canvas) panel(h Heatmap, l heatLayout, s scale) {
	c.text(truncate(h.Title, l.panel.Dx()/charW), l.heat.Min.X, l.panel.Min.Y+lineH, left, ink)
	c.text("total", l.right.Min.X, l.panel.Min.Y+lineH, left, softInk)
	if len(h.Cells) == 0 || len(h.Cells[0]) == 0 {
		c.fill(l.heat, heatColour(0))
		c.textMiddle("no data", l.heat.Min.X+l.heat.Dx()/2, l.heat.Min.Y+l.heat.Dy()/2, center, white)
		return
	}
	for y := l.heat.Min.Y; y < l.heat.Max.Y; y++ {
		for x := l.heat.Min.X; x < l.heat.Max.X; x++ {
			c.SetRGBA(x, y, heatColour(s.frac(h.cellAt(l, x, y))))
		}
	}
	c.rowLabels(h, l)
	c.colLabels(h, l)
	c.edgeBars(h, l, s)
}

// rowLabels writes each row's label at its top edge (the range's start
// key), as many as fit without overlapping.
func (c canvas) rowLabels(h Heatmap, l heatLayout) {
	rows := len(h.Cells)
	rowH := float64(l.heat.Dy()) / float64(rows)
	every := max(1, int(math.Ceil(float64(lineH+1)/rowH)))
	chars := (l.labelW - 8) / charW
	for r := 0; r < rows && r < len(h.RowLabels); r += every {
		top := l.heat.Min.Y + int(float64(r)*rowH)
		y := top + lineH/2 // the label's middle
		if rowH >= lineH {
			y = top + int(rowH/2)
		}
		c.textMiddle(truncate(h.RowLabels[r], chars), l.heat.Min.X-6, y, right, ink)
		c.fill(image.Rect(l.heat.Min.X-4, top, l.heat.Min.X, top+1), axisGrey)
	}
}

// colLabels writes the column labels under the bottom bar, skipping those
// that would overlap the last one written.
func (c canvas) colLabels(h Heatmap, l heatLayout) {
	cols := len(h.Cells[0])
	end := math.MinInt
	for i, s := range h.ColLabels {
		if s == "" {
			continue
		}
		x := l.heat.Min.X + i*l.heat.Dx()/cols
		w := textWidth(s)
		from := max(x-w/2, l.heat.Min.X-l.labelW/2)
		if from < end+charW || from+w > l.panel.Max.X {
			continue
		}
		c.fill(image.Rect(x, l.bottom.Max.Y, x+1, l.bottom.Max.Y+3), axisGrey)
		c.text(s, from, l.bottom.Max.Y+3+face.Ascent, left, softInk)
		end = from + w
	}
}

// edgeBars draws the totals per column under the cells and per row to
// their right.
func (c canvas) edgeBars(h Heatmap, l heatLayout, s scale) {
	cols, rows := h.totals()
	c.fill(image.Rect(l.bottom.Min.X, l.bottom.Max.Y, l.bottom.Max.X, l.bottom.Max.Y+1), axisGrey)
	for i, v := range cols {
		x0 := l.bottom.Min.X + i*l.bottom.Dx()/len(cols)
		x1 := max(x0+1, l.bottom.Min.X+(i+1)*l.bottom.Dx()/len(cols))
		c.fill(image.Rect(x0, l.bottom.Max.Y-barLength(v, s.colMax), x1, l.bottom.Max.Y), barColour)
	}
	c.fill(image.Rect(l.right.Min.X-1, l.right.Min.Y, l.right.Min.X, l.right.Max.Y), axisGrey)
	for i, v := range rows {
		y0 := l.right.Min.Y + i*l.right.Dy()/len(rows)
		y1 := max(y0+1, l.right.Min.Y+(i+1)*l.right.Dy()/len(rows))
		c.fill(image.Rect(l.right.Min.X, y0, l.right.Min.X+barLength(v, s.rowMax), y1), barColour)
	}
	// the bars' scales: the longest bar's value at its end
	c.text("total", l.heat.Min.X-6, l.bottom.Max.Y-6, right, softInk)
	c.fill(image.Rect(l.bottom.Min.X-4, l.bottom.Min.Y, l.bottom.Min.X, l.bottom.Min.Y+1), axisGrey)
	c.textMiddle(Number(s.colMax), l.bottom.Min.X-6, l.bottom.Min.Y, right, softInk)
	c.fill(image.Rect(l.right.Max.X-1, l.right.Max.Y, l.right.Max.X, l.right.Max.Y+4), axisGrey)
	c.text(Number(s.rowMax), l.right.Max.X, l.right.Max.Y+5+face.Ascent, right, softInk)
}

func barLength(v, max float64) int {
	if max <= 0 {
		return 0
	}
	return int(math.Round(v / max * barLen))
}

// legend draws the colour scale from 0 at the bottom to max at the top in
// r, with ticks and the unit.
func (c canvas) legend(r image.Rectangle, max float64, unit string) {
	if max <= 0 {
		max = 1
	}
	bar := image.Rect(r.Min.X+8, r.Min.Y+lineH+8, r.Min.X+24, r.Max.Y)
	c.text(truncate(unit, (r.Dx()-2)/charW), r.Min.X+2, r.Min.Y+lineH, left, softInk)
	for y := bar.Min.Y; y < bar.Max.Y; y++ {
		t := float64(bar.Max.Y-1-y) / float64(bar.Dy()-1)
		c.fill(image.Rect(bar.Min.X, y, bar.Max.X, y+1), heatColour(t))
	}
	c.frame(bar.Inset(-1), axisGrey)
	for _, v := range niceTicks(0, max, niceStep(0, max, 4)) {
		y := bar.Max.Y - 1 - int(math.Round(v/max*float64(bar.Dy()-1)))
		c.fill(image.Rect(bar.Max.X, y, bar.Max.X+4, y+1), axisGrey)
		c.textMiddle(Number(v), bar.Max.X+6, y, left, softInk)
	}
}

// heatStops is the colour scale: cold near-black blue, purple, red,
// orange, yellow, white at the top.
var heatStops = []struct {
	at  float64
	col color.RGBA
}{
	{0, color.RGBA{10, 12, 38, 255}},
	{0.12, color.RGBA{42, 20, 96, 255}},
	{0.32, color.RGBA{140, 24, 100, 255}},
	{0.52, color.RGBA{220, 50, 40, 255}},
	{0.72, color.RGBA{250, 145, 20, 255}},
	{0.88, color.RGBA{255, 225, 70, 255}},
	{1, color.RGBA{255, 255, 255, 255}},
}

// heatColour is the colour of t = value/max, clamped to [0, 1].
func heatColour(t float64) color.RGBA {
	t = math.Max(0, math.Min(1, t))
	for i := 1; i < len(heatStops); i++ {
		a, b := heatStops[i-1], heatStops[i]
		if t <= b.at {
			f := (t - a.at) / (b.at - a.at)
			mix := func(x, y uint8) uint8 { return uint8(math.Round(float64(x) + f*(float64(y)-float64(x)))) }
			return color.RGBA{mix(a.col.R, b.col.R), mix(a.col.G, b.col.G), mix(a.col.B, b.col.B), 255}
		}
	}
	return heatStops[len(heatStops)-1].col
}
