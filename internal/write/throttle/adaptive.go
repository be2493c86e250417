package throttle

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Adaptive is the client-side throttle of Google's SRE book ("Handling
// Overload"): over a sliding window it counts requests and accepts, and
// rejects a new request locally with probability
//
//	max(0, (requests − K·accepts) / (requests + 1))
//
// so that an overloaded store is not hammered: while the store accepts
// everything nothing is rejected; when it starts refusing, the client sheds
// the excess itself. Defaults: K = 1.25, a 2-minute window in 10 s buckets
// (as Beam Java's Datastore connector).
//
// Two guard rails, as Envoy's admission control has: nothing is rejected
// while the window holds fewer than MinRequests requests (one early
// failure would otherwise reject half of what follows, and the rejections,
// counted as requests, feed on themselves), and the probability never
// passes MaxReject, so some requests always probe whether the store has
// recovered.
type Adaptive struct {
	K           float64
	Window      time.Duration
	Bucket      time.Duration
	MinRequests float64
	MaxReject   float64

	mu      sync.Mutex
	now     func() time.Time
	rnd     func() float64
	buckets []bucket // ring, oldest first
}

type bucket struct {
	start             time.Time
	requests, accepts float64
}

// NewAdaptive returns a throttle with K (0: 1.25) and the default window.
func NewAdaptive(k float64) *Adaptive {
	if k <= 0 {
		k = 1.25
	}
	return &Adaptive{K: k, Window: 2 * time.Minute, Bucket: 10 * time.Second,
		MinRequests: DefaultMinRequests, MaxReject: DefaultMaxReject, now: time.Now, rnd: rand.Float64}
}

func (a *Adaptive) counts(now time.Time) (req, acc float64) {
	cut := now.Add(-a.Window)
	i := 0
	for i < len(a.buckets) && !a.buckets[i].start.After(cut) {
		i++
	}
	a.buckets = a.buckets[i:]
	for _, b := range a.buckets {
		req += b.requests
		acc += b.accepts
	}
	return req, acc
}

// RejectProbability is the current probability of a local rejection.
func (a *Adaptive) RejectProbability() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	req, acc := a.counts(a.now())
	if req < a.MinRequests {
		return 0
	}
	p := (req - a.K*acc) / (req + 1)
	return max(0, min(p, a.MaxReject))
}

// Guard rails of NewAdaptive.
const (
	DefaultMinRequests = 20
	DefaultMaxReject   = 0.9
)

// Allow decides whether to send a request now. A rejected request counts
// as a request (the SRE formula counts every attempt).
func (a *Adaptive) Allow() bool {
	if a.rnd() < a.RejectProbability() {
		a.record(true, false)
		return false
	}
	return true
}

// Record counts a request sent to the store and whether it was accepted.
func (a *Adaptive) Record(accepted bool) { a.record(true, accepted) }

func (a *Adaptive) record(request, accepted bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	a.counts(now)
	if n := len(a.buckets); n == 0 || now.Sub(a.buckets[n-1].start) >= a.Bucket {
		a.buckets = append(a.buckets, bucket{start: now})
	}
	b := &a.buckets[len(a.buckets)-1]
	if request {
		b.requests++
	}
	if accepted {
		b.accepts++
	}
}

var shared = struct {
	sync.Mutex
	m map[string]*Adaptive
}{m: map[string]*Adaptive{}}

// Shared returns the process's throttle for key (a target, such as a
// database path), creating it with k (0: 1.25) and window (0: 2 minutes)
// on first use: every writer of the process that talks to one store feeds
// and obeys one throttle, as the SRE book's client-side throttle is per
// client process.
func Shared(key string, k float64, window time.Duration) *Adaptive {
	shared.Lock()
	defer shared.Unlock()
	if a, ok := shared.m[key]; ok {
		return a
	}
	a := NewAdaptive(k)
	if window > 0 {
		a.Window = window
		a.Bucket = min(a.Bucket, window/12)
	}
	shared.m[key] = a
	return a
}
