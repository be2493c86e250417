package chart

import (
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/image/draw"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

var (
	white     = color.RGBA{255, 255, 255, 255}
	ink       = color.RGBA{30, 30, 36, 255}
	softInk   = color.RGBA{95, 95, 105, 255}
	axisGrey  = color.RGBA{150, 150, 158, 255}
	gridGrey  = color.RGBA{228, 228, 232, 255}
	barColour = color.RGBA{90, 120, 170, 255}
)

// face is the one font: 7×13 pixels a glyph, ASCII.
var face = basicfont.Face7x13

const (
	charW    = 7  // advance of one glyph
	lineH    = 13 // height of one line of text
	ellipsis = '…'
)

// canvas is an image being drawn on.
type canvas struct{ *image.RGBA }

func newCanvas(w, h int) canvas {
	c := canvas{image.NewRGBA(image.Rect(0, 0, w, h))}
	c.fill(c.Bounds(), white)
	return c
}

func (c canvas) encode(w io.Writer) error { return png.Encode(w, c.RGBA) }

func (c canvas) fill(r image.Rectangle, col color.Color) {
	draw.Draw(c.RGBA, r, image.NewUniform(col), image.Point{}, draw.Src)
}

// frame draws a one-pixel outline just inside r.
func (c canvas) frame(r image.Rectangle, col color.Color) {
	c.fill(image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+1), col)
	c.fill(image.Rect(r.Min.X, r.Max.Y-1, r.Max.X, r.Max.Y), col)
	c.fill(image.Rect(r.Min.X, r.Min.Y, r.Min.X+1, r.Max.Y), col)
	c.fill(image.Rect(r.Max.X-1, r.Min.Y, r.Max.X, r.Max.Y), col)
}

// align places text relative to its anchor point.
type align int

const (
	left align = iota
	center
	right
)

// textWidth is the width in pixels of s in the font.
func textWidth(s string) int { return utf8.RuneCountInString(s) * charW }

// text draws s with its baseline at y, placed at x by a. The font has no
// '…', so it is drawn as three dots.
func (c canvas) text(s string, x, y int, a align, col color.Color) {
	switch a {
	case center:
		x -= textWidth(s) / 2
	case right:
		x -= textWidth(s)
	}
	d := font.Drawer{Dst: c.RGBA, Src: image.NewUniform(col), Face: face}
	for i, part := range strings.Split(s, string(ellipsis)) {
		if i > 0 {
			for k := 1; k <= 5; k += 2 {
				c.fill(image.Rect(x+k, y-1, x+k+1, y), col)
			}
			x += charW
		}
		d.Dot = fixed.P(x, y)
		d.DrawString(part)
		x += textWidth(part)
	}
}

// textMiddle draws s vertically centred on y.
func (c canvas) textMiddle(s string, x, y int, a align, col color.Color) {
	c.text(s, x, y+lineH/2-2, a, col)
}

// bigText draws s at scale× the font size, centred on x, top at y.
func (c canvas) bigText(s string, x, y, scale int, col color.Color) {
	small := canvas{image.NewRGBA(image.Rect(0, 0, textWidth(s), lineH+2))}
	small.text(s, 0, face.Ascent, left, col)
	w, h := small.Bounds().Dx()*scale, small.Bounds().Dy()*scale
	dst := image.Rect(x-w/2, y, x-w/2+w, y+h)
	draw.NearestNeighbor.Scale(c.RGBA, dst, small.RGBA, small.Bounds(), draw.Over, nil)
}

// verticalText draws s turned a quarter left, centred on (x, y).
func (c canvas) verticalText(s string, x, y int, col color.Color) {
	small := canvas{image.NewRGBA(image.Rect(0, 0, textWidth(s), lineH+2))}
	small.text(s, 0, face.Ascent, left, col)
	w, h := small.Bounds().Dx(), small.Bounds().Dy()
	for sy := range h {
		for sx := range w {
			if px := small.RGBAAt(sx, sy); px.A > 0 {
				c.Set(x-h/2+sy, y+w/2-sx, px)
			}
		}
	}
}

// truncate shortens s to at most n characters, ending in '…' if cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 1 {
		return string(ellipsis)
	}
	r := []rune(s)
	return string(r[:n-1]) + string(ellipsis)
}

// polyline draws lines of the given width through the points (x0, y0,
// x1, y1, …); dashed lines are 8 pixels on, 5 off along the whole path.
func (c canvas) polyline(xy []float64, width int, dashed bool, col color.Color, clip image.Rectangle) {
	dist := 0
	for k := 2; k+1 < len(xy); k += 2 {
		x0, y0, x1, y1 := xy[k-2], xy[k-1], xy[k], xy[k+1]
		n := int(math.Ceil(math.Max(math.Abs(x1-x0), math.Abs(y1-y0))))
		for i := 0; i <= n; i++ {
			if dashed && (dist+i)%13 >= 8 {
				continue
			}
			t := 0.0
			if n > 0 {
				t = float64(i) / float64(n)
			}
			x := int(math.Round(x0+t*(x1-x0))) - width/2
			y := int(math.Round(y0+t*(y1-y0))) - width/2
			c.fill(image.Rect(x, y, x+width, y+width).Intersect(clip), col)
		}
		dist += n
	}
}

// niceStep is the round step (1, 2 or 5 × 10^k) that cuts [lo, hi] into
// about n intervals.
func niceStep(lo, hi float64, n int) float64 {
	raw := (hi - lo) / float64(max(n, 1))
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	return closestStep(hi-lo, n, []float64{mag, 2 * mag, 5 * mag, 10 * mag})
}

// closestStep is the one of steps that cuts length into the number of
// intervals closest to n.
func closestStep(length float64, n int, steps []float64) float64 {
	best := steps[0]
	for _, s := range steps[1:] {
		if math.Abs(length/s-float64(n)) < math.Abs(length/best-float64(n)) {
			best = s
		}
	}
	return best
}

// niceTicks returns the multiples of step in [lo, hi].
func niceTicks(lo, hi, step float64) []float64 {
	if !(hi > lo) || !(step > 0) {
		return []float64{lo}
	}
	var out []float64
	for k := math.Ceil(lo/step - 1e-9); k*step <= hi+step*1e-9; k++ {
		out = append(out, k*step+0) // +0: no "-0"
	}
	return out
}

// durationSteps are round steps of a time axis, in seconds.
var durationSteps = []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800,
	3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 7 * 86400, 14 * 86400, 30 * 86400}

// timeStep is the round duration that cuts [0, secs] into about n.
func timeStep(secs float64, n int) float64 {
	if secs > durationSteps[len(durationSteps)-1]*float64(n) {
		return niceStep(0, secs, n)
	}
	return closestStep(secs, n, durationSteps)
}

// TimeColumns labels about n of the columns of a heatmap whose column c
// ends at colEnd[c] (sim.Grid.ColEnd): a round time goes under the column
// holding it, the others get "".
func TimeColumns(colEnd []time.Duration, n int) []string {
	out := make([]string, len(colEnd))
	if len(colEnd) == 0 {
		return out
	}
	total := colEnd[len(colEnd)-1].Seconds()
	c := 0
	for _, t := range niceTicks(0, total, timeStep(total, n)) {
		for c < len(colEnd) && colEnd[c].Seconds() <= t {
			c++
		}
		if c < len(colEnd) {
			out[c] = Seconds(t)
		}
	}
	return out
}

// Number formats v compactly: 950, 1.5k, 12k, 3.4M, 2G.
func Number(v float64) string {
	a := math.Abs(v)
	for _, u := range []struct {
		div  float64
		unit string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if a >= u.div {
			return trimFloat(v/u.div) + u.unit
		}
	}
	return trimFloat(v)
}

// trimFloat prints v with about three significant digits.
func trimFloat(v float64) string {
	digits := 3
	for a := math.Abs(v); a >= 1 && digits > 0; a /= 10 {
		digits--
	}
	s := strconv.FormatFloat(v, 'f', digits, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		return "0"
	}
	return s
}

// Seconds formats a time in seconds for an axis, in at most two units:
// 45s, 5m, 1h30m, 2d6h.
func Seconds(v float64) string {
	d := int64(math.Round(v))
	if d < 0 {
		return "-" + Seconds(-v)
	}
	units := []struct {
		secs int64
		name string
	}{{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}}
	for i, u := range units {
		if d < u.secs {
			continue
		}
		out := strconv.FormatInt(d/u.secs, 10) + u.name
		if i+1 < len(units) {
			if r := d % u.secs / units[i+1].secs; r > 0 {
				out += strconv.FormatInt(r, 10) + units[i+1].name
			}
		}
		return out
	}
	return "0s"
}
