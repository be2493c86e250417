package phases

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rekeyio/rekey/cohort"
)

// Span is a run of contiguous cohorts in one phase, entered at Since (the
// store's time of the move) by By.
type Span struct {
	cohort.Range
	Phase Phase
	Since time.Time
	By    string
	// Prev is the phase the cohorts left when they entered Phase (empty
	// when unknown: a map saved before phases kept it). A move that
	// changes which store is authoritative has the library act on Prev
	// until every instance knows the move (see the package doc, "The
	// switch of authority").
	Prev Phase

	fresh bool // painted by the move being saved (Since: its commit time)
}

// Map is a migration's phase map: the spans of cohorts that a move has
// touched, sorted and apart; a cohort in no span is Old. Version counts
// the records of the audit, moves and notes (Store.Note); a Move may
// require it (compare-and-set).
type Map struct {
	Migration string
	Buckets   int
	Version   int64
	Spans     []Span
	// ReadAt, when set, is the time of the snapshot the map was read at
	// (SpannerStore.LoadStale).
	ReadAt time.Time
}

// Phase returns cohort c's phase.
func (m *Map) Phase(c int) Phase {
	s := m.span(c)
	if s == nil {
		return Old
	}
	return s.Phase
}

// SpanOf returns the span holding cohort c (for a cohort no move has
// touched: a span in Old, Since zero).
func (m *Map) SpanOf(c int) Span {
	if s := m.span(c); s != nil {
		return *s
	}
	return Span{Range: cohort.Range{First: c, Last: c}, Phase: Old}
}

// SwitchesAuthority reports whether s's move changed the authoritative
// store (Prev and Phase have different ones): the library then acts on
// the new phase only from Since + CacheTTL + Skew (see the package doc,
// "The switch of authority").
func (s Span) SwitchesAuthority() bool { return SwitchesAuthority(s.Prev, s.Phase) }

// span returns the span holding c, nil if none.
func (m *Map) span(c int) *Span {
	i := sort.Search(len(m.Spans), func(i int) bool { return m.Spans[i].Last >= c })
	if i < len(m.Spans) && m.Spans[i].First <= c {
		return &m.Spans[i]
	}
	return nil
}

// Segments returns the phases over r: the spans' parts within r, with
// the gaps between them as Old (Since zero), in order.
func (m *Map) Segments(r cohort.Range) []Span {
	var out []Span
	next := r.First
	for _, s := range m.Spans {
		if s.Last < r.First || s.First > r.Last {
			continue
		}
		if s.First > next {
			out = append(out, Span{Range: cohort.Range{First: next, Last: s.First - 1}, Phase: Old})
		}
		part := s
		part.First, part.Last = max(s.First, r.First), min(s.Last, r.Last)
		out = append(out, part)
		next = part.Last + 1
	}
	if next <= r.Last {
		out = append(out, Span{Range: cohort.Range{First: next, Last: r.Last}, Phase: Old})
	}
	return out
}

// paint sets r's cohorts to p, as a fresh span, splitting the spans it
// overlaps; then merges neighbours of one phase entered at one time.
func (m *Map) paint(r cohort.Range, p Phase, by string) {
	segs := m.Segments(r)
	var out []Span
	for _, s := range m.Spans {
		if s.Last < r.First || s.First > r.Last {
			out = append(out, s)
			continue
		}
		if s.First < r.First {
			left := s
			left.Last = r.First - 1
			out = append(out, left)
		}
		if s.Last > r.Last {
			right := s
			right.First = r.Last + 1
			out = append(out, right)
		}
	}
	for _, seg := range segs {
		out = append(out, Span{Range: seg.Range, Phase: p, By: by, Prev: seg.Phase, fresh: true})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].First < out[j].First })
	merged := out[:0]
	for _, s := range out {
		if n := len(merged); n > 0 {
			prev := &merged[n-1]
			if prev.Last+1 == s.First && prev.Phase == s.Phase && prev.Prev == s.Prev && prev.fresh == s.fresh && prev.Since.Equal(s.Since) && prev.By == s.By {
				prev.Last = s.Last
				continue
			}
		}
		merged = append(merged, s)
	}
	m.Spans = merged
}

// Move is a change of phase of some cohorts of a migration.
type Move struct {
	Migration string
	// Buckets is the migration's number of cohorts: the first move
	// records it, later ones must give the same (0: cohort.DefaultBuckets).
	Buckets int
	Cohorts []cohort.Range
	To      Phase
	// From, if set, is the phase every cohort must be in.
	From Phase
	// Version, if not 0, is the map's version the move was decided on:
	// the move fails with ErrConflict if another came first.
	Version int64
	// Who and Why go to the audit record.
	Who, Why string
	// Force skips the rules (Check), and says so in the audit record.
	Force bool
	Rules Rules
	// ReverseCopied says a reverse backfill has copied new to old for the
	// cohorts: only such a move takes cohorts that came back to read_new
	// from new_only on to dual_write (see MissedNewOnly).
	ReverseCopied bool
}

// ErrMissedNewOnly is wrapped by the refusal of a move back to
// dual_write or old of cohorts that came back to read_new from new_only
// without a reverse backfill's copy.
var ErrMissedNewOnly = errors.New("old lacks the writes of new_only")

// missedNewOnly refuses moving seg's cohorts to to while old lacks what
// new_only wrote: cohorts in read_new whose previous phase was new_only
// (a reverse backfill moves them there first, then copies new to old,
// then on to dual_write). A rollback of them to dual_write before that
// copy would make old authoritative without the writes new alone took
// (the soak, seed 21: a reverse backfill whose first move's response
// was lost, then a rollback, and reads went back in time). Forward to
// new_only again is allowed: new has everything.
func missedNewOnly(seg Span, mv Move) error {
	if mv.Force || mv.ReverseCopied || seg.Phase != ReadNew || seg.Prev != NewOnly || (mv.To != DualWrite && mv.To != Old) {
		return nil
	}
	return fmt.Errorf("%w: %w: cohorts %s: read_new to %s: they came back from new_only, and old lacks the writes made there until a reverse backfill copies them (rekey run --reverse --cohorts %s), which then moves them to dual_write; or move them forward to new_only again",
		ErrIllegal, ErrMissedNewOnly, seg.Range, mv.To, seg.Range)
}

// Audit is the record of one move, written in the move's transaction, or
// of a note (Store.Note).
type Audit struct {
	Migration string
	// Version is the map's version the move or note made.
	Version int64
	At      time.Time
	Who     string
	Why     string
	// Cohorts are the moved cohorts ("0-99,500"); From their phases
	// before ("0-49 dual_write; 50-99 old", or the one phase they shared).
	Cohorts string
	From    string
	// To is the phase a move moved the cohorts to; empty for a note.
	To Phase
	// Action is, for a note, what was done to the cohorts, which stayed
	// in their phases (From): ActionCleanup. Empty for a move. The stores
	// keep it where they keep To (no phase has an action's name).
	Action string
	Forced bool
}

// Note is an operation on cohorts of a migration that moves none of them,
// recorded in the audit as a move is (Store.Note).
type Note struct {
	Migration string
	// Buckets is the migration's number of cohorts, as for a Move.
	Buckets int
	Cohorts []cohort.Range
	// Action names the operation (ActionCleanup).
	Action   string
	Who, Why string
	// Forced says the operation skipped its rules (a cleanup of cohorts
	// that are not in done).
	Forced bool
}

// ActionCleanup is the action of a cohort cleanup's note: the cohorts'
// old records were deleted (rekey cohort cleanup).
const ActionCleanup = "cleanup"

// toText is what the stores keep of To and Action: the one that is set.
func (a Audit) toText() string {
	if a.Action != "" {
		return a.Action
	}
	return string(a.To)
}

// setTo sets To, or for a note Action, from what a store kept (toText).
func (a *Audit) setTo(text string) {
	if p, err := ParsePhase(text); err == nil {
		a.To = p
		return
	}
	a.Action = text
}

// bucketsOr is n cohorts, or cohort.DefaultBuckets for 0.
func bucketsOr(n int) int {
	if n > 0 {
		return n
	}
	return cohort.DefaultBuckets
}

// apply checks mv against m at now (the store's time) and paints it,
// returning the audit record (At to be set to the commit time).
func (m *Map) apply(mv Move, now time.Time) (Audit, error) {
	a := Audit{Migration: mv.Migration, Who: mv.Who, Why: mv.Why, To: mv.To, Forced: mv.Force}
	if _, err := ParsePhase(string(mv.To)); err != nil {
		return a, fmt.Errorf("%w: %v", ErrIllegal, err)
	}
	cohorts, err := m.cohorts(mv.Migration, mv.Buckets, mv.Cohorts, "move")
	if err != nil {
		return a, err
	}
	if mv.Version != 0 && mv.Version != m.Version {
		return a, fmt.Errorf("%w: the move was decided on version %d, the map is at version %d", ErrConflict, mv.Version, m.Version)
	}
	for _, r := range cohorts {
		for _, seg := range m.Segments(r) {
			if mv.From != "" && seg.Phase != mv.From {
				return a, fmt.Errorf("%w: cohorts %s are %s, not %s", ErrIllegal, seg.Range, seg.Phase, mv.From)
			}
			if !mv.Force {
				if err := Check(seg.Range, seg.Phase, mv.To, seg.Since, now, mv.Rules); err != nil {
					return a, err
				}
			}
			if err := missedNewOnly(seg, mv); err != nil {
				return a, err
			}
		}
	}
	a.From = m.PhasesOf(cohorts)
	for _, r := range cohorts {
		m.paint(r, mv.To, mv.Who)
	}
	m.Version++
	a.Version = m.Version
	a.Cohorts = cohort.Format(cohorts)
	return a, nil
}

// note checks n against m and counts it as a version, returning its audit
// record (At to be set to the commit time); the phases stay as they are.
func (m *Map) note(n Note) (Audit, error) {
	a := Audit{Migration: n.Migration, Who: n.Who, Why: n.Why, Action: n.Action, Forced: n.Forced}
	if _, err := ParsePhase(n.Action); err == nil || n.Action == "" || len(n.Action) > 16 {
		return a, fmt.Errorf("%w: note action %q: want a name of at most 16 bytes that is not a phase's", ErrIllegal, n.Action)
	}
	cohorts, err := m.cohorts(n.Migration, n.Buckets, n.Cohorts, n.Action)
	if err != nil {
		return a, err
	}
	a.From = m.PhasesOf(cohorts)
	m.Version++
	a.Version = m.Version
	a.Cohorts = cohort.Format(cohorts)
	return a, nil
}

// cohorts checks the cohorts of a move or note (what, for messages) of
// migration counting buckets cohorts against m, recording the number in a
// map no move has touched, and returns them merged.
func (m *Map) cohorts(migration string, buckets int, rs []cohort.Range, what string) ([]cohort.Range, error) {
	if len(rs) == 0 {
		return nil, fmt.Errorf("%w: no cohorts to %s", ErrIllegal, what)
	}
	buckets = bucketsOr(buckets)
	if m.Buckets == 0 {
		m.Buckets = buckets
	}
	if m.Buckets != buckets {
		return nil, fmt.Errorf("%w: migration %s has %d cohorts, the %s counts %d", ErrIllegal, migration, m.Buckets, what, buckets)
	}
	cohorts := cohort.Merge(rs)
	for _, r := range cohorts {
		if r.First < 0 || r.Last >= m.Buckets || r.Last < r.First {
			return nil, fmt.Errorf("%w: cohorts %s are outside 0-%d", ErrIllegal, r, m.Buckets-1)
		}
	}
	return cohorts, nil
}

// PhasesOf writes the phases of cohorts: "0-49 dual_write; 50-99 old", or
// the one phase they share.
func (m *Map) PhasesOf(cohorts []cohort.Range) string {
	var parts []string
	phases := map[Phase]bool{}
	var one Phase
	for _, r := range cohort.Merge(cohorts) {
		for _, seg := range m.Segments(r) {
			parts = append(parts, seg.Range.String()+" "+string(seg.Phase))
			phases[seg.Phase], one = true, seg.Phase
		}
	}
	if len(phases) == 1 {
		return string(one)
	}
	return strings.Join(parts, "; ")
}

// settle gives the fresh spans their commit time.
func (m *Map) settle(at time.Time) {
	for i := range m.Spans {
		if m.Spans[i].fresh {
			m.Spans[i].Since, m.Spans[i].fresh = at, false
		}
	}
}
