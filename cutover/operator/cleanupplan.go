package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/phases"
)

// ErrNotCleanable is wrapped by PlanCleanup's refusals.
var ErrNotCleanable = errors.New("cohorts' old records cannot be deleted")

// PlanCleanup reads migration's phases and returns the map if every one
// of cohorts is in done, where no application instance reads or writes
// its old records any more (see package phases' doc, "Cleaning up"); unless
// force, which takes cohorts in any phase. A refusal names each cohort
// not in done with its phase.
func PlanCleanup(ctx context.Context, st phases.Store, migration string, cohorts []cohort.Range, force bool) (*phases.Map, error) {
	m, err := st.Load(ctx, migration)
	if err != nil {
		return nil, err
	}
	var refused []string
	for _, r := range cohort.Merge(cohorts) {
		if m.Buckets > 0 && r.Last >= m.Buckets {
			return m, fmt.Errorf("%w: cohorts %s are outside 0-%d", ErrNotCleanable, r, m.Buckets-1)
		}
		for _, seg := range m.Segments(r) {
			if seg.Phase != phases.Done && !force {
				refused = append(refused, fmt.Sprintf("%s are %s", seg.Range, seg.Phase))
			}
		}
	}
	if len(refused) > 0 {
		return m, fmt.Errorf("%w: cohorts %s, not done: the application may still read or write the old records of a cohort until it is done (--force deletes them anyway, said so in the audit)",
			ErrNotCleanable, strings.Join(refused, "; cohorts "))
	}
	return m, nil
}

// FinishCleanup records a cleanup of cohorts' old records in the audit
// (Store.Note, ActionCleanup; force is the cleanup's). The record is
// written whatever the phases are then, since the deletes were made; if a
// cohort is no longer in done (a forced move came during the cleanup) and
// the cleanup was not forced, the error says so, with the record.
func FinishCleanup(ctx context.Context, st phases.Store, migration string, buckets int, cohorts []cohort.Range, who, why string, force bool) (phases.Audit, error) {
	a, err := st.Note(ctx, phases.Note{Migration: migration, Buckets: buckets, Cohorts: cohorts, Action: phases.ActionCleanup, Who: who, Why: why, Forced: force})
	if err != nil {
		return a, err
	}
	if !force && a.From != string(phases.Done) {
		return a, fmt.Errorf("%w: cohorts %s were moved during the cleanup (now %s): their old records were deleted all the same (audit version %d)", phases.ErrConflict, a.Cohorts, a.From, a.Version)
	}
	return a, nil
}
