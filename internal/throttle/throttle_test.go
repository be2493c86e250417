package throttle

import (
	"context"
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestScheduleProfiles(t *testing.T) {
	ds, err := NewSchedule(ProfileDatastore, 0, 0, 0, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at   time.Duration
		want float64
	}{{0, 500}, {299 * time.Second, 500}, {5 * time.Minute, 750}, {10 * time.Minute, 1125}, {-time.Minute, 500}} {
		if got := ds.Rate(t0.Add(tc.at)); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("datastore at %s: %g, want %g", tc.at, got, tc.want)
		}
	}
	// 500/50/5 reaches about 740,000 ops/s after 90 minutes.
	if got := ds.Rate(t0.Add(90 * time.Minute)); got < 700_000 || got > 800_000 {
		t.Errorf("datastore after 90 min: %g", got)
	}
	gcs, _ := NewSchedule(ProfileGCS, 200, 0, 0, t0)
	if got := gcs.Rate(t0.Add(41 * time.Minute)); got != 800 {
		t.Errorf("gcs base 200 after 41 min = %g, want 800", got)
	}
	none, _ := NewSchedule(ProfileNone, 0, 0, 0, t0)
	if !none.Unlimited() || !math.IsInf(none.Rate(t0), 1) {
		t.Errorf("none is not unlimited")
	}
	for _, bad := range []struct {
		p    string
		b, g float64
		i    time.Duration
	}{{"custom", 0, 2, time.Second}, {"custom", 10, 0.5, time.Second}, {"custom", 10, 2, 0}, {"turbo", 1, 1, 1}} {
		if _, err := NewSchedule(bad.p, bad.b, bad.g, bad.i, t0); err == nil {
			t.Errorf("NewSchedule(%+v) accepted", bad)
		}
	}
}

// fakeClock drives a pacer without sleeping.
type fakeClock struct{ now time.Time }

func (c *fakeClock) install(p *Pacer) {
	p.now = func() time.Time { return c.now }
	p.sleep = func(_ context.Context, d time.Duration) error { c.now = c.now.Add(d); return nil }
}

// TestPacersShareTheBudget runs 8 keys' pacers as fast as they let
// writes through for 60 simulated seconds of a fast ramp (200 ops/s, x1.5
// every 3 s): the total per second stays within the budget and uses it.
func TestPacersShareTheBudget(t *testing.T) {
	s, _ := NewSchedule(ProfileCustom, 200, 1.5, 3*time.Second, t0)
	const keys = 8
	clocks := make([]*fakeClock, keys)
	pacers := make([]*Pacer, keys)
	for i := range pacers {
		// Keys start out of phase, as independent workers do.
		clocks[i] = &fakeClock{now: t0.Add(time.Duration(i) * 50 * time.Millisecond)}
		pacers[i] = NewPacer(s, keys)
		clocks[i].install(pacers[i])
	}
	perSecond := map[int]float64{}
	const batch = 5 // at most a quarter of a key's per-second share (see MaxBatch)
	for k := range keys {
		for clocks[k].now.Before(t0.Add(30 * time.Second)) {
			if _, err := pacers[k].Wait(context.Background(), batch); err != nil {
				t.Fatal(err)
			}
			perSecond[int(clocks[k].now.Sub(t0)/time.Second)] += batch
		}
	}
	for sec := 1; sec < 30; sec++ {
		budget := s.Rate(t0.Add(time.Duration(sec) * time.Second))
		got := perSecond[sec]
		if got > budget*1.15 {
			t.Errorf("second %d: %g ops, budget %g (more than 1.15x)", sec, got, budget)
		}
		if got < budget*0.8 {
			t.Errorf("second %d: %g ops, budget %g (less than 80%% used)", sec, got, budget)
		}
	}
}

func TestPacerLargeRequestAndCancel(t *testing.T) {
	s, _ := NewSchedule(ProfileCustom, 10, 1, time.Hour, t0)
	c := &fakeClock{now: t0}
	p := NewPacer(s, 1)
	c.install(p)
	waited, err := p.Wait(context.Background(), 50) // 5 s of budget
	if err != nil || waited < 4*time.Second {
		t.Errorf("a 50-op request at 10 ops/s waited %s, %v", waited, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p2 := NewPacer(s, 1)
	p2.now = func() time.Time { return t0 }
	if _, err := p2.Wait(ctx, 1000); err == nil {
		t.Errorf("Wait on a cancelled context succeeded")
	}
	if w, _ := NewPacer(Schedule{}, 4).Wait(context.Background(), 1e6); w != 0 {
		t.Errorf("an unlimited pacer waited %s", w)
	}
}

func TestAdaptive(t *testing.T) {
	a := NewAdaptive(0)
	now := t0
	a.now = func() time.Time { return now }
	a.rnd = func() float64 { return 0.5 }
	for range 100 {
		a.Record(true)
	}
	if p := a.RejectProbability(); p != 0 {
		t.Errorf("all accepted: reject probability %g, want 0", p)
	}
	// The store starts refusing: 100 accepted, then 400 refused.
	for range 400 {
		a.Record(false)
	}
	want := (500 - 1.25*100) / 501
	if p := a.RejectProbability(); math.Abs(p-want) > 1e-9 {
		t.Errorf("reject probability %g, want %g", p, want)
	}
	if a.Allow() != (0.5 >= want) {
		t.Errorf("Allow with rnd 0.5 and p %g", want)
	}
	// After the window the history is forgotten.
	now = now.Add(3 * time.Minute)
	if p := a.RejectProbability(); p != 0 {
		t.Errorf("after the window: %g", p)
	}
	// Guard rails: a few early failures reject nothing; nothing refused
	// at all still lets a tenth through.
	for range DefaultMinRequests - 1 {
		a.Record(false)
	}
	if p := a.RejectProbability(); p != 0 {
		t.Errorf("%d requests, all refused: reject probability %g, want 0 below MinRequests", DefaultMinRequests-1, p)
	}
	for range 1000 {
		a.Record(false)
	}
	if p := a.RejectProbability(); p != DefaultMaxReject {
		t.Errorf("everything refused: reject probability %g, want the cap %g", p, DefaultMaxReject)
	}
}

func TestMaxBatch(t *testing.T) {
	s, _ := NewSchedule(ProfileCustom, 200, 2, time.Minute, t0)
	p := NewPacer(s, 8)
	if got := p.MaxBatch(t0, 500); got != 6 {
		t.Errorf("MaxBatch at 200 ops/s over 8 keys = %d, want 6 (a quarter second's share)", got)
	}
	if got := p.MaxBatch(t0.Add(10*time.Minute), 500); got != 500 {
		t.Errorf("MaxBatch later = %d, want the cap 500", got)
	}
	if got := NewPacer(Schedule{}, 8).MaxBatch(t0, 500); got != 500 {
		t.Errorf("unlimited MaxBatch = %d", got)
	}
}

func TestSharedPacer(t *testing.T) {
	r := Ramp{Profile: ProfileCustom, Base: 100, Growth: 2, IntervalSeconds: 60, StartUnixNano: 12345}
	a, err := SharedPacer(r, 3, 8)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := SharedPacer(r, 3, 8); b != a {
		t.Error("a second SharedPacer of the same key is another pacer")
	}
	if c, _ := SharedPacer(r, 4, 8); c == a {
		t.Error("two keys share a pacer")
	}
	r2 := r
	r2.StartUnixNano++
	if d, _ := SharedPacer(r2, 3, 8); d == a {
		t.Error("two ramps share a pacer")
	}
	if got := a.MaxBatch(time.Unix(0, 12345), 500); got != 3 {
		t.Errorf("MaxBatch = %d, want a quarter second of 100/8 ops/s, 3", got)
	}
	if _, err := SharedPacer(Ramp{Profile: "steep"}, 0, 1); err == nil {
		t.Error("SharedPacer of an unknown profile: no error")
	}
	if !(Ramp{}).Off() || !(Ramp{Profile: ProfileNone}).Off() || r.Off() {
		t.Error("Off is wrong")
	}
}
