package chart

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/plan/sim"
)

// outDir is where the tests write their pictures: a temporary directory,
// or $REKEY_CHART_LOOK to keep them for a look.
func outDir(t *testing.T) string {
	if d := os.Getenv("REKEY_CHART_LOOK"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// render writes a picture to name in outDir and decodes it back.
func render(t *testing.T, name string, draw func(io.Writer) error) *image.RGBA {
	t.Helper()
	var buf bytes.Buffer
	if err := draw(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outDir(t), name), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	rgba, ok := img.(*image.RGBA)
	if !ok {
		t.Fatalf("%s decodes as %T", name, img)
	}
	return rgba
}

func wantSize(t *testing.T, img image.Image, w, h int) {
	t.Helper()
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("size %dx%d, want %dx%d", b.Dx(), b.Dy(), w, h)
	}
}

// cellCentre is the pixel in the middle of cell [r][c].
func cellCentre(l heatLayout, rows, cols, r, c int) (x, y int) {
	return l.heat.Min.X + (2*c+1)*l.heat.Dx()/(2*cols), l.heat.Min.Y + (2*r+1)*l.heat.Dy()/(2*rows)
}

// at is the colour of the middle of cell [r][c].
func at(img *image.RGBA, l heatLayout, rows, cols, r, c int) color.RGBA {
	x, y := cellCentre(l, rows, cols, r, c)
	return img.RGBAAt(x, y)
}

func grid(rows, cols int, f func(r, c int) float64) [][]float64 {
	g := make([][]float64, rows)
	for r := range g {
		g[r] = make([]float64, cols)
		for c := range g[r] {
			g[r][c] = f(r, c)
		}
	}
	return g
}

func labels(n int, f string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(f, i)
	}
	return out
}

func TestHeatmapPixels(t *testing.T) {
	h := Heatmap{
		Title: "writes",
		Cells: grid(6, 8, func(r, c int) float64 {
			switch {
			case r == 2 && c == 5:
				return 10
			case r == 0:
				return 0
			}
			return 3
		}),
		RowLabels: labels(6, "Customer/a-very-long-customer-name-%d"),
		ColLabels: labels(8, "%dm"),
		Unit:      "writes/s",
	}
	img := render(t, "heatmap.png", h.PNG)
	wantSize(t, img, heatmapW, heatmapH)
	l := h.layout(image.Rect(margin, titleArea, heatmapW-legendW, heatmapH-margin))
	if got := at(img, l, 6, 8, 2, 5); got != white {
		t.Errorf("hottest cell is %v, want white", got)
	}
	if got, want := at(img, l, 6, 8, 0, 3), heatColour(0); got != want {
		t.Errorf("zero cell (top row) is %v, want the cold colour %v", got, want)
	}
	if got, want := at(img, l, 6, 8, 4, 1), heatColour(0.3); got != want {
		t.Errorf("cell of 3/10 is %v, want %v", got, want)
	}
	// the bars: row 0 is empty, row 2 the longest; column 5 the tallest
	x, y := cellCentre(l, 6, 8, 2, 0)
	if img.RGBAAt(l.right.Min.X+barLen-2, y) != barColour {
		t.Errorf("row 2's total bar is not full length")
	}
	_, y = cellCentre(l, 6, 8, 0, 0)
	if img.RGBAAt(l.right.Min.X+2, y) == barColour {
		t.Errorf("row 0 has a total bar, but its cells are 0")
	}
	x, _ = cellCentre(l, 6, 8, 0, 5)
	if img.RGBAAt(x, l.bottom.Max.Y-barLen+1) != barColour {
		t.Errorf("column 5's total bar is not full height")
	}
	x, _ = cellCentre(l, 6, 8, 0, 4)
	if img.RGBAAt(x, l.bottom.Max.Y-barLen+1) == barColour {
		t.Errorf("column 4's total bar is full height, want 15/22")
	}
	// a label is drawn left of each row (they are tall enough)
	for r := range 6 {
		_, y := cellCentre(l, 6, 8, r, 0)
		if !hasInk(img, image.Rect(l.panel.Min.X, y-lineH/2, l.heat.Min.X-6, y+lineH/2)) {
			t.Errorf("no label left of row %d", r)
		}
	}
}

// hasInk reports whether r holds a dark pixel.
func hasInk(img *image.RGBA, r image.Rectangle) bool {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if p := img.RGBAAt(x, y); int(p.R)+int(p.G)+int(p.B) < 300 {
				return true
			}
		}
	}
	return false
}

// More rows than pixels: a single hot cell still shows.
func TestHeatmapManyRows(t *testing.T) {
	h := Heatmap{Cells: grid(2000, 3, func(r, c int) float64 { return map[bool]float64{true: 5}[r == 1234 && c == 1] }), Max: 5}
	img := render(t, "many-rows.png", h.PNG)
	l := h.layout(image.Rect(margin, titleArea, heatmapW-legendW, heatmapH-margin))
	x, _ := cellCentre(l, 2000, 3, 0, 1)
	y := l.heat.Min.Y + 1234*l.heat.Dy()/2000
	if got := img.RGBAAt(x, y); got != white {
		t.Errorf("pixel of the hot row is %v, want white", got)
	}
}

func TestSideBySideSameScale(t *testing.T) {
	a := Heatmap{Title: "before", Cells: grid(4, 4, func(r, c int) float64 { return float64(r*4 + c) }), Unit: "writes/s"}
	b := Heatmap{Title: "after", Cells: grid(4, 4, func(r, c int) float64 { return 5 })}
	img := render(t, "side.png", func(buf io.Writer) error { return SideBySide(buf, "same scale", a, b) })
	wantSize(t, img, sideW, heatmapH)
	half := (sideW - legendW - margin) / 2
	la := a.layout(image.Rect(margin, titleArea, margin+half-margin, heatmapH-margin))
	lb := b.layout(image.Rect(margin+half+margin, titleArea, margin+2*half, heatmapH-margin))
	left := at(img, la, 4, 4, 1, 1) // 5
	right := at(img, lb, 4, 4, 2, 3)
	if left != right || left != heatColour(5.0/15) {
		t.Errorf("a cell of 5 is %v on the left and %v on the right, want %v in both", left, right, heatColour(5.0/15))
	}
	if got := at(img, la, 4, 4, 3, 3); got != white {
		t.Errorf("the hottest cell of both (left, 15) is %v, want white", got)
	}
	// a set Max wins over the cells
	b.Max = 30
	img = render(t, "side-max.png", func(buf io.Writer) error { return SideBySide(buf, "max 30", a, b) })
	if got, want := at(img, la, 4, 4, 3, 3), heatColour(0.5); got != want {
		t.Errorf("15 of a set max 30 is %v, want %v", got, want)
	}
}

// Row labels as long as a plan's keys — a shard, a timestamp and an id —
// are drawn whole beside the other heatmap (they were cut at 22
// characters: "(2026-01-01T00:00:00…"); longer ones are cut, and the cells
// keep nearly half of the panel.
func TestSideBySideRowLabelsWhole(t *testing.T) {
	key := `(-7, 2026-01-01T00:00:08.731Z, "ev-000000")`
	h := Heatmap{Cells: grid(2, 60, func(r, c int) float64 { return 1 }), RowLabels: []string{key, key}}
	half := (sideW - legendW - margin) / 2
	panel := image.Rect(margin+half+margin, titleArea, margin+2*half, heatmapH-margin)
	l := h.layout(panel)
	if chars := (l.labelW - 8) / charW; truncate(key, chars) != key {
		t.Errorf("a row label of %d characters is drawn as %q", len(key), truncate(key, chars))
	}
	h.RowLabels = labels(2, strings.Repeat("x", 100)+"%d")
	if l := h.layout(panel); l.heat.Dx() < panel.Dx()*45/100 {
		t.Errorf("labels of 100 characters leave the cells %d of %d pixels", l.heat.Dx(), panel.Dx())
	}
	img := render(t, "side-labels.png", func(buf io.Writer) error {
		return SideBySide(buf, "labels", Heatmap{Cells: h.Cells, RowLabels: []string{key, key}}, h)
	})
	wantSize(t, img, sideW, heatmapH)
}

func TestHeatmapErrors(t *testing.T) {
	for _, tc := range []struct {
		h    Heatmap
		want string
	}{
		{Heatmap{Cells: [][]float64{{1, 2}, {3}}}, "Cells[1] has 1 columns, Cells[0] has 2"},
		{Heatmap{Cells: [][]float64{{1, -2}}}, "Cells[0][1] = -2"},
		{Heatmap{Cells: [][]float64{{math.NaN()}}}, "Cells[0][0] = NaN"},
		{Heatmap{Cells: [][]float64{{1}}, RowLabels: []string{"a", "b"}}, "2 RowLabels for 1 rows"},
		{Heatmap{Cells: [][]float64{{1}}, ColLabels: []string{"a", "b"}}, "2 ColLabels for 1 columns"},
		{Heatmap{Max: -1}, "Max = -1"},
	} {
		if err := tc.h.PNG(&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
	err := SideBySide(&bytes.Buffer{}, "", Heatmap{}, Heatmap{Max: math.Inf(1)})
	if err == nil || !strings.Contains(err.Error(), "SideBySide: b: Max = +Inf") {
		t.Errorf("error %v, want one naming b", err)
	}
}

// An empty heatmap draws; all-zero cells are all cold.
func TestHeatmapEmpty(t *testing.T) {
	render(t, "empty.png", Heatmap{Title: "nothing"}.PNG)
	h := Heatmap{Cells: grid(2, 2, func(int, int) float64 { return 0 })}
	img := render(t, "zero.png", h.PNG)
	l := h.layout(image.Rect(margin, titleArea, heatmapW-legendW, heatmapH-margin))
	if got := at(img, l, 2, 2, 1, 1); got != heatColour(0) {
		t.Errorf("zero cell of an all-zero map is %v, want cold", got)
	}
}

func TestHeatColourScale(t *testing.T) {
	if heatColour(1) != white || heatColour(2) != white {
		t.Errorf("top of the scale is not white")
	}
	if c := heatColour(0); int(c.R)+int(c.G)+int(c.B) > 80 || c.B <= c.R {
		t.Errorf("cold colour %v is not a dark blue", c)
	}
	// brightness grows along the scale
	prev := -1
	for i := 0; i <= 100; i++ {
		c := heatColour(float64(i) / 100)
		lum := 299*int(c.R) + 587*int(c.G) + 114*int(c.B)
		if lum <= prev {
			t.Fatalf("colour at %d%% (%v) is not brighter than at %d%%", i, c, i-1)
		}
		prev = lum
	}
}

func TestLineChart(t *testing.T) {
	var xs, ramp, done []float64
	for s := 0.0; s <= 3600; s += 30 {
		xs = append(xs, s)
		ramp = append(ramp, 500*math.Pow(1.5, math.Floor(s/300)))
		done = append(done, math.Min(500*math.Pow(1.5, math.Floor(s/300)), 8000))
	}
	red := color.RGBA{200, 0, 0, 255}
	lc := LineChart{
		Title: "write rate", XLabel: "time", YLabel: "writes/s", XSeconds: true,
		Series: []Series{{Name: "achieved", X: xs, Y: done, Color: red}, {Name: "ramp (500/50/5)", X: xs, Y: ramp, Dashed: true}},
	}
	img := render(t, "line.png", lc.PNG)
	wantSize(t, img, plotW, plotH)
	// the achieved line runs flat at 8,000 at the end: find it there
	ax := axes{area: image.Rect(84, 50, plotW-24, plotH-64)}
	found := false
	for y := ax.area.Min.Y; y < ax.area.Max.Y; y++ {
		if img.RGBAAt(ax.area.Max.X-30, y) == red {
			found = true
		}
	}
	if !found {
		t.Errorf("no red (achieved) pixel near the right edge")
	}
	if err := (LineChart{Series: []Series{{X: []float64{1}, Y: nil}}}).PNG(&bytes.Buffer{}); err == nil {
		t.Errorf("no error for X and Y of different lengths")
	}
	if err := (LineChart{Series: []Series{{Name: "s", X: []float64{1}, Y: []float64{math.Inf(1)}}}}).PNG(&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), `"s": point 0`) {
		t.Errorf("error %v for an infinite point", err)
	}
}

func TestBarChart(t *testing.T) {
	vals := make([]float64, 32)
	for i := range vals {
		vals[i] = 1000 + float64(i%5)*40
	}
	vals[7] = 0
	bc := BarChart{Title: "rewritten keys per range", XLabel: "key range (start key)", YLabel: "keys", Labels: labels(32, "%02x000000"), Values: vals}
	img := render(t, "bar.png", bc.PNG)
	wantSize(t, img, plotW, plotH)
	area := image.Rect(84, 50, plotW-24, plotH-64)
	slot := float64(area.Dx()) / 32
	column := func(i int) (n int) {
		x := area.Min.X + int((float64(i)+0.5)*slot)
		for y := area.Min.Y; y < area.Max.Y; y++ {
			if img.RGBAAt(x, y) == barColour {
				n++
			}
		}
		return n
	}
	if column(7) != 0 {
		t.Errorf("bar of 0 has %d pixels", column(7))
	}
	if a, b := column(0), column(4); a == 0 || b <= a {
		t.Errorf("bar of 1000 is %d pixels, of 1160 %d: want the second taller", a, b)
	}
	if err := (BarChart{Labels: []string{"a"}}).PNG(&bytes.Buffer{}); err == nil {
		t.Errorf("no error for 1 label and 0 values")
	}
}

func TestFormats(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 950: "950", 1500: "1.5k", 12000: "12k", 100: "100", 3.4e6: "3.4M", 2e9: "2G", 0.25: "0.25", -1500: "-1.5k", 123456: "123k"} {
		if got := Number(v); got != want {
			t.Errorf("Number(%v) = %q, want %q", v, got, want)
		}
	}
	for v, want := range map[float64]string{0: "0s", 45: "45s", 300: "5m", 90: "1m30s", 5400: "1h30m", 3600: "1h", 2*86400 + 6*3600 + 60: "2d6h"} {
		if got := Seconds(v); got != want {
			t.Errorf("Seconds(%v) = %q, want %q", v, got, want)
		}
	}
	if got := truncate("Customer/0123456789", 10); got != "Customer/…" {
		t.Errorf("truncate = %q", got)
	}
	if got := truncate("short", 10); got != "short" {
		t.Errorf("truncate = %q", got)
	}
	if got := niceTicks(0, 10500, niceStep(0, 10500, 4)); fmt.Sprint(got) != "[0 2000 4000 6000 8000 10000]" {
		t.Errorf("niceTicks = %v", got)
	}
	ends := make([]time.Duration, 60)
	for i := range ends {
		ends[i] = time.Duration(i+1) * 500 * time.Second / 60 // 8m20s in 60 columns
	}
	got := TimeColumns(ends, 5)
	want := map[int]string{0: "0s", 14: "2m", 28: "4m", 43: "6m", 57: "8m"}
	for c, s := range got {
		if s != want[c] {
			t.Errorf("TimeColumns: column %d labelled %q, want %q", c, s, want[c])
		}
	}
}

// The before/after of a load: sequential keys draw a white diagonal (one
// hot range at a time) on the left; the same keys shuffled spread evenly,
// with no cell near white, on the right.
func TestSimulatedBeforeAfter(t *testing.T) {
	const n = 40_000
	seq := make([]sim.Write, n)
	names := make([]string, n)
	for i := range seq {
		seq[i] = sim.Write{Key: binary.BigEndian.AppendUint64(nil, uint64(i))}
		names[i] = fmt.Sprintf("Orders/%012d", i)
	}
	perm := rand.New(rand.NewPCG(7, 8)).Perm(n)
	shuf := make([]sim.Write, n)
	for i, j := range perm {
		shuf[i] = seq[j]
	}
	p := sim.SpannerDefaults(3)
	p.Scale = 25 // a million writes
	p.LoadSplitDelay = 20 * time.Second
	heat := func(ws []sim.Write, title string) Heatmap {
		r, err := sim.Simulate(ws, p)
		if err != nil {
			t.Fatal(err)
		}
		g := r.Heat(40, 60)
		h := Heatmap{Title: fmt.Sprintf("%s: %s, %d splits", title, r.Duration, r.Splits), Cells: g.PerSecond(), Unit: "writes/s"}
		for _, w := range g.RowStart {
			h.RowLabels = append(h.RowLabels, names[perm0(ws, w)])
		}
		h.ColLabels = TimeColumns(g.ColEnd, 6)
		return h
	}
	a, b := heat(seq, "sequential keys"), heat(shuf, "shuffled keys")
	img := render(t, "before-after.png", func(buf io.Writer) error { return SideBySide(buf, "writes per key range", a, b) })
	half := (sideW - legendW - margin) / 2
	la := a.layout(image.Rect(margin, titleArea, margin+half-margin, heatmapH-margin))
	lb := b.layout(image.Rect(margin+half+margin, titleArea, margin+2*half, heatmapH-margin))
	hot := func(l heatLayout) (white, bright int) {
		for y := l.heat.Min.Y; y < l.heat.Max.Y; y++ {
			for x := l.heat.Min.X; x < l.heat.Max.X; x++ {
				c := img.RGBAAt(x, y)
				if c.B > 200 && c.G > 200 {
					white++
				}
				if int(c.R)+int(c.G)+int(c.B) > 400 {
					bright++
				}
			}
		}
		return white, bright
	}
	if w, _ := hot(la); w < la.heat.Dx() { // a diagonal at least as long as the map is wide
		t.Errorf("before: %d near-white pixels, want a hot diagonal", w)
	}
	if _, br := hot(lb); br > 0 {
		t.Errorf("after: %d bright pixels, want none", br)
	}
}

// perm0 returns the index into the sequential keys of writes[w]: the keys
// are the big-endian numbers 0..n-1.
func perm0(ws []sim.Write, w int) int { return int(binary.BigEndian.Uint64(ws[w].Key)) }
