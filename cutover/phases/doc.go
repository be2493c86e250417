// Package phases is the protocol of a staged cutover (package cutover)
// that the application library and the operator share: the phases of a
// migration's cohorts (package cohort: a hash of the user id) and the
// rules of their moves (Check), the phase store that keeps them with
// their audit (Store: SpannerStore, DatastoreStore), the touched marks
// and the repair log in the same place, and what a cohort backfill writes
// by (Backfill, Reverse). The library (package cutover) reads the phases
// and keeps the marks and the log; the operator (package cutover/operator,
// the rekey cohort commands) moves cohorts and runs the jobs. Below,
// "the library" is package cutover's, and CacheTTL and Skew are its
// Options'.
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
// version counting the records of its audit (moves and notes). Spans are
// stored as rows (Spanner: RekeyCohortPhase, interleaved in RekeyCutover)
// or entities (Datastore: RekeyCohortPhase under the migration's
// RekeyCutover entity), so reading the phases of all 10,000 cohorts is
// one small read of a few spans.
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
// A note (Store.Note) records in the audit an operation on cohorts that
// moves none of them, a cleanup of their old records: one transaction
// that reads the map and writes the record (its From the cohorts' phases
// then, its Action instead of To) and the version plus one.
//
// Spans entered at different times stay apart even when their phase is
// the same: each span's Since is when its cohorts entered the phase (the
// move's commit time), which the holds are measured from.
//
// # Why no acknowledged write is lost
//
// Let M be the commit time of a move and H = CacheTTL + Skew. An instance
// acts on a map read at some R > now − CacheTTL, so after M + CacheTTL
// (+ clock skew, under Skew/2) every instance acts on the moved phase, and
// calls that acted on the earlier phase ended by M + H (their deadline).
//
//   - Old is authoritative until read_new, new from read_new on; in every
//     phase each acknowledged write is in the authoritative store (it was
//     written there first, or in the same transaction), and reads go to the
//     authoritative store, or to the other one where the key's touched
//     mark says the authoritative one missed a write (see "Missed writes").
//   - An instance still on an older phase. For its first CacheTTL + Skew/2
//     a dual_write cohort writes old only, as old does, and those calls end
//     by M + H: so no instance writes new before every instance writes
//     both, and no old-only write lands after M + H. Later moves keep both
//     stores written by every instance in both the old and the new phase
//     (backfilled, verified, shadow, read_new all write both), except
//     new_only, which needs read_new held for H (no instance reads old as
//     authoritative by then) and still deletes from old (an instance in
//     read_new falling back to old must not find a deleted record), and
//     done, which needs new_only held for H.
//   - A backfill copying a value older than a dual write. The backfill
//     reads old after M + H (the library's BackfillRow, the backfill's
//     write, refuses any earlier) and writes a record in one transaction
//     with a read of its touched mark, only if the application has not
//     touched the key since M. Every new-side write or delete of the application
//     in this dual_write is at or after M + CacheTTL + Skew/2 > M and marks
//     the key in its transaction: if it committed before the backfill's
//     transaction, the backfill skips the key (the application's value is
//     newer); if after, it overwrites the backfill's. Marks from before M
//     (an earlier dual_write rolled back since) do not stop the backfill,
//     which then replaces what new held from then.
//   - A delete during dual_write that a backfill would resurrect. The
//     delete marks the key touched (deleted) in the transaction that
//     deletes the new record, so a backfill that read the record before the
//     delete skips it, whichever commits first.
//
// # The switch of authority
//
// Two calls on one record that write in opposite orders — one old first
// (an instance on shadow), one new first (an instance on read_new) —
// can leave old and new holding different values, each acknowledged, and
// a read on either side then returns the other's older value. So no call
// of one order may overlap a call of the other. A move whose new phase
// has another authoritative store than the phase it left (Span.Prev:
// verified or shadow to read_new; read_new back to dual_write) takes
// effect in three steps, on every instance: until Since + CacheTTL +
// Skew/2 the instance acts on the phase left, with the call's deadline at
// that moment (a call that would have less than Skew/2 waits instead);
// from then until Since + H it holds the call (counted: the library's
// Stats.SwitchWaits);
// after Since + H it acts on the new phase. An instance whose cache still
// holds the phase left ends its calls by R + CacheTTL + Skew/2 < Since +
// CacheTTL + Skew/2 (R < Since). With clocks within Skew/4 of the store's,
// every call of the old order ends before the first of the new order
// starts. A call's second write leaves Skew/4 of its time to its
// repair-log entry, which is written within the call's deadline too.
// Rolling back from read_new needs read_new held for H (Check), so that
// the instances that act on the phase left act on read_new, not on the
// phase before it; a rollback goes to dual_write, not old (instances in
// read_new read new, which old-only writes would no longer reach).
//
// # Cleaning up
//
// Once a cohort is done its old records may go (rekey cohort cleanup:
// package operator's PlanCleanup refuses cohorts that are not done, the
// pipeline deletes the cohorts' records from old, its FinishCleanup
// notes it in the audit). Why
// that loses nothing and breaks no instance: done needs new_only held for
// H, and new_only read_new held for H. So by the time a cohort enters
// done (M), every instance has acted on new_only for a while and every
// call that acted on read_new ended (by the new_only move plus H ≤ M):
// no instance reads old any more (read_new's fallback was the last
// reader), and none writes old (new_only and done write new only). What
// still reaches old is new_only's delete of a record also deleted from
// new, which a cleanup's delete of the same key only repeats (deletes are
// idempotent, in either order). The backfill reads only dual_write
// cohorts. Nothing moves a cohort out of done but a forced move;
// operator.FinishCleanup reports a cohort found moved when it records the cleanup,
// and a forced move back to an earlier phase after a cleanup needs the
// old records restored (a reverse backfill) first.
//
// # Verify and repair
//
// A verify (rekey verify) compares old, mapped through the rewrite, with
// new, by new key, while the application writes. Each finding is read
// again, in batches, at one moment on both sides (Spanner: new in a
// strong read-only transaction, old at its timestamp; Datastore: both at
// one read time) a few times before it counts: a finding the two sides
// agree on at one of those moments was a write in flight. A record with
// a repair-log entry in a phase where old is authoritative is routed
// around (its touched mark sends reads to the store that holds its latest
// write) and does not keep verify --mark from passing. A repair (rekey
// repair) puts findings right while old is authoritative (dual_write to
// shadow), by the backfill's conditional writes with the repair's start
// less the skew margin as Since: a record the application touched after
// then may be newer than what the repair read and is left alone;
// repair-log entries of writes new missed, logged before that Since, are
// cleared, as the repair re-read their records. One logged after it
// touched its mark after it (the log sets TouchedAt), so its record was
// left alone and the entry stays for the next repair. In read_new it repairs only what the
// log names (see "Missed writes").
//
// # Missed writes
//
// Old and new in two databases, a call's second write can fail after its
// first succeeded, and a first write can fail after the store applied it
// (its response lost). The library keeps, in the key's touched mark in
// new's database, which store is behind, if one is:
//
//   - Every new-side write or delete of a call that marks keys writes the
//     call's id (Op) and clears Behind, in the write's own transaction:
//     that call writes the authoritative store first, so neither is
//     behind once both took it.
//   - A failed second write is logged in one transaction of new's
//     database that writes the repair log's entry (RekeyRepair) and sets
//     the mark: Behind = "new" (with TouchedAt now, so that a backfill or
//     repair that read old before old took the write does not overwrite
//     it) when new missed it; Behind = "old" when old missed it and the
//     mark still carries the call's id (if a later call wrote new since,
//     it writes old after that, and old is not behind for it).
//   - A failed first write that may have been applied (any error but a
//     lost race) is logged the same way: old first, as Behind = "new"
//     (reads go to old, which holds the latest write either way); new
//     first, only if the mark carries the call's id (new took it).
//
// A read consults the mark: in read_new it reads the mark, then new at
// the mark's snapshot; if Behind = "new" it reads old instead (counted:
// Stats.Redirected); if new has no record it returns none when the mark says
// the record was deleted or old is behind, and reads old (a fallback) only
// for a record new never held. In dual_write, backfilled, verified and
// shadow it reads the mark (with new at its snapshot), and returns new's
// record if Behind = "old" (old missed a write new took while it was
// authoritative, before a rollback); else it reads old, after the mark.
// A shadow read that finds old and new differ on a key whose mark has a
// Behind counts the difference as awaiting repair (Stats.ShadowPending),
// not as a mismatch: the repair log holds the write one store missed.
// Apart, any other difference is looked at again a moment later (a write
// of the key can land between the read of new and the read of old), and
// counted as a mismatch only if it is still there (else
// Stats.ShadowSettled).
// So a delete that reached new and not old (or whose response was lost)
// is not undone by a read, and a read never returns what the
// authoritative store replaced.
//
// The mark comes first because Behind = "old" is cleared only once old
// holds the missed write or a later one: by a later call's touch (which
// wrote old first), or by a repair or a reverse backfill (which wrote old
// before clearing it). A mark read that finds Behind clear is followed by
// a read of old that sees whatever cleared it. Read at once, old's read
// could come before another instance's write and the mark's after it: old
// without the missed write, the mark cleared by the other write, and the
// read would return what the missed write replaced
// (TestSpannerConsultReadMarkFirst in package cutover orders the two
// reads with the taps so; an interleaved soak of seed 9001 had reported
// such a read once). The price is one more round trip in those phases
// when old and new are apart: the two reads no longer overlap.
//
// Why the mark is right: within one authority (see the switch above)
// every call writes the same store first. Behind = "new" is set only for
// writes old took; any later call that reaches new clears it and reaches
// old first. Behind = "old" is set only while the mark carries the id of
// the call old missed, i.e. while that call's write is new's latest; a
// later call writing new clears it, and one failing on new (in the old
// order, after a switch back) sets Behind = "new", which sends reads to
// old, which took it. A backfill and a repair skip keys whose mark says
// Behind = "old" (new holds the newer value) and clear Behind = "new"
// where they copy old (read after the mark was set).
//
// Repairs: rekey repair, while old is authoritative, copies old to new
// for the whole cohort. In read_new it copies, for the repair log's
// entries logged before it began, old to new where new missed the write
// and new to old where old did (the library's RepairOld: one transaction
// in old's database that reads the old record, taking its lock, then new
// and the mark, strongly, and writes old as new holds it, as a reverse
// backfill does), then clears the entries, and Behind where the mark still carries
// what it read. new_only is refused while a cohort has entries of writes
// new missed, and old (a rollback) while it has entries of writes old
// missed: after the switch to new_only nothing reads old, and in old
// nothing reads the marks. A reverse backfill, which copies new to old
// whole, clears the entries of writes old missed and the marks' Behind =
// "old" of its cohorts from before it began, and repairs those logged
// since. In new_only and done reads
// go to new alone, without the marks (which those phases no longer keep).
//
// # A reverse backfill
//
// From new_only a cohort comes back only through a reverse backfill
// (rekey run --reverse): it moves the cohort to read_new (forced: the
// rules let nothing else go back from new_only), waits H, so that every
// instance writes new and then old, copies new to old through the inverse
// rewrite, and moves the cohort to dual_write. Why the copy loses no
// write: each batch is one read-write transaction in old's database that
// first reads the old rows, taking their locks, then reads the new records
// of those keys, strongly, now, and writes old as new holds them
// (deleting where new has none; package operator's SpannerReverse and
// DatastoreReverse). Interleaved tables are copied a level at a time,
// parents first; a child's batch also reads, in the same way, the parent
// rows old lacks and writes them as new holds them (an application's
// write of a parent in old can fail after the parents' level read new,
// and old refuses a child without its parent). An application write of such a record in read_new writes new, then old. If
// its write of new came before the copy's read of new, the copy writes
// that value or a later one, and the application's write of old, landing
// before or after, writes the same; if it came after the copy's read, the
// application's write of old comes after that too, so it waits for the
// copy's locks and lands last. Either way old ends as new, except where
// old refused the application's write: a child whose parent old lacked
// because the copy had read new's children before the write and not yet
// committed the parent. That write is logged as one old missed (Behind =
// "old", so reads take new's record), and the reverse backfill, once the
// copy is done and while the cohorts are still in read_new, repairs in
// old every such entry of its cohorts (RepairOld) before it moves them
// to dual_write: old, authoritative again, holds every acknowledged
// write. With old and new in one database the reads are in the copy's
// transaction.
//
// The copy also reads old's records of the cohorts and puts them through
// the same transaction (a key read from both is written once: a delete
// of one of the two would take, in Spanner, the rows interleaved under
// it), which deletes from old those new does not hold:
// a delete in new_only whose second half (old's) failed is not logged
// (new_only keeps no marks), and without this old would give the record
// back once authoritative. The wait H is measured from the cohorts'
// entry into read_new, so a reverse backfill run again after a first
// move whose response was lost still waits for every instance to write
// old. Until the copy is done, old lacks new_only's writes: cohorts in
// read_new whose previous phase is new_only go back to dual_write or old
// only by the reverse backfill's own move (Move.ReverseCopied; else
// ErrMissedNewOnly), forward to new_only again by any.
//
// # What is guaranteed, and how it is checked
//
// For every record, through every phase, rollback and reverse backfill,
// with any instance's phase cache within its TTL and commits failing
// before or after they are applied:
//
//   - a read returns the latest write (or delete) acknowledged before it
//     began, or one that overlapped it; a failed call's write may or may
//     not have taken effect, within the call;
//   - nothing deleted comes back: a read after an acknowledged delete
//     returns nothing until a later write;
//   - no read goes back in time: once a read returned a write, no later
//     read returns one that ended before that write began;
//   - when every cohort is done, new holds for every record its last
//     acknowledged write (or a later one that failed after applying).
//
// The integration package's soak (TestSoakSpanner, TestSoakDatastore)
// checks each of these against the recorded history of a seeded workload
// of several instances while operators run every job, with commit taps
// failing writes of every kind, both layouts; TestSpannerMissedWrites and
// TestDatastoreMissedWrites pin the cases of a delete old missed and one
// whose response was lost.
//
// Not covered: a call whose second write and its repair-log entry both
// fail returns a *cutover.UnrepairedError: the stores differ on the record and
// no mark says so until verify finds it; reads may return either value.
// A new-side record left from an earlier, rolled-back dual_write whose old
// record was deleted meanwhile is not visited by a backfill that reads
// old; verify reports it as extra in new. Entries of writes old missed
// are repaired only in read_new (while old is authoritative, a copy from
// new to old could overwrite an application write that reached old and
// not yet new).
package phases
