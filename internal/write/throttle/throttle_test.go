package throttle

import (
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
