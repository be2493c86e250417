package throttle

import (
	"container/heap"
	"context"
	"math"
	"sync"
	"testing"
	"time"
)

// memLease is a Lease in memory, as the stores keep it.
type memLease struct {
	mu    sync.Mutex
	start map[string]time.Time
	seen  map[string]map[string]time.Time
	beats int
	// rtt, if set, is how long each call takes, slept on v's clock after
	// its reads and writes (a store's round trips on a loaded machine).
	rtt time.Duration
	v   *virtual
}

func (l *memLease) trip() {
	if l.rtt > 0 {
		_ = l.v.Sleep(context.Background(), l.rtt)
	}
}

func (l *memLease) Restart(_ context.Context, run string, from, to time.Time) (time.Time, error) {
	defer l.trip()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.start[run].Equal(from) {
		l.start[run] = to
	}
	return l.start[run], nil
}

func newMemLease() *memLease {
	return &memLease{start: map[string]time.Time{}, seen: map[string]map[string]time.Time{}}
}

func (l *memLease) Beat(_ context.Context, run, proc string, now time.Time, ttl time.Duration) (Beat, error) {
	defer l.trip()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.beats++
	var b Beat
	b.Start, b.Started = l.start[run], false
	if b.Start.IsZero() {
		b.Start, b.Started = now, true
		l.start[run] = now
	}
	if l.seen[run] == nil {
		l.seen[run] = map[string]time.Time{}
	}
	for p, at := range l.seen[run] {
		live := now.Sub(at) < ttl
		if p == proc {
			b.WasLive = live
		} else if live {
			b.Live++
		}
	}
	b.Live++
	l.seen[run][proc] = now
	return b, nil
}

// virtual runs goroutines on a simulated clock: time moves to the
// earliest wake-up once every goroutine sleeps.
type virtual struct {
	mu      sync.Mutex
	now     time.Time
	running int
	wakes   wakeHeap
}

type wake struct {
	at time.Time
	ch chan struct{}
}
type wakeHeap []wake

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h wakeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *wakeHeap) Push(x any)        { *h = append(*h, x.(wake)) }
func (h *wakeHeap) Pop() any          { old := *h; x := old[len(old)-1]; *h = old[:len(old)-1]; return x }

func (v *virtual) Now() time.Time { v.mu.Lock(); defer v.mu.Unlock(); return v.now }

// advance wakes the earliest sleeper when nobody runs (v.mu held).
func (v *virtual) advance() {
	if v.running == 0 && v.wakes.Len() > 0 {
		w := heap.Pop(&v.wakes).(wake)
		if w.at.After(v.now) {
			v.now = w.at
		}
		v.running++
		close(w.ch)
	}
}

func (v *virtual) Sleep(_ context.Context, d time.Duration) error {
	v.mu.Lock()
	ch := make(chan struct{})
	heap.Push(&v.wakes, wake{v.now.Add(d), ch})
	v.running--
	v.advance()
	v.mu.Unlock()
	<-ch
	return nil
}

// Go runs f as a simulated goroutine.
func (v *virtual) Go(wg *sync.WaitGroup, f func()) {
	v.mu.Lock()
	v.running++
	v.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		f()
		v.mu.Lock()
		v.running--
		v.advance()
		v.mu.Unlock()
	}()
}

func (v *virtual) pacer(s Schedule, proc string) *Pacer {
	p := NewPacer(s, proc)
	p.ramp.Run = "run-1"
	p.now, p.sleep = v.Now, v.Sleep
	return p
}

// writer spends batches of p's Size as fast as p lets it from from to
// until, adding each commit's operations to its second (from t0).
func writer(v *virtual, p *Pacer, l Lease, from, until time.Time, mu *sync.Mutex, bins map[int]float64) func() {
	return func() {
		if d := from.Sub(v.Now()); d > 0 {
			_ = v.Sleep(context.Background(), d)
		}
		b := p.With(l)
		for v.Now().Before(until) {
			n := b.Size(500)
			if _, err := b.Wait(context.Background(), n); err != nil {
				panic(err)
			}
			now := v.Now()
			if !now.Before(until) {
				return
			}
			mu.Lock()
			bins[int(now.Sub(t0)/time.Second)] += float64(n)
			mu.Unlock()
		}
	}
}

// TestPacerOneProcess: one process writing as fast as its pacer lets it,
// from the run's first commit, stays within 1.15x of every second's budget
// and uses at least 80% of it; the first commit starts the schedule.
func TestPacerOneProcess(t *testing.T) {
	s, _ := NewSchedule(ProfileCustom, 200, 1.5, 3*time.Second, time.Time{})
	v := &virtual{now: t0}
	l := newMemLease()
	var mu sync.Mutex
	bins := map[int]float64{}
	var wg sync.WaitGroup
	p := v.pacer(s, "a")
	// Four committers share the process's pacer, as a sink's goroutines do.
	for range 4 {
		v.Go(&wg, writer(v, p, l, t0, t0.Add(30*time.Second), &mu, bins))
	}
	wg.Wait()
	if got := l.start["run-1"]; !got.Equal(t0) {
		t.Fatalf("the run's start is %s, want the first commit's time %s", got, t0)
	}
	want, _ := NewSchedule(ProfileCustom, 200, 1.5, 3*time.Second, t0)
	for sec := range 30 {
		budget := want.Budget(t0.Add(time.Duration(sec)*time.Second), t0.Add(time.Duration(sec+1)*time.Second))
		if got := bins[sec]; got > 1.15*budget || got < 0.8*budget {
			t.Errorf("second %d: %g ops, budget %g (want 0.8x to 1.15x)", sec, got, budget)
		}
	}
	if l.beats < 30/5 || l.beats > 30/5+2 {
		t.Errorf("%d beats in 30 s, want one per %s", l.beats, BeatPeriod)
	}
}

// TestPacerSlowFirstBeat: when the lease's round trips take 2 s each (a
// loaded store), the beat that starts the run returns long after the
// start it set, and the first commit goes later still. Measured from the
// first commit, as the store sees it, every second stays within 1.15x of
// the budget: the first writer moved the start (Pacer.anchor). Without
// the move the first commits go at the second step's rate (1.5x).
func TestPacerSlowFirstBeat(t *testing.T) {
	s, _ := NewSchedule(ProfileCustom, 200, 1.5, 3*time.Second, time.Time{})
	v := &virtual{now: t0}
	l := newMemLease()
	l.rtt, l.v = 2*time.Second, v
	var mu sync.Mutex
	var commits []time.Time
	var wg sync.WaitGroup
	p := v.pacer(s, "a")
	var ops []int
	// One committer: the simulated clock cannot see a goroutine blocked on
	// the pacer's mutex, which a beat holds through its round trips.
	for range 1 {
		v.Go(&wg, func() {
			b := p.With(l)
			for v.Now().Before(t0.Add(40 * time.Second)) {
				n := b.Size(500)
				if _, err := b.Wait(context.Background(), n); err != nil {
					panic(err)
				}
				mu.Lock()
				commits, ops = append(commits, v.Now()), append(ops, n)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	first := commits[0]
	for _, c := range commits {
		if c.Before(first) {
			first = c
		}
	}
	if first.Sub(t0) < 2*time.Second {
		t.Fatalf("the first commit went at +%s, before the starting beat returned", first.Sub(t0))
	}
	bins := map[int]float64{}
	for i, c := range commits {
		bins[int(c.Sub(first)/time.Second)] += float64(ops[i])
	}
	want, _ := NewSchedule(ProfileCustom, 200, 1.5, 3*time.Second, first)
	for sec := range 30 {
		budget := want.Budget(first.Add(time.Duration(sec)*time.Second), first.Add(time.Duration(sec+1)*time.Second))
		if got := bins[sec]; got > 1.15*budget {
			t.Errorf("second %d after the first commit (+%s): %g ops, budget %g (more than 1.15x)", sec, first.Sub(t0), got, budget)
		}
	}
	if got := l.start["run-1"]; got.Before(first) || got.Sub(first) > 3*time.Second {
		t.Errorf("the run's start is +%s, the first commit +%s; want the start at or a little after it", got.Sub(t0), first.Sub(t0))
	}
}

// TestPacerProcessesShareTheBudget: process b joins a run a writes at
// 10 s, and a stops at 40 s. The sum stays within the budget throughout
// (b holds its first commit until a has counted it); both share it while
// both write; once a's lease lapses b takes all of it.
func TestPacerProcessesShareTheBudget(t *testing.T) {
	s, _ := NewSchedule(ProfileCustom, 1000, 1, time.Hour, time.Time{}) // a flat 1,000 ops/s
	v := &virtual{now: t0}
	l := newMemLease()
	var mu sync.Mutex
	a, b := map[int]float64{}, map[int]float64{}
	var wg sync.WaitGroup
	pa, pb := v.pacer(s, "a"), v.pacer(s, "b")
	v.Go(&wg, writer(v, pa, l, t0, t0.Add(40*time.Second), &mu, a))
	v.Go(&wg, writer(v, pb, l, t0.Add(10*time.Second), t0.Add(80*time.Second), &mu, b))
	wg.Wait()
	for sec := range 80 {
		sum := a[sec] + b[sec]
		if sum > 1.15*1000 {
			t.Errorf("second %d: %g ops (a %g, b %g), budget 1000", sec, sum, a[sec], b[sec])
		}
		switch {
		case sec >= 10 && sec < 10+int(JoinHold/time.Second):
			if b[sec] != 0 {
				t.Errorf("second %d: b wrote %g during its join hold", sec, b[sec])
			}
		case sec >= 25 && sec < 40: // both writing, both counting two
			if b[sec] < 400 || a[sec] < 400 {
				t.Errorf("second %d: a %g, b %g; want about half of 1000 each", sec, a[sec], b[sec])
			}
		case sec >= 40+int((LeaseTTL+BeatPeriod)/time.Second):
			if b[sec] < 800 {
				t.Errorf("second %d: b alone wrote %g, want at least 800 once a's lease lapsed", sec, b[sec])
			}
		}
	}
}

func TestPacerLargeRequestAndCancel(t *testing.T) {
	s, _ := NewSchedule(ProfileCustom, 10, 1, time.Hour, time.Time{})
	v := &virtual{now: t0, running: 1}
	p := v.pacer(s, "a")
	l := newMemLease()
	waited, err := p.With(l).Wait(context.Background(), 50) // 5 s of budget
	if err != nil || waited < 4*time.Second {
		t.Errorf("a 50-op request at 10 ops/s waited %s, %v", waited, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p2 := NewPacer(s, "b")
	p2.ramp.Run = "run-2"
	p2.now = func() time.Time { return t0 }
	if _, err := p2.With(l).Wait(ctx, 1000); err == nil {
		t.Errorf("Wait on a cancelled context succeeded")
	}
	if w, _ := NewPacer(Schedule{}, "c").With(l).Wait(context.Background(), 1e6); w != 0 {
		t.Errorf("an unlimited pacer waited %s", w)
	}
}

func TestPacerSize(t *testing.T) {
	s, _ := NewSchedule(ProfileCustom, 200, 2, time.Minute, time.Time{})
	v := &virtual{now: t0, running: 1}
	l := newMemLease()
	p := v.pacer(s, "a").With(l)
	if got := p.Size(500); got != 25 {
		t.Errorf("Size at 200 ops/s = %d, want 25 (an eighth of a second)", got)
	}
	_, _ = l.Beat(context.Background(), "run-1", "other", t0, LeaseTTL)
	if _, err := p.Wait(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if got := p.Size(500); got != 12 {
		t.Errorf("Size at 200 ops/s shared by 2 processes = %d, want 12", got)
	}
	v.now = v.now.Add(10 * time.Minute)
	if got := p.Size(500); got != 500 {
		t.Errorf("Size later = %d, want the cap 500", got)
	}
	if got := NewPacer(Schedule{}, "x").With(l).Size(500); got != 500 {
		t.Errorf("unlimited Size = %d", got)
	}
}

func TestSharedPacer(t *testing.T) {
	r := Ramp{Profile: ProfileCustom, Base: 100, Growth: 2, IntervalSeconds: 60, Run: "r1"}
	a, err := SharedPacer(r)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := SharedPacer(r); b != a {
		t.Error("a second SharedPacer of the same run is another pacer")
	}
	r2 := r
	r2.Run = "r2"
	if d, _ := SharedPacer(r2); d == a {
		t.Error("two runs share a pacer")
	}
	if _, err := SharedPacer(Ramp{Profile: "steep", Run: "x"}); err == nil {
		t.Error("SharedPacer of an unknown profile: no error")
	}
	if _, err := SharedPacer(Ramp{Profile: ProfileCustom, Base: 1, Growth: 1, IntervalSeconds: 1}); err == nil {
		t.Error("SharedPacer of a ramp with no run: no error")
	}
	if !(Ramp{}).Off() || !(Ramp{Profile: ProfileNone}).Off() || r.Off() {
		t.Error("Off is wrong")
	}
}

func TestScheduleBudget(t *testing.T) {
	s, _ := NewSchedule(ProfileCustom, 100, 2, 10*time.Second, t0)
	for _, tc := range []struct {
		from, to time.Duration
		want     float64
	}{
		{0, 10 * time.Second, 1000},
		{5 * time.Second, 15 * time.Second, 500 + 1000},
		{0, 30 * time.Second, 1000 + 2000 + 4000},
		{-5 * time.Second, 1 * time.Second, 600}, // before the start: the base rate
		{3 * time.Second, 3 * time.Second, 0},
	} {
		if got := s.Budget(t0.Add(tc.from), t0.Add(tc.to)); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("Budget(%s, %s) = %g, want %g", tc.from, tc.to, got, tc.want)
		}
	}
	if !math.IsInf((Schedule{}).Budget(t0, t0.Add(time.Second)), 1) {
		t.Error("an unlimited schedule's budget is finite")
	}
}
