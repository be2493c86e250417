package cutover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/rewrite"
)

// Backfill is what a cohort backfill (rekey run --cohorts) writes by: the
// migration whose touched marks it consults, and the cohorts it copies
// with the time each entered the phase it is in (dual_write, unless the
// backfill was forced). A record is written only if the application has
// not touched its new key since its cohort's Since (see the package doc,
// "Why no acknowledged write is lost"). It is plain data: it travels in a
// Beam sink's configuration.
type Backfill struct {
	Migration string         `json:"migration"`
	Spans     []BackfillSpan `json:"spans"`
	// Namespace is the Datastore namespace of the phase store and the
	// touched marks (the target's).
	Namespace string `json:"namespace,omitempty"`
	// Reverse, if set, makes it a reverse backfill: old is written, each
	// record as new holds it when the record is written (see Reverse).
	Reverse *Reverse `json:"reverse,omitempty"`
}

// BackfillSpan is cohorts First..Last, in their phase since Since.
type BackfillSpan struct {
	First int       `json:"first"`
	Last  int       `json:"last"`
	Phase Phase     `json:"phase"`
	Since time.Time `json:"since"`
}

// Cohorts returns the backfill's cohorts as ranges.
func (b Backfill) Cohorts() []cohort.Range {
	rs := make([]cohort.Range, len(b.Spans))
	for i, s := range b.Spans {
		rs[i] = cohort.Range{First: s.First, Last: s.Last}
	}
	return cohort.Merge(rs)
}

// since returns when cohort c entered its phase, false if the backfill
// does not copy c.
func (b Backfill) since(c int) (time.Time, bool) {
	for _, s := range b.Spans {
		if c >= s.First && c <= s.Last {
			return s.Since, true
		}
	}
	return time.Time{}, false
}

// Stops reports whether a key's touched mark (of cohort c, made at
// touchedAt, saying behind) stops the backfill or repair from writing
// new as old holds it: the application touched the key since (keeps);
// old is behind new for it (new holds the newer value); or the cohort is
// in read_new, where new is authoritative and only what the mark says new
// missed is copied (a repair: an entry of the log whose write new has
// taken since, or whose later write old missed, must not be undone).
func (b Backfill) Stops(c int, touchedAt time.Time, behind string) bool {
	if b.keeps(c, touchedAt) || behind == oldSide.String() {
		return true
	}
	for _, s := range b.Spans {
		if c >= s.First && c <= s.Last && s.Phase == ReadNew {
			return behind != newSide.String()
		}
	}
	return false
}

// keeps reports whether a touched mark of cohort c made at touchedAt
// stops the backfill: the application wrote or deleted the record after
// its cohort entered the phase, so what the application did is newer than
// what the backfill read. A mark of a cohort the backfill does not copy
// stops it too (the record's user changed: leave the application's write).
func (b Backfill) keeps(c int, touchedAt time.Time) bool {
	since, ok := b.since(c)
	return !ok || touchedAt.After(since)
}

// ErrNotBackfillable is wrapped by PlanBackfill's refusals.
var ErrNotBackfillable = errors.New("cohorts cannot be backfilled")

// PlanBackfill reads migration's phases and returns the Backfill of
// cohorts: each must be in dual_write, held for rules' DualWriteHold (so
// every application instance writes both stores, and the backfill's read
// of old comes after every old-only write), unless force, which takes the
// cohorts in any phase (each span's Since still bounds the touched marks).
// The map is returned too. now should be the store's time (StoreTime),
// which the holds are measured in.
func PlanBackfill(ctx context.Context, st Store, migration string, cohorts []cohort.Range, force bool, rules Rules, now time.Time) (Backfill, *Map, error) {
	b := Backfill{Migration: migration}
	m, err := st.Load(ctx, migration)
	if err != nil {
		return b, nil, err
	}
	var refused []string
	for _, r := range cohort.Merge(cohorts) {
		if m.Buckets > 0 && r.Last >= m.Buckets {
			return b, m, fmt.Errorf("%w: cohorts %s are outside 0-%d", ErrNotBackfillable, r, m.Buckets-1)
		}
		for _, seg := range m.Segments(r) {
			switch {
			case force:
			case seg.Phase != DualWrite:
				refused = append(refused, fmt.Sprintf("%s are %s, not dual_write", seg.Range, seg.Phase))
				continue
			case now.Sub(seg.Since) < rules.hold():
				refused = append(refused, fmt.Sprintf("%s have been in dual_write %s of the %s needed (the application's phase-cache TTL plus a skew margin); retry after %s",
					seg.Range, now.Sub(seg.Since).Round(time.Second), rules.hold(), seg.Since.Add(rules.hold()).UTC().Format(time.RFC3339)))
				continue
			}
			b.Spans = append(b.Spans, BackfillSpan{First: seg.First, Last: seg.Last, Phase: seg.Phase, Since: seg.Since})
		}
	}
	if len(refused) > 0 {
		return b, m, fmt.Errorf("%w: cohorts %s (--force backfills them anyway, said so in the audit)", ErrNotBackfillable, strings.Join(refused, "; cohorts "))
	}
	return b, m, nil
}

// FinishBackfill moves a successful backfill's cohorts to backfilled, in
// one compare-and-set move, provided each is still in the phase it was
// planned in, entered at the same time: a cohort rolled back and moved
// again meanwhile may hold application writes the backfill skipped, and
// is refused. A move of other cohorts meanwhile is no obstacle (the check
// is made again on the newer map). force is the backfill's, said so in
// the audit.
func FinishBackfill(ctx context.Context, st Store, b Backfill, who, why string, force bool, rules Rules) (*Map, Audit, error) {
	for attempt := 0; ; attempt++ {
		m, err := st.Load(ctx, b.Migration)
		if err != nil {
			return nil, Audit{}, err
		}
		for _, s := range b.Spans {
			for _, seg := range m.Segments(cohort.Range{First: s.First, Last: s.Last}) {
				if seg.Phase != s.Phase || !seg.Since.Equal(s.Since) {
					return m, Audit{}, fmt.Errorf("%w: cohorts %s moved during the backfill (planned %s since %s, now %s since %s); run the backfill again",
						ErrConflict, seg.Range, s.Phase, s.Since.UTC().Format(time.RFC3339Nano), seg.Phase, seg.Since.UTC().Format(time.RFC3339Nano))
				}
			}
		}
		nm, a, err := st.Move(ctx, Move{Migration: b.Migration, Buckets: m.Buckets, Cohorts: b.Cohorts(), To: Backfilled, Version: m.Version, Who: who, Why: why, Force: force, Rules: rules})
		if errors.Is(err, ErrConflict) && attempt < 5 {
			continue // another move came first: judge again on the newer map
		}
		return nm, a, err
	}
}

// SpannerKeyText is the text of the key k of a row of table as the
// library names it in the touched marks, the repair log and messages:
// rekey's key notation, after the table's name for a child table
// ("Orders[7,1]"). The operator's jobs name rows by it too.
func SpannerKeyText(table string, child bool, k []rewrite.Value) string {
	if child {
		return table + rewrite.FormatKey(k, false)
	}
	return rewrite.FormatKey(k, false)
}

// DatastoreMarkKey is the key of the touched mark of new entity key k of
// migration, the marks being in namespace (the target's).
func DatastoreMarkKey(migration, namespace string, k *datastore.Key) *datastore.Key {
	return datastoreTouchedKey(migration, namespace, datastoredb.KeyFromDatastore(k))
}

// datastoreTouchedKey is the key of the touched mark of a new entity's
// key k: by the key's path, whatever its namespace (the marks live in
// the target namespace).
func datastoreTouchedKey(migration, namespace string, k rewrite.DatastoreKey) *datastore.Key {
	k.Namespace, k.Database = "", ""
	tk := datastore.NameKey(DatastoreTouchedKind, migration+"|"+k.String(), nil)
	tk.Namespace = namespace
	return tk
}
