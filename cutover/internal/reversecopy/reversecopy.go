// Package reversecopy says, through a context, that a reverse backfill
// has copied new to old for the cohorts a call touches: the library then
// repairs in old the writes old missed of cohorts in read_new back from
// new_only, which it refuses otherwise (before the copy, old lacks the
// writes of new_only, and a repair of a few keys would not make it whole).
// Only package operator's reverse backfill sets it.
package reversecopy

import "context"

type key struct{}

// Done is ctx saying the reverse backfill's copy is done.
func Done(ctx context.Context) context.Context { return context.WithValue(ctx, key{}, true) }

// IsDone says whether ctx says so.
func IsDone(ctx context.Context) bool {
	v, _ := ctx.Value(key{}).(bool)
	return v
}
