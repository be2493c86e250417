package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/phases"
)

// ErrNotBackfillable is wrapped by PlanBackfill's refusals.
var ErrNotBackfillable = errors.New("cohorts cannot be backfilled")

// PlanBackfill reads migration's phases and returns the phases.Backfill of
// cohorts: each must be in dual_write, held for rules' DualWriteHold (so
// every application instance writes both stores, and the backfill's read
// of old comes after every old-only write), unless force, which takes the
// cohorts in any phase (each span's Since still bounds the touched marks).
// The map is returned too. now should be the store's time (StoreTime),
// which the holds are measured in.
func PlanBackfill(ctx context.Context, st phases.Store, migration string, cohorts []cohort.Range, force bool, rules phases.Rules, now time.Time) (phases.Backfill, *phases.Map, error) {
	b := phases.Backfill{Migration: migration}
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
			case seg.Phase != phases.DualWrite:
				refused = append(refused, fmt.Sprintf("%s are %s, not dual_write", seg.Range, seg.Phase))
				continue
			case now.Sub(seg.Since) < rules.Hold():
				refused = append(refused, fmt.Sprintf("%s have been in dual_write %s of the %s needed (the application's phase-cache TTL plus a skew margin); retry after %s",
					seg.Range, now.Sub(seg.Since).Round(time.Second), rules.Hold(), seg.Since.Add(rules.Hold()).UTC().Format(time.RFC3339)))
				continue
			}
			b.Spans = append(b.Spans, phases.BackfillSpan{First: seg.First, Last: seg.Last, Phase: seg.Phase, Since: seg.Since})
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
func FinishBackfill(ctx context.Context, st phases.Store, b phases.Backfill, who, why string, force bool, rules phases.Rules) (*phases.Map, phases.Audit, error) {
	for attempt := 0; ; attempt++ {
		m, err := st.Load(ctx, b.Migration)
		if err != nil {
			return nil, phases.Audit{}, err
		}
		for _, s := range b.Spans {
			for _, seg := range m.Segments(cohort.Range{First: s.First, Last: s.Last}) {
				if seg.Phase != s.Phase || !seg.Since.Equal(s.Since) {
					return m, phases.Audit{}, fmt.Errorf("%w: cohorts %s moved during the backfill (planned %s since %s, now %s since %s); run the backfill again",
						phases.ErrConflict, seg.Range, s.Phase, s.Since.UTC().Format(time.RFC3339Nano), seg.Phase, seg.Since.UTC().Format(time.RFC3339Nano))
				}
			}
		}
		nm, a, err := st.Move(ctx, phases.Move{Migration: b.Migration, Buckets: m.Buckets, Cohorts: b.Cohorts(), To: phases.Backfilled, Version: m.Version, Who: who, Why: why, Force: force, Rules: rules})
		if errors.Is(err, phases.ErrConflict) && attempt < 5 {
			continue // another move came first: judge again on the newer map
		}
		return nm, a, err
	}
}
