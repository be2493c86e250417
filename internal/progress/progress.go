// Package progress shows how far a local run is: on a terminal, a
// progress bar (github.com/schollz/progressbar) with percent done and ETA
// when the run's total is known or estimated, a spinner with counts
// when it is not; elsewhere (a log, a pipe, CI), a plain line at an
// interval, with no control characters, so logs stay readable.
//
// Percent and ETA count records finished: written (or deleted) plus
// dead-lettered, against the total; records read run ahead of them. The
// total comes from the source (Total.From says how: a COUNT, the kind's
// statistics, file sizes), possibly after the run started: the bar
// starts as a spinner and becomes a bar when it arrives. An estimated
// total the run outgrows is raised to what the run has done, so the
// percent never passes 100.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
)

// Snapshot is what a run has done so far.
type Snapshot struct {
	Read, Done, Dead int64
	// Verb names Done: "written" (the default) or "deleted".
	Verb string
	// ReadOnly says the run writes nothing (a dry run, a plan): it is
	// through with a record once it has read it, and its rate is the
	// read rate.
	ReadOnly bool
	// Why says why a read-only run writes nothing: "a dry run" (the
	// default) or "a plan".
	Why     string
	Elapsed time.Duration
}

func (s Snapshot) verb() string {
	if s.Verb == "" {
		return "written"
	}
	return s.Verb
}

// finished is the records the run is through with.
func (s Snapshot) finished() int64 {
	if s.ReadOnly {
		return s.Read
	}
	return s.Done + s.Dead
}

// Total is a run's number of records, exact or estimated.
type Total struct {
	N     int64
	Exact bool
	// From says where it comes from, e.g. "COUNT(*)", "file sizes".
	From string
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// PlainInterval is how often a plain progress line is written.
const PlainInterval = 10 * time.Second

// Meter shows a run's progress on w. Its methods may be called from any
// goroutine.
type Meter struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	interval time.Duration
	total    *Total
	bar      *progressbar.ProgressBar
	lastAt   time.Duration // the elapsed time of the last plain line
	printed  bool
}

// New makes a meter writing to w: a bar if tty, plain lines every
// interval otherwise (PlainInterval when 0).
func New(w io.Writer, tty bool, interval time.Duration) *Meter {
	if interval <= 0 {
		interval = PlainInterval
	}
	return &Meter{w: w, tty: tty, interval: interval}
}

// SetTotal gives the run's total, when it becomes known.
func (m *Meter) SetTotal(t Total) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.total = &t
	if m.bar != nil {
		m.bar.ChangeMax64(max(t.N, 1))
	}
}

// Update shows s.
func (m *Meter) Update(s Snapshot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.total != nil && !m.total.Exact && s.finished() > m.total.N {
		m.total.N = s.finished()
		if m.bar != nil {
			m.bar.ChangeMax64(m.total.N)
		}
	}
	if !m.tty {
		if m.printed && s.Elapsed-m.lastAt < m.interval {
			return
		}
		m.lastAt, m.printed = s.Elapsed, true
		fmt.Fprintln(m.w, Line(s, m.total))
		return
	}
	if m.bar == nil {
		max := int64(-1)
		if m.total != nil {
			max = m.total.N
		}
		m.bar = progressbar.NewOptions64(max,
			progressbar.OptionSetWriter(m.w),
			progressbar.OptionSetItsString("records"),
			progressbar.OptionShowIts(),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionShowDescriptionAtLineEnd())
	}
	m.bar.Describe(fmt.Sprintf("%d read, %d dead-lettered%s", s.Read, s.Dead, m.totalNote()))
	_ = m.bar.Set64(s.finished()) // the caller updates about once a second: no throttle
}

func (m *Meter) totalNote() string {
	if m.total == nil || m.total.Exact {
		return ""
	}
	return " (total estimated from " + m.total.From + ")"
}

// Finish clears the bar (the caller prints the final counts).
func (m *Meter) Finish() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bar != nil {
		_ = m.bar.Clear()
		m.bar = nil
	}
}

// Line is a plain progress line: counts and rate, and with a total the
// percent and ETA, e.g.
//
//	rekey: 45% (2250 of ~5000 records, from file sizes), 2300 read, 2200 written, 50 dead-lettered, 450 records/s, ETA 6s, 5s elapsed
func Line(s Snapshot, t *Total) string {
	rate := 0.0
	if sec := s.Elapsed.Seconds(); sec > 0 {
		rate = float64(s.finished()) / sec
	}
	head := "rekey: "
	tail := ""
	if t != nil && t.N > 0 {
		about, from := "~", ", from "+t.From
		if t.Exact {
			about = ""
		}
		if t.From == "" {
			from = ""
		}
		pct := min(100, 100*float64(s.finished())/float64(t.N))
		head += fmt.Sprintf("%.0f%% (%d of %s%d records%s), ", pct, s.finished(), about, t.N, from)
		if eta, ok := ETA(s, *t); ok {
			tail = ", ETA " + eta.String()
		}
	}
	if s.ReadOnly {
		why := s.Why
		if why == "" {
			why = "a dry run"
		}
		return fmt.Sprintf("%s%d read, %d dead-lettered, nothing written (%s), %.0f records read/s%s, %s elapsed",
			head, s.Read, s.Dead, why, rate, tail, s.Elapsed.Truncate(time.Second))
	}
	return fmt.Sprintf("%s%d read, %d %s, %d dead-lettered, %.0f records/s%s, %s elapsed",
		head, s.Read, s.Done, s.verb(), s.Dead, rate, tail, s.Elapsed.Truncate(time.Second))
}

// ETA is the time left at the run's mean rate so far, whole seconds; no
// ETA before the first record is finished.
func ETA(s Snapshot, t Total) (time.Duration, bool) {
	done := s.finished()
	if done <= 0 || s.Elapsed <= 0 {
		return 0, false
	}
	left := max(t.N-done, 0)
	return (time.Duration(float64(s.Elapsed) * float64(left) / float64(done))).Round(time.Second), true
}
