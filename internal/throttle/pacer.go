package throttle

import (
	"context"
	"sync"
	"time"

	"github.com/rekeyio/rekey/internal/retry"
)

// Pacer spends one key's share of a schedule's budget: Rate(t)/Keys ops/s,
// with at most one second of unspent budget saved up. It is safe for
// concurrent use.
type Pacer struct {
	sched Schedule
	keys  int
	now   func() time.Time
	sleep func(context.Context, time.Duration) error

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// NewPacer returns a pacer for one of keys throttle keys.
func NewPacer(s Schedule, keys int) *Pacer {
	if keys < 1 {
		keys = 1
	}
	return &Pacer{sched: s, keys: keys, now: time.Now, sleep: retry.Sleep}
}

// Wait blocks until n operations fit in the budget and spends them. It
// returns how long it waited (throttled time).
func (p *Pacer) Wait(ctx context.Context, n int) (time.Duration, error) {
	if p.sched.Unlimited() || n <= 0 {
		return 0, nil
	}
	var waited time.Duration
	p.mu.Lock()
	defer p.mu.Unlock()
	need := float64(n)
	for {
		now := p.now()
		rate := p.sched.Rate(now) / float64(p.keys)
		if p.last.IsZero() {
			p.last = now
		}
		// Refill, saving at most one second of budget (or the request, if
		// it is larger, so that it can go through at all).
		p.tokens = min(p.tokens+now.Sub(p.last).Seconds()*rate, max(rate, need))
		p.last = now
		if p.tokens >= need {
			p.tokens -= need
			return waited, nil
		}
		d := max(time.Duration((need-p.tokens)/rate*float64(time.Second)), time.Millisecond)
		p.mu.Unlock()
		err := p.sleep(ctx, d)
		p.mu.Lock()
		if err != nil {
			return waited, err
		}
		waited += d
	}
}

// MaxBatch is the largest batch to send at t: a quarter of a second of
// this key's share (at least 1, at most limit). Writes larger than a
// key's per-second share would land in one second as a burst over budget.
func (p *Pacer) MaxBatch(t time.Time, limit int) int {
	if p.sched.Unlimited() {
		return limit
	}
	n := int(p.sched.Rate(t) / float64(p.keys) / 4)
	return max(1, min(n, limit))
}

// Ramp is a ramp-up schedule in plain data (NewSchedule's arguments), for
// pipeline steps to carry to the workers.
type Ramp struct {
	Profile         string  `json:"profile,omitempty"`
	Base            float64 `json:"base,omitempty"`
	Growth          float64 `json:"growth,omitempty"`
	IntervalSeconds float64 `json:"interval_seconds,omitempty"`
	// StartUnixNano is the schedule's start, shared by every worker (set
	// when the pipeline is built).
	StartUnixNano int64 `json:"start_unix_nano,omitempty"`
}

// Off reports whether r sets no ramp-up.
func (r Ramp) Off() bool { return r.Profile == "" || r.Profile == ProfileNone }

// Schedule builds the ramp's schedule.
func (r Ramp) Schedule() (Schedule, error) {
	return NewSchedule(r.Profile, r.Base, r.Growth, time.Duration(r.IntervalSeconds*float64(time.Second)), time.Unix(0, r.StartUnixNano))
}

var pacers = struct {
	sync.Mutex
	m map[pacerKey]*Pacer
}{m: map[pacerKey]*Pacer{}}

type pacerKey struct {
	ramp      Ramp
	key, keys int
}

// SharedPacer returns the process's pacer for throttle key key of keys
// under r, creating it on first use: every commit the key paces spends
// the same share of the budget, whichever step of the process commits it.
func SharedPacer(r Ramp, key, keys int) (*Pacer, error) {
	pacers.Lock()
	defer pacers.Unlock()
	k := pacerKey{r, key, keys}
	if p, ok := pacers.m[k]; ok {
		return p, nil
	}
	s, err := r.Schedule()
	if err != nil {
		return nil, err
	}
	p := NewPacer(s, keys)
	pacers.m[k] = p
	return p, nil
}
