package throttle

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/rekeyio/rekey/internal/write/retry"
)

// Slice is how much of a second of budget one commit may carry and the
// most a pacer saves up while no commit waits: over any second, a
// process's commits carry at most (1 + Slice) times that second's budget.
const Slice = 1.0 / 8

// Default lease timing (see the package doc, "One ramp for the whole
// job"): a process beats every BeatPeriod, counts as writing for
// LeaseTTL after its last beat, and a process joining a run that already
// writes holds its first commit for JoinHold.
const (
	BeatPeriod = 5 * time.Second
	LeaseTTL   = 3 * BeatPeriod
	JoinHold   = 2 * BeatPeriod
)

// Beat is what a Lease answers to one process's heartbeat.
type Beat struct {
	// Start is the run's ramp-up start: the time of its first beat.
	Start time.Time
	// Started reports that this beat set Start (the process is the run's
	// first writer).
	Started bool
	// WasLive reports that the process's previous beat was within the TTL
	// (false on its first beat, or after it lapsed).
	WasLive bool
	// Live is how many processes write the run's data now, the caller
	// included (beaten within the TTL).
	Live int
}

// Lease is the store-side state of a run's ramp-up, kept next to the
// target (spannerdb.RampLease, datastoredb.RampLease).
type Lease interface {
	// Beat records that process proc writes run's data at now. It reads
	// the run's state first — its start, and the processes whose last
	// beat is within ttl of now — then sets the start to now if the run
	// has none (atomically: of two first beats, one sets it and the other
	// reads it), then records proc's beat.
	Beat(ctx context.Context, run, proc string, now time.Time, ttl time.Duration) (Beat, error)
	// Restart moves run's start from from to to, if it is still from
	// (atomically), and returns the start in force after the call.
	Restart(ctx context.Context, run string, from, to time.Time) (time.Time, error)
}

// Process is this process's name in leases: the host and a random
// suffix, so two workers on one host differ.
var Process = func() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s-%d-%s", h, os.Getpid(), uuid.NewString()[:8])
}()

// Pacer spends one process's share of a run's ramp-up budget: the
// schedule from the run's start (Lease), divided by the number of
// processes writing the run's data. It is shared by every commit of the
// process (SharedPacer) and safe for concurrent use. Each caller passes
// its own Lease (With), so no store client outlives its owner.
type Pacer struct {
	ramp  Ramp
	sched Schedule
	proc  string
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
	// period, ttl and hold are the lease timing (BeatPeriod, LeaseTTL,
	// JoinHold).
	period, ttl, hold time.Duration
	policy            retry.Policy

	mu       sync.Mutex
	joined   bool
	live     int
	lastBeat time.Time
	hold0    time.Time // no commit before this (a joiner's hold)
	tokens   float64
	last     time.Time
}

// NewPacer returns a pacer for process proc under s (whose Start the
// first beat replaces).
func NewPacer(s Schedule, proc string) *Pacer {
	return &Pacer{sched: s, proc: proc, now: time.Now, sleep: retry.Sleep,
		period: BeatPeriod, ttl: LeaseTTL, hold: JoinHold, live: 1}
}

// With binds the pacer to a lease, for one caller.
func (p *Pacer) With(l Lease) Bound { return Bound{p: p, lease: l} }

// Bound is a Pacer with the lease its caller reaches the run's state
// through; storewrite's writers pace their commits with it.
type Bound struct {
	p     *Pacer
	lease Lease
}

// Wait blocks until n operations fit in the process's share and spends
// them; it returns how long it waited.
func (b Bound) Wait(ctx context.Context, n int) (time.Duration, error) {
	return b.p.wait(ctx, b.lease, n)
}

// Size is the most operations one commit may carry now: Slice of a
// second of the process's share, at least 1, at most limit.
func (b Bound) Size(limit int) int { return b.p.size(limit) }

func (p *Pacer) size(limit int) int {
	if p.sched.Unlimited() {
		return limit
	}
	p.mu.Lock()
	at := p.now()
	if !p.joined {
		at = p.sched.Start // no start known yet: the base rate
	}
	rate := p.sched.Rate(at) / float64(p.live)
	p.mu.Unlock()
	return max(1, min(int(rate*Slice), limit))
}

// beat renews the process's lease when due (p.mu held): on a first beat,
// or one after the lease lapsed, the bucket starts over — full for the
// run's first writer (its first commit is the ramp's first), empty and
// held for JoinHold for any other, so that every process already writing
// has counted it before it spends.
func (p *Pacer) beat(ctx context.Context, l Lease, now time.Time) error {
	if p.joined && now.Sub(p.lastBeat) < p.period {
		return nil
	}
	var b Beat
	_, err := p.policy.Do(ctx, func(ctx context.Context) error {
		var err error
		now = p.now() // each attempt at its own time: a start set by a retry is not the first attempt's
		b, err = l.Beat(ctx, p.ramp.Run, p.proc, now, p.ttl)
		return err
	}, retry.Hooks{})
	if err != nil {
		return fmt.Errorf("ramp-up of run %s: %w", p.ramp.Run, err)
	}
	if b.Started {
		if b.Start, err = p.anchor(ctx, l, b.Start); err != nil {
			return err
		}
		now = p.now()
	}
	p.lastBeat = now
	p.live = max(1, b.Live)
	p.sched.Start = b.Start
	if !p.joined || !b.WasLive {
		p.last = now
		p.tokens = 0
		p.hold0 = time.Time{}
		switch {
		case b.Started:
			p.tokens = p.sched.Rate(now) * Slice
		default:
			p.hold0 = now.Add(p.hold)
		}
	}
	p.joined = true
	return nil
}

// AnchorLag is how far the run's start may lie before its first
// writer's first commit without being moved (Pacer.anchor).
const AnchorLag = 100 * time.Millisecond

// anchor keeps the run's start from running ahead of its first commit
// (p.mu held; the beat that set start has just returned): the start is
// the time the beat was sent, and the first commit goes only after the
// beat's reads and writes are done, which on a loaded machine or store
// takes seconds. A start that many seconds early puts the first commits
// at a later step's rate, over the budget as the store counts it from
// the first commit. So when the beat took longer than AnchorLag, the
// start moves later, to now plus the beat's time (an estimate of the
// Restart's own round trip, erring late): the schedule's rate before its
// start is the base rate, so a start a little after the first commit
// only slows the ramp by as much. Any process that read the earlier
// start joined after this one's first beat, so it holds for JoinHold
// (10 s) and beats again within BeatPeriod before spending: it spends
// only at the moved start.
func (p *Pacer) anchor(ctx context.Context, l Lease, start time.Time) (time.Time, error) {
	now := p.now()
	lag := now.Sub(start)
	if lag <= AnchorLag {
		return start, nil
	}
	to := now.Add(min(lag, p.sched.Interval))
	var got time.Time
	_, err := p.policy.Do(ctx, func(ctx context.Context) error {
		var err error
		got, err = l.Restart(ctx, p.ramp.Run, start, to)
		return err
	}, retry.Hooks{})
	if err != nil {
		return start, fmt.Errorf("ramp-up of run %s: moving its start to its first commit: %w", p.ramp.Run, err)
	}
	return got, nil
}

func (p *Pacer) wait(ctx context.Context, l Lease, n int) (time.Duration, error) {
	if p.sched.Unlimited() || n <= 0 {
		return 0, nil
	}
	var waited time.Duration
	p.mu.Lock()
	defer p.mu.Unlock()
	need := float64(n)
	for {
		if err := p.beat(ctx, l, p.now()); err != nil {
			return waited, err
		}
		now := p.now() // a beat takes round trips
		var d time.Duration
		if now.Before(p.hold0) {
			d = p.hold0.Sub(now)
		} else {
			live := float64(p.live)
			rate := p.sched.Rate(now) / live
			// Refill with the budget of the time since the last refill
			// (the schedule's steps included), saving at most Slice of
			// a second (or the request, so that it can go at all).
			p.tokens = min(p.tokens+p.sched.Budget(p.last, now)/live, max(rate*Slice, need))
			p.last = now
			if p.tokens >= need {
				p.tokens -= need
				return waited, nil
			}
			d = max(time.Duration((need-p.tokens)/rate*float64(time.Second)), time.Millisecond)
		}
		// Wake for the next beat at the latest, so the share is never
		// older than the beat period.
		if due := p.lastBeat.Add(p.period).Sub(now); due > 0 && due < d {
			d = due
		}
		p.mu.Unlock()
		err := p.sleep(ctx, d)
		p.mu.Lock()
		if err != nil {
			return waited, err
		}
		waited += d
	}
}

// Ramp is a job's ramp-up in plain data (NewSchedule's arguments and the
// run it paces), for pipeline steps to carry to the workers.
type Ramp struct {
	Profile         string  `json:"profile,omitempty"`
	Base            float64 `json:"base,omitempty"`
	Growth          float64 `json:"growth,omitempty"`
	IntervalSeconds float64 `json:"interval_seconds,omitempty"`
	// Run names the job's run: every process that writes its data shares
	// one ramp, which starts at the run's first data commit (Lease).
	Run string `json:"run,omitempty"`
}

// Off reports whether r sets no ramp-up.
func (r Ramp) Off() bool { return r.Profile == "" || r.Profile == ProfileNone }

// Schedule builds the ramp's schedule, starting at start.
func (r Ramp) Schedule(start time.Time) (Schedule, error) {
	return NewSchedule(r.Profile, r.Base, r.Growth, time.Duration(r.IntervalSeconds*float64(time.Second)), start)
}

var pacers = struct {
	sync.Mutex
	m map[Ramp]*Pacer
}{m: map[Ramp]*Pacer{}}

// SharedPacer returns the process's pacer of r, creating it on first use:
// every commit of the run in this process spends the same share.
func SharedPacer(r Ramp) (*Pacer, error) {
	if r.Run == "" {
		return nil, fmt.Errorf("ramp-up %s: no run named", r.Profile)
	}
	pacers.Lock()
	defer pacers.Unlock()
	if p, ok := pacers.m[r]; ok {
		return p, nil
	}
	s, err := r.Schedule(time.Time{})
	if err != nil {
		return nil, err
	}
	p := NewPacer(s, Process)
	p.ramp = r
	pacers.m[r] = p
	return p, nil
}
