package transforms

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/record"
)

func init() {
	register.DoFn4x1[context.Context, record.Batch, func(record.Batch), func(string), error](&cohortsFn{})
}

// CohortSelection picks the records of some cohorts: those whose user id
// (User, a cohort.ParseUser spec) falls in Cohorts (cohort.Parse) among
// Buckets cohorts.
type CohortSelection struct {
	User    string `json:"user"`
	Buckets int    `json:"buckets"`
	Cohorts string `json:"cohorts"`
}

// Cohorts passes on the records of the selected cohorts, as read (before
// the rewrite: a user id that is part of the key is read from the old
// key), and counts the others (CohortOther). A record whose user cannot
// be told (no user id, a value of a kind without one) is dead-lettered at
// stage "cohort" with the reason: it belongs to no cohort, so no cohort
// backfill would ever copy it. It panics on a selection that does not
// parse (the caller checks it first).
func Cohorts(s beam.Scope, sel CohortSelection, batches beam.PCollection) (kept, deadLetters beam.PCollection) {
	s = s.Scope("Cohorts")
	if _, _, err := sel.Parse(); err != nil {
		panic(err)
	}
	return beam.ParDo2(s, &cohortsFn{Sel: sel}, batches)
}

// Parse reads the selection's user spec and cohorts.
func (c CohortSelection) Parse() (cohort.User, []cohort.Range, error) {
	u, err := cohort.ParseUser(c.User)
	if err != nil {
		return u, nil, fmt.Errorf("cohort.user: %w", err)
	}
	rs, err := cohort.Parse(c.Cohorts, c.Buckets)
	if err != nil {
		return u, nil, fmt.Errorf("cohorts: %w", err)
	}
	return u, rs, nil
}

type cohortsFn struct {
	Sel CohortSelection `json:"sel"`

	user cohort.User
	in   []bool // in[c]: cohort c is selected
}

func (f *cohortsFn) Setup() error {
	u, rs, err := f.Sel.Parse()
	if err != nil {
		return err
	}
	f.user = u
	f.in = make([]bool, f.Sel.Buckets)
	for _, r := range rs {
		for c := r.First; c <= r.Last; c++ {
			f.in[c] = true
		}
	}
	return nil
}

func (f *cohortsFn) ProcessElement(ctx context.Context, batch record.Batch, emit func(record.Batch), dead func(string)) error {
	recs := batch.Recs
	var out []record.Record // not recs[:0]: the input is read-only (record.Batch)
	other, deads := 0, 0
	for i := range recs {
		c, err := f.user.Cohort(&recs[i], f.Sel.Buckets)
		switch {
		case err != nil:
			deads++
			dead(record.NewDeadLetter(record.StageCohort, recs[i].Table, &recs[i], fmt.Errorf("cohort.user %s: %w", f.user, err)))
		case f.in[c]:
			out = append(out, recs[i])
		default:
			other++
		}
	}
	if other > 0 {
		CountCohortOther(ctx, int64(other))
	}
	if deads > 0 {
		CountDeadLettered(ctx, int64(deads))
	}
	if len(out) > 0 {
		emit(record.Batch{Recs: out})
	}
	return nil
}
