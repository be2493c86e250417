package phases

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/cohort"
)

func TestCheck(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rg := cohort.Range{First: 0, Last: 9}
	legal := map[[2]Phase]bool{
		{Old, DualWrite}: true, {DualWrite, Backfilled}: true, {Backfilled, Verified}: true,
		{Verified, Shadow}: true, {Verified, ReadNew}: true, {Shadow, ReadNew}: true,
		{ReadNew, NewOnly}: true, {NewOnly, Done}: true,
	}
	for _, p := range []Phase{DualWrite, Backfilled, Verified, Shadow, ReadNew} {
		legal[[2]Phase{p, Old}] = p != ReadNew // read_new goes back through dual_write
		if p != DualWrite {
			legal[[2]Phase{p, DualWrite}] = true
		}
	}
	for _, from := range Phases {
		for _, to := range Phases {
			// Held long enough: only the rules of the phases decide.
			err := Check(rg, from, to, t0, t0.Add(time.Hour), Rules{})
			if want := legal[[2]Phase{from, to}]; (err == nil) != want {
				t.Errorf("%s to %s: %v, want legal %v", from, to, err, want)
			}
			if err != nil && !errors.Is(err, ErrIllegal) {
				t.Errorf("%s to %s: %v is not ErrIllegal", from, to, err)
			}
		}
	}
	// backfilled needs dual_write held for the cache TTL plus the skew.
	err := Check(rg, DualWrite, Backfilled, t0, t0.Add(DefaultCacheTTL), Rules{})
	if err == nil || !strings.Contains(err.Error(), "dual_write held 30s of the 40s needed") {
		t.Errorf("backfilled after 30 s of dual_write: %v", err)
	}
	if err := Check(rg, DualWrite, Backfilled, t0, t0.Add(2*time.Second), Rules{DualWriteHold: time.Second}); err != nil {
		t.Errorf("backfilled after a configured hold: %v", err)
	}
	// new_only likewise needs read_new held.
	if err := Check(rg, ReadNew, NewOnly, t0, t0.Add(time.Second), Rules{}); err == nil || !strings.Contains(err.Error(), "read_new held 1s of the 40s") {
		t.Errorf("new_only after 1 s of read_new: %v", err)
	}
	if _, err := ParsePhase("Read_New "); err != nil {
		t.Error(err)
	}
	if _, err := ParsePhase("live"); err == nil || !strings.Contains(err.Error(), "old, dual_write") {
		t.Errorf("ParsePhase(live): %v", err)
	}
}

func TestMapPaintAndSegments(t *testing.T) {
	m := &Map{Buckets: 100}
	m.paint(cohort.Range{First: 10, Last: 29}, DualWrite, "a")
	m.settle(time.Unix(1, 0))
	m.paint(cohort.Range{First: 20, Last: 39}, Backfilled, "b")
	m.settle(time.Unix(2, 0))
	m.paint(cohort.Range{First: 40, Last: 49}, Backfilled, "b") // a later move: its own span
	m.settle(time.Unix(3, 0))
	var got []string
	for _, s := range m.Spans {
		got = append(got, s.Range.String()+":"+string(s.Prev)+">"+string(s.Phase))
	}
	// A move over cohorts in different phases keeps apart the parts it
	// moved from each: the phase left is part of the span.
	if want := "10-19:old>dual_write 20-29:dual_write>backfilled 30-39:old>backfilled 40-49:old>backfilled"; strings.Join(got, " ") != want {
		t.Errorf("spans %v, want %s", got, want)
	}
	segs := m.Segments(cohort.Range{First: 0, Last: 59})
	got = nil
	for _, s := range segs {
		got = append(got, s.Range.String()+":"+string(s.Phase))
	}
	if want := "0-9:old 10-19:dual_write 20-29:backfilled 30-39:backfilled 40-49:backfilled 50-59:old"; strings.Join(got, " ") != want {
		t.Errorf("segments %v, want %s", got, want)
	}
	if m.Phase(9) != Old || m.Phase(10) != DualWrite || m.Phase(39) != Backfilled || m.Phase(99) != Old {
		t.Errorf("Phase is wrong: %s %s %s %s", m.Phase(9), m.Phase(10), m.Phase(39), m.Phase(99))
	}
	// One move over several ranges paints them all at once: one span
	// each, merged where they touch.
	m.paint(cohort.Range{First: 60, Last: 69}, DualWrite, "c")
	m.paint(cohort.Range{First: 70, Last: 79}, DualWrite, "c")
	m.settle(time.Unix(4, 0))
	if s := m.span(75); s == nil || s.Range != (cohort.Range{First: 60, Last: 79}) {
		t.Errorf("span of 75 = %+v, want 60-79", s)
	}
}

// Cohorts brought back to read_new from new_only (a reverse backfill's
// first move) go on to dual_write or old only by the reverse backfill's
// own move, after its copy: a plain rollback would make old
// authoritative without the writes new alone took in new_only.
func TestMissedNewOnly(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	later := t0.Add(time.Hour)
	rg := cohort.Range{First: 0, Last: 9}
	back := &Map{Migration: "m", Buckets: 100, Spans: []Span{{Range: rg, Phase: ReadNew, Prev: NewOnly, Since: t0}}}
	fresh := &Map{Migration: "m", Buckets: 100, Spans: []Span{{Range: rg, Phase: ReadNew, Prev: Shadow, Since: t0}}}
	for _, c := range []struct {
		name string
		m    *Map
		mv   Move
		want error
	}{
		{"rollback after new_only", back, Move{To: DualWrite}, ErrMissedNewOnly},
		{"the reverse backfill's move", back, Move{To: DualWrite, ReverseCopied: true}, nil},
		{"forward to new_only again", back, Move{To: NewOnly}, nil},
		{"forced", back, Move{To: DualWrite, Force: true}, nil},
		{"rollback of a read_new from shadow", fresh, Move{To: DualWrite}, nil},
	} {
		m := *c.m
		m.Spans = append([]Span(nil), c.m.Spans...)
		c.mv.Migration, c.mv.Buckets, c.mv.Cohorts = "m", 100, []cohort.Range{rg}
		_, err := m.apply(c.mv, later)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if c.want != nil && !strings.Contains(err.Error(), "rekey run --reverse --cohorts 0-9") {
			t.Errorf("%s: %v, want the command that copies new to old", c.name, err)
		}
	}
}

// TestSwitchesAuthority: only the moves between phases whose authoritative stores
// differ switch authority.
func TestSwitchesAuthority(t *testing.T) {
	for _, tc := range []struct {
		prev, p Phase
		want    bool
	}{
		{Verified, ReadNew, true}, {Shadow, ReadNew, true}, {ReadNew, DualWrite, true}, {ReadNew, Old, true},
		{Old, DualWrite, false}, {Shadow, DualWrite, false}, {ReadNew, NewOnly, false}, {NewOnly, ReadNew, false},
		{"", ReadNew, false}, {NewOnly, Done, false},
	} {
		if got := SwitchesAuthority(tc.prev, tc.p); got != tc.want {
			t.Errorf("%s to %s: switches %v, want %v", tc.prev, tc.p, got, tc.want)
		}
	}
}
