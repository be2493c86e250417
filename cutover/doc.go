// Package cutover moves a live application's users onto a migration's new
// keys a cohort at a time (package cohort: a hash of the user id), while
// the pipeline backfills each cohort: the phase store that the
// application and the operator share.
//
// # Phases
//
// Each cohort of a migration (a name) is in one phase:
//
//	old → dual_write → backfilled → verified → (shadow →) read_new → new_only → done
//
// A cohort moves forward one phase at a time (shadow is optional between
// verified and read_new); any phase before new_only may roll back to
// dual_write or old; from new_only on only a reverse backfill goes back.
// Check states the rules. backfilled needs dual_write held for at least
// the application's phase-cache TTL plus a skew margin (Rules): only then
// has every application instance seen dual_write and written the new keys
// too, so a backfill that starts after it misses no write.
//
// # The phase store
//
// A Store keeps, per migration, a Map: the spans of contiguous cohorts in
// one phase (a cohort in none is old), its number of cohorts and a
// version counting the moves. Spans are stored as rows (Spanner:
// RekeyCohortPhase, interleaved in RekeyCutover) or entities (Datastore:
// RekeyCohortPhase under the migration's RekeyCutover entity), so reading
// the phases of all 10,000 cohorts is one small read of a few spans.
//
// A Move is one transaction: it reads the map, judges the move against
// the rules at the store's time (Spanner: CURRENT_TIMESTAMP(); the
// Datastore client returns no commit times, so the mover's clock, which
// the skew margin covers), writes the new spans, the version plus one and
// an audit record (who, when, from, to, why; keyed by the new version) —
// or, if the move is refused, nothing. A Move may name the version it was
// decided on (compare-and-set): if another move came first it fails with
// ErrConflict. Without it, of two racing moves of the same cohorts one
// commits and the other, run again by the store's transaction retry,
// finds the cohorts already moved and is refused (ErrIllegal): exactly
// one wins either way.
//
// Spans entered at different times stay apart even when their phase is
// the same: each span's Since is when its cohorts entered the phase (the
// move's commit time), which the dual_write hold is measured from.
package cutover
