package chart

import (
	"fmt"
	"image"
	"image/color"
	"io"
	"math"
)

// Series is one line of a LineChart.
type Series struct {
	Name   string
	X, Y   []float64
	Color  color.Color // nil: the next of a fixed palette
	Dashed bool
}

// LineChart draws series of points joined by lines, e.g. the achieved
// write rate over time against the ramp schedule.
type LineChart struct {
	Title, XLabel, YLabel string
	Series                []Series
	XFormat, YFormat      func(float64) string // tick labels (nil: Number)
	// XSeconds says X is time in seconds: ticks at round durations,
	// labelled by Seconds (XFormat is then not used).
	XSeconds bool
}

// BarChart draws one bar per label, e.g. a histogram of rewritten keys
// across key ranges.
type BarChart struct {
	Title, XLabel, YLabel string
	Labels                []string
	Values                []float64
	YFormat               func(float64) string // tick labels (nil: Number)
}

const (
	plotW = 900
	plotH = 600
)

var palette = []color.RGBA{
	{220, 60, 40, 255},  // red
	{40, 100, 200, 255}, // blue
	{40, 160, 80, 255},  // green
	{230, 150, 20, 255}, // orange
	{130, 60, 170, 255}, // purple
	{60, 60, 60, 255},   // grey
}

// PNG draws the chart.
func (lc LineChart) PNG(w io.Writer) error {
	xr, yr := span1{math.Inf(1), math.Inf(-1)}, span1{0, math.Inf(-1)}
	for i, s := range lc.Series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("chart: LineChart.Series[%d] %q: %d X values, %d Y values", i, s.Name, len(s.X), len(s.Y))
		}
		for j := range s.X {
			if bad(s.X[j]) || bad(s.Y[j]) {
				return fmt.Errorf("chart: LineChart.Series[%d] %q: point %d is (%v, %v): want finite values", i, s.Name, j, s.X[j], s.Y[j])
			}
			xr.add(s.X[j])
			yr.add(s.Y[j])
		}
	}
	if math.IsInf(xr.lo, 1) {
		xr = span1{0, 1}
	}
	c := newCanvas(plotW, plotH)
	xt := xTicks{format: orNumber(lc.XFormat), step: niceStep(xr.lo, xr.padded().hi, 6)}
	if lc.XSeconds {
		xt = xTicks{format: Seconds, step: timeStep(xr.padded().hi-xr.lo, 6)}
	}
	ax := c.axes(lc.Title, lc.XLabel, lc.YLabel, xr, yr, &xt, orNumber(lc.YFormat))
	for i, s := range lc.Series {
		xy := make([]float64, 0, 2*len(s.X))
		for j := range s.X {
			xy = append(xy, ax.x(s.X[j]), ax.y(s.Y[j]))
		}
		if len(s.X) == 1 {
			xy = append(xy, xy...) // one point: a dot
		}
		c.polyline(xy, 2, s.Dashed, s.colour(i), ax.area.Inset(-1))
	}
	c.lineLegend(ax.area, lc.Series)
	return c.encode(w)
}

// PNG draws the chart.
func (bc BarChart) PNG(w io.Writer) error {
	if n := len(bc.Labels); n != 0 && n != len(bc.Values) {
		return fmt.Errorf("chart: BarChart: %d Labels for %d Values", n, len(bc.Values))
	}
	yr := span1{0, math.Inf(-1)}
	for i, v := range bc.Values {
		if bad(v) {
			return fmt.Errorf("chart: BarChart.Values[%d] = %v: want a finite value", i, v)
		}
		yr.add(v)
	}
	c := newCanvas(plotW, plotH)
	n := max(len(bc.Values), 1)
	ax := c.axes(bc.Title, bc.XLabel, bc.YLabel, span1{0, float64(n)}, yr, nil, orNumber(bc.YFormat))
	slot := float64(ax.area.Dx()) / float64(n)
	gap := int(math.Min(slot*0.15, 6))
	for i, v := range bc.Values {
		if v == 0 {
			continue
		}
		x0 := int(ax.x(float64(i))) + gap/2
		x1 := max(int(ax.x(float64(i+1)))-(gap+1)/2, x0+1)
		y0, y1 := int(math.Round(ax.y(v))), int(math.Round(ax.y(0)))+1
		c.fill(image.Rect(x0, min(y0, y1), x1, max(y0, y1)), barColour)
	}
	c.barLabels(ax, bc.Labels, slot)
	return c.encode(w)
}

// barLabels writes the labels under their bars, cut to fit, every k-th
// if there is no room for all.
func (c canvas) barLabels(ax axes, labels []string, slot float64) {
	longest := 1
	for _, s := range labels {
		longest = max(longest, len([]rune(s)))
	}
	chars := max(1, min(longest, 12))
	every := max(1, int(math.Ceil(float64(chars*charW+charW)/slot)))
	for i := 0; i < len(labels); i += every {
		x := int(ax.x(float64(i) + 0.5))
		c.text(truncate(labels[i], chars), x, ax.area.Max.Y+6+face.Ascent, center, softInk)
	}
}

// colour is the series' colour, or the i-th of the palette.
func (s Series) colour(i int) color.Color {
	if s.Color == nil {
		return palette[i%len(palette)]
	}
	return s.Color
}

func bad(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }

func orNumber(f func(float64) string) func(float64) string {
	if f == nil {
		return Number
	}
	return f
}

// span1 is a range of values.
type span1 struct{ lo, hi float64 }

func (s *span1) add(v float64) {
	s.lo = math.Min(s.lo, v)
	s.hi = math.Max(s.hi, v)
}

// padded returns a range that is not empty.
func (s span1) padded() span1 {
	if !(s.hi > s.lo) {
		return span1{s.lo, s.lo + 1}
	}
	return s
}

// axes maps values to pixels of the plot area.
type axes struct {
	area   image.Rectangle
	xs, ys span1
}

func (a axes) x(v float64) float64 {
	return float64(a.area.Min.X) + (v-a.xs.lo)/(a.xs.hi-a.xs.lo)*float64(a.area.Dx()-1)
}

func (a axes) y(v float64) float64 {
	return float64(a.area.Max.Y-1) - (v-a.ys.lo)/(a.ys.hi-a.ys.lo)*float64(a.area.Dy()-1)
}

// xTicks is how the x axis is ticked.
type xTicks struct {
	step   float64
	format func(float64) string
}

// axes draws the title, the axis labels, the frame and grid lines with
// tick labels (no x ticks when xt is nil), and returns the mapping. The y
// axis runs from a round value at or below ys.lo to one at or above ys.hi.
func (c canvas) axes(title, xLabel, yLabel string, xs, ys span1, xt *xTicks, yf func(float64) string) axes {
	c.bigText(title, plotW/2, 8, 2, ink)
	ax := axes{area: image.Rect(84, 50, plotW-24, plotH-64), xs: xs.padded()}
	ys = ys.padded()
	step := niceStep(ys.lo, ys.hi, 5)
	ax.ys = span1{math.Floor(ys.lo/step) * step, math.Ceil(ys.hi/step) * step}
	for _, v := range niceTicks(ax.ys.lo, ax.ys.hi, step) {
		y := int(math.Round(ax.y(v)))
		c.fill(image.Rect(ax.area.Min.X, y, ax.area.Max.X, y+1), gridGrey)
		c.textMiddle(yf(v), ax.area.Min.X-8, y, right, softInk)
	}
	if xt != nil {
		for _, v := range niceTicks(ax.xs.lo, ax.xs.hi, xt.step) {
			x := int(math.Round(ax.x(v)))
			c.fill(image.Rect(x, ax.area.Min.Y, x+1, ax.area.Max.Y), gridGrey)
			c.fill(image.Rect(x, ax.area.Max.Y, x+1, ax.area.Max.Y+4), axisGrey)
			c.text(xt.format(v), x, ax.area.Max.Y+6+face.Ascent, center, softInk)
		}
	}
	c.frame(ax.area.Inset(-1), axisGrey)
	c.text(xLabel, ax.area.Min.X+ax.area.Dx()/2, plotH-16, center, ink)
	c.verticalText(yLabel, 14, ax.area.Min.Y+ax.area.Dy()/2, ink)
	return ax
}

// lineLegend lists the series in a box at the top right of the area.
func (c canvas) lineLegend(area image.Rectangle, ss []Series) {
	if len(ss) == 0 {
		return
	}
	w := 0
	for _, s := range ss {
		w = max(w, textWidth(s.Name))
	}
	box := image.Rect(area.Max.X-w-52, area.Min.Y+8, area.Max.X-8, area.Min.Y+16+len(ss)*(lineH+5))
	c.fill(box, white)
	c.frame(box, axisGrey)
	for i, s := range ss {
		y := float64(box.Min.Y + 10 + i*(lineH+5))
		c.polyline([]float64{float64(box.Min.X + 8), y, float64(box.Min.X + 34), y}, 2, s.Dashed, s.colour(i), box)
		c.textMiddle(s.Name, box.Min.X+40, int(y), left, ink)
	}
}
