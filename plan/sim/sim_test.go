package sim_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/plan/sim"
)

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// sequential is n writes of keys 0..n-1 in key order.
func sequential(n int) []sim.Write {
	ws := make([]sim.Write, n)
	for i := range ws {
		ws[i] = sim.Write{Key: u64(uint64(i))}
	}
	return ws
}

// shuffled is the same writes in a random order.
func shuffled(ws []sim.Write) []sim.Write {
	out := append([]sim.Write(nil), ws...)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// uniform is n writes of random 64-bit keys (hash-prefixed keys).
func uniform(n int) []sim.Write {
	rng := rand.New(rand.NewPCG(3, 4))
	ws := make([]sim.Write, n)
	for i := range ws {
		ws[i] = sim.Write{Key: u64(rng.Uint64())}
	}
	return ws
}

func simulate(t testing.TB, ws []sim.Write, p sim.Params) sim.Result {
	t.Helper()
	r, err := sim.Simulate(ws, p)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Finished {
		t.Fatalf("load did not finish in %v", r.Duration)
	}
	return r
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// Sequential keys go to one split and one node at the split's rate.
func TestSequentialKeysPinOneSplit(t *testing.T) {
	r := simulate(t, sequential(100_000), sim.SpannerDefaults(3))
	if r.Splits != 1 {
		t.Errorf("splits = %d, want 1 (no load split within the 5m delay)", r.Splits)
	}
	if !near(r.BusiestNodeShare, 1, 0.001) || !near(r.HotspotScore, 3, 0.01) {
		t.Errorf("busiest share %.3f, hotspot %.3f; want 1 and 3", r.BusiestNodeShare, r.HotspotScore)
	}
	if r.Duration != 50*time.Second { // 100,000 at 2,000/s
		t.Errorf("duration %v, want 50s", r.Duration)
	}
}

// Load splits do not help sequential keys: the new last split is the next
// hotspot, so every moment still has one busy node; shuffled, the same keys
// split and spread over the nodes and finish several times faster.
func TestLoadSplitsHelpShuffledNotSequential(t *testing.T) {
	p := sim.SpannerDefaults(3)
	p.LoadSplitDelay = 5 * time.Second
	p.Scale = 10
	seq := sequential(100_000)
	before := simulate(t, seq, p)
	after := simulate(t, shuffled(seq), p)
	t.Logf("sequential: %v, %d splits, share %.2f, score %.2f", before.Duration, before.Splits, before.BusiestNodeShare, before.HotspotScore)
	t.Logf("shuffled:   %v, %d splits, share %.2f, score %.2f", after.Duration, after.Splits, after.BusiestNodeShare, after.HotspotScore)

	if before.Splits < 10 {
		t.Errorf("sequential: %d splits, want load splits every 5s", before.Splits)
	}
	// Series buckets of two steps straddle a move of the hotspot now and
	// then; the others are all on one node.
	if before.HotspotScore < 2.5 {
		t.Errorf("sequential: hotspot score %.2f, want ≈ 3 (one node at a time)", before.HotspotScore)
	}
	// The busiest node's share is per moment: a hotspot moving from node
	// to node holds nearly every moment's writes, however evenly the
	// run's writes end up over the nodes (that share read 36% before and
	// 40% after, as if the rewrite made things worse).
	if before.BusiestNodeShare < 0.8 || before.BusiestNodeShare <= after.BusiestNodeShare || before.BusiestNodeOfRun > 0.5 {
		t.Errorf("sequential: busiest node's share %.2f per moment, %.2f of the run; shuffled %.2f: want ≈ 1, ≈ 1/3 and below the first",
			before.BusiestNodeShare, before.BusiestNodeOfRun, after.BusiestNodeShare)
	}
	if !near(before.HotspotScore, 3*before.BusiestNodeShare, 1e-9) {
		t.Errorf("hotspot score %.3f, busiest share %.3f: want the score 3× the share", before.HotspotScore, before.BusiestNodeShare)
	}
	if n := onOneNode(before.Series); n < len(before.Series)*3/4 {
		t.Errorf("sequential: %d of %d buckets on one node, want most", n, len(before.Series))
	}
	if d := before.Duration; d < 495*time.Second || d > 505*time.Second {
		t.Errorf("sequential: %v, want ≈ 500s (1,000,000 writes at one split's 2,000/s)", d)
	}
	if after.BusiestNodeShare > 0.4 || after.HotspotScore > 1.2 {
		t.Errorf("shuffled: busiest share %.2f, hotspot %.2f; want ≈ 1/3 and ≈ 1", after.BusiestNodeShare, after.HotspotScore)
	}
	if ratio := before.Duration.Seconds() / after.Duration.Seconds(); ratio < 4 {
		t.Errorf("shuffled is %.1f× faster, want several times (≥ 4)", ratio)
	}
}

// onOneNode counts the buckets in which one node took 99% of the writes.
func onOneNode(ts []sim.Tick) int {
	n := 0
	for _, tk := range ts {
		if slices.Max(tk.PerNode) >= 0.99*tk.Done {
			n++
		}
	}
	return n
}

// Pre-split points let a uniform load use every node from the start.
func TestPreSplitReachesFullSpeedSooner(t *testing.T) {
	ws := uniform(100_000)
	p := sim.SpannerDefaults(3)
	p.Scale = 100 // 10,000,000 writes
	loadSplit := simulate(t, ws, p)
	p.PreSplits = sim.EvenSplits(30) // 10 per node
	preSplit := simulate(t, ws, p)
	t.Logf("load splits: %v to full speed, done in %v, %d splits", loadSplit.TimeToFullSpeed, loadSplit.Duration, loadSplit.Splits)
	t.Logf("pre-split:   %v to full speed, done in %v, %d splits", preSplit.TimeToFullSpeed, preSplit.Duration, preSplit.Splits)

	if !preSplit.ReachedFullSpeed || preSplit.TimeToFullSpeed > 5*time.Second {
		t.Errorf("pre-split: full speed after %v (reached %v), want within seconds", preSplit.TimeToFullSpeed, preSplit.ReachedFullSpeed)
	}
	if !loadSplit.ReachedFullSpeed || loadSplit.TimeToFullSpeed < 10*time.Minute {
		t.Errorf("load splits: full speed after %v (reached %v), want after several 5m load splits", loadSplit.TimeToFullSpeed, loadSplit.ReachedFullSpeed)
	}
	if loadSplit.Duration < preSplit.Duration+5*time.Minute {
		t.Errorf("load splits %v vs pre-split %v: want the pre-split load minutes sooner", loadSplit.Duration, preSplit.Duration)
	}
	// full speed is 3 × 3,500 writes/s
	if want := 10_000_000 / 10_500.0; preSplit.Duration.Seconds() > want*1.1 {
		t.Errorf("pre-split: %v, want ≈ %.0fs", preSplit.Duration, want)
	}
}

func TestScaleMultipliesTime(t *testing.T) {
	ws := sequential(20_000)
	p := sim.SpannerDefaults(3)
	p.NoLoadSplits = true
	one := simulate(t, ws, p)
	p.Scale = 4
	four := simulate(t, ws, p)
	if one.Duration != 10*time.Second || four.Duration != 40*time.Second {
		t.Errorf("durations %v and %v, want 10s and 40s", one.Duration, four.Duration)
	}
	if one.Writes != 20_000 || four.Writes != 80_000 {
		t.Errorf("writes %d and %d, want 20000 and 80000", one.Writes, four.Writes)
	}
	// a fractional scale: each sampled write is taken in parts
	p.Scale = 2.5
	if r := simulate(t, ws, p); r.Duration != 25*time.Second {
		t.Errorf("scale 2.5: %v, want 25s", r.Duration)
	}
}

func TestHeatRowsInKeyOrderSumToWrites(t *testing.T) {
	seq := sequential(10_000)
	p := sim.SpannerDefaults(3)
	p.Scale = 3
	for _, ws := range [][]sim.Write{seq, shuffled(seq), uniform(10_000)} {
		r := simulate(t, ws, p)
		g := r.Heat(20, 15)
		if len(g.Cells) != 20 || len(g.Cells[0]) != 15 || len(g.ColEnd) != 15 {
			t.Fatalf("grid %d×%d, %d column ends; want 20×15", len(g.Cells), len(g.Cells[0]), len(g.ColEnd))
		}
		sum := 0.0
		for i, row := range g.Cells {
			if i > 0 && bytes.Compare(ws[g.RowStart[i-1]].Key, ws[g.RowStart[i]].Key) >= 0 {
				t.Errorf("row %d starts at key %x, not above row %d's %x", i, ws[g.RowStart[i]].Key, i-1, ws[g.RowStart[i-1]].Key)
			}
			for _, v := range row {
				sum += v
			}
		}
		if sum != float64(r.Writes) {
			t.Errorf("cells sum to %v, want %d", sum, r.Writes)
		}
		if g.ColEnd[14] != r.Duration {
			t.Errorf("last column ends at %v, want the duration %v", g.ColEnd[14], r.Duration)
		}
	}
}

// Sequential keys draw a diagonal: row i (of n equal key ranges) is
// written in time bucket i.
func TestHeatSequentialIsDiagonal(t *testing.T) {
	r := simulate(t, sequential(100_000), sim.SpannerDefaults(3)) // 50 steps
	g := r.Heat(10, 10)
	for i, row := range g.Cells {
		for c, v := range row {
			if want := map[bool]float64{true: 10_000, false: 0}[c == i]; v != want {
				t.Errorf("cell [%d][%d] = %v, want %v", i, c, v, want)
			}
		}
	}
	rates := g.PerSecond()
	if rates[3][3] != 2000 {
		t.Errorf("rate of the hot cell %v, want 2000 writes/s", rates[3][3])
	}
}

func TestSizeSplits(t *testing.T) {
	p := sim.SpannerDefaults(3)
	p.NoLoadSplits = true
	p.SplitBytes = 10 << 20        // 100,000 × 1 KiB = ~98 MiB of data
	p.Step = 10 * time.Millisecond // 20 KiB a step: the splits do not overshoot
	seq := sequential(100_000)
	// sequential: the last split fills to 10 MiB and leaves 5 MiB behind
	if r := simulate(t, seq, p); r.Splits < 18 || r.Splits > 20 {
		t.Errorf("sequential: %d splits, want ≈ 98/5", r.Splits)
	}
	// uniform: every split fills to 10 MiB and halves
	if r := simulate(t, shuffled(seq), p); r.Splits < 9 || r.Splits > 20 {
		t.Errorf("shuffled: %d splits, want between 98/10 and 98/5", r.Splits)
	}
	// rows of 10 KiB fill splits ten times as fast
	big := sequential(10_000)
	for i := range big {
		big[i].Bytes = 10 << 10
	}
	if r := simulate(t, big, p); r.Splits < 18 || r.Splits > 20 {
		t.Errorf("10 KiB rows: %d splits, want ≈ 98/5", r.Splits)
	}
	// a step writing far more than SplitBytes is cut until the pieces fit
	p.Step = time.Second
	p.SplitBytes = 1 << 20
	if r := simulate(t, shuffled(seq), p); r.Splits < 98 || r.Splits > 196 {
		t.Errorf("1 MiB splits: %d, want between 98 and 196", r.Splits)
	}
}

// One hot key cannot be split, by load or by size.
func TestOneKeyIsOneSplit(t *testing.T) {
	ws := make([]sim.Write, 10_000)
	for i := range ws {
		ws[i] = sim.Write{Key: []byte("hot")}
	}
	p := sim.SpannerDefaults(3)
	p.LoadSplitDelay = time.Second
	p.SplitBytes = 1 << 20
	r := simulate(t, ws, p)
	if r.Splits != 1 || r.Duration != 5*time.Second {
		t.Errorf("%d splits in %v, want 1 split in 5s", r.Splits, r.Duration)
	}
}

// A write waiting on a hot split holds the loader back once Concurrency
// writes wait: a stream of 1 hot write in 4 runs at 4 × the split's rate.
func TestHeadOfLineBlocking(t *testing.T) {
	var ws []sim.Write
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 40_000 {
		if i%4 == 0 {
			ws = append(ws, sim.Write{Key: []byte{0}}) // all in the first split
		} else {
			ws = append(ws, sim.Write{Key: u64(rng.Uint64()/12*11 + math.MaxUint64/12 + 1)})
		}
	}
	// the hot key in split 0 on node 0; the others spread over 11 splits
	p := sim.SpannerDefaults(4)
	p.NoLoadSplits = true
	p.PreSplits = sim.EvenSplits(12)
	r := simulate(t, ws, p)
	// 10,000 hot writes at 2,000/s: 5s; the other 30,000 are held to the same pace
	if r.Duration != 5*time.Second {
		t.Errorf("duration %v, want 5s", r.Duration)
	}
	for _, tk := range r.Series[1:4] { // the first step also fills the window
		if !near(tk.Done, 8000, 100) {
			t.Errorf("at %v: %v writes/s, want 8000 (4 × 2000)", tk.At, tk.Done)
		}
	}
}

func TestFirestoreRamp(t *testing.T) {
	p := sim.FirestoreDefaults()
	p.Scale = 100
	// a monotonic key stays at one key range's 500 writes/s
	seq := simulate(t, sequential(3_000), p)
	if seq.Duration != 600*time.Second {
		t.Errorf("sequential: %v, want 600s (300,000 at 500/s)", seq.Duration)
	}
	// uniform keys follow the 500/50/5 ramp
	p.Scale = 10
	r := simulate(t, uniform(300_000), p) // 3,000,000 writes
	for _, tk := range r.Series[:len(r.Series)-1] {
		if tk.Done < 0.95*tk.Offered {
			t.Errorf("at %v: %.0f writes/s of %.0f offered", tk.At, tk.Done, tk.Offered)
		}
	}
	if got := sim.FirestoreRamp(12 * time.Minute); got != 500*1.5*1.5 {
		t.Errorf("ramp at 12m = %v, want 1125", got)
	}
	t.Logf("uniform: %v, %d splits", r.Duration, r.Splits)
}

func TestSeriesIsBounded(t *testing.T) {
	p := sim.SpannerDefaults(3)
	r := simulate(t, sequential(2_000_000), p) // 1,000 steps
	if n := len(r.Series); n < sim.MaxSeries/2 || n > sim.MaxSeries {
		t.Errorf("%d buckets, want %d..%d", n, sim.MaxSeries/2, sim.MaxSeries)
	}
	var end time.Duration
	for _, tk := range r.Series {
		if tk.At != end {
			t.Fatalf("bucket at %v, want %v", tk.At, end)
		}
		end += tk.Width
	}
	if end != r.Duration {
		t.Errorf("buckets end at %v, want %v", end, r.Duration)
	}
}

func TestUnfinished(t *testing.T) {
	p := sim.SpannerDefaults(3)
	p.MaxDuration = 10 * time.Second
	r, err := sim.Simulate(sequential(100_000), p)
	if err != nil {
		t.Fatal(err)
	}
	if r.Finished || r.Duration != 10*time.Second {
		t.Errorf("finished %v in %v, want unfinished at 10s", r.Finished, r.Duration)
	}
	sum := 0.0
	for _, row := range r.Heat(5, 5).Cells {
		for _, v := range row {
			sum += v
		}
	}
	if sum != 20_000 {
		t.Errorf("heat holds %v writes, want the 20,000 done", sum)
	}
}

func TestParamsErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*sim.Params)
		ws   []sim.Write
		want string
	}{
		{"negative nodes", func(p *sim.Params) { p.Nodes = -1 }, nil, "Params.Nodes = -1"},
		{"NaN scale", func(p *sim.Params) { p.Scale = math.NaN() }, nil, "Params.Scale = NaN"},
		{"negative step", func(p *sim.Params) { p.Step = -time.Second }, nil, "Params.Step"},
		{"threshold above capacity", func(p *sim.Params) { p.LoadThreshold = 3000 }, nil, "LoadThreshold = 3000 writes/s is above SplitWrites = 2000"},
		{"short max", func(p *sim.Params) { p.MaxDuration = time.Millisecond }, nil, "shorter than one Step"},
		{"too many steps", func(p *sim.Params) { p.Step = time.Nanosecond; p.MaxDuration = 10 * time.Second }, nil, "take a longer Step"},
		{"both presplits", func(p *sim.Params) { p.PreSplits = [][]byte{{1}}; p.InitialSplits = 4 }, nil, "both set"},
		{"empty presplit", func(p *sim.Params) { p.PreSplits = [][]byte{{}} }, nil, "PreSplits[0] is empty"},
		{"unsorted presplits", func(p *sim.Params) { p.PreSplits = [][]byte{{2}, {1}} }, nil, "PreSplits[1] = 01 is not above PreSplits[0] = 02"},
		{"negative bytes", func(*sim.Params) {}, []sim.Write{{}, {Bytes: -5}}, "writes[1].Bytes = -5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := sim.SpannerDefaults(3)
			tc.edit(&p)
			_, err := sim.Simulate(tc.ws, p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestDefaultsFilled(t *testing.T) {
	r, err := sim.Simulate(nil, sim.Params{})
	if err != nil {
		t.Fatal(err)
	}
	p := r.Params
	if p.Nodes != 3 || p.NodeWrites != 3500 || p.SplitWrites != 2000 || p.LoadThreshold != 1000 ||
		p.SplitBytes != 8<<30 || p.LoadSplitDelay != 5*time.Minute || p.Scale != 1 || p.Step != time.Second ||
		p.RowBytes != 1024 || p.Concurrency != 64 || p.MaxDuration != 30*24*time.Hour {
		t.Errorf("defaults %+v", p)
	}
	if !r.Finished || r.Duration != 0 || r.Splits != 1 {
		t.Errorf("empty load: %+v", r)
	}
}

func TestInitialSplits(t *testing.T) {
	p := sim.SpannerDefaults(3)
	p.InitialSplits = 6
	r := simulate(t, uniform(60_000), p)
	// 6 splits round-robin on 3 nodes: full speed from the start
	if r.Splits != 6 || r.Duration > 7*time.Second || r.BusiestNodeShare > 0.36 {
		t.Errorf("%d splits, %v, busiest share %.2f; want 6, ≈ 6s, ≈ 1/3", r.Splits, r.Duration, r.BusiestNodeShare)
	}
	if got := sim.EvenSplits(4); !bytes.Equal(got[1], u64(1<<63)) || len(got) != 3 {
		t.Errorf("EvenSplits(4) = %x", got)
	}
}

// BenchmarkSimulate1M is a 1,000,000-key sample of a billion-row table,
// hash-spread (~1 day simulated) and sequential (~6 days, 500,000 steps).
func BenchmarkSimulate1M(b *testing.B) {
	for _, bc := range []struct {
		name string
		ws   []sim.Write
	}{{"uniform", uniform(1_000_000)}, {"sequential", sequential(1_000_000)}} {
		b.Run(bc.name, func(b *testing.B) {
			p := sim.SpannerDefaults(3)
			p.Scale = 1000
			for b.Loop() {
				if _, err := sim.Simulate(bc.ws, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
