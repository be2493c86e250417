// Package cutover moves a live application's users onto a migration's new
// keys a cohort at a time (package cohort: a hash of the user id), while
// the pipeline backfills each cohort: the phase store that the
// application and the operator share, and the library through which the
// application reads and writes (Spanner: NewSpanner; Datastore:
// NewDatastore).
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
// version counting the records of its audit (moves and notes). Spans are stored as rows (Spanner:
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
// A note (Store.Note) records in the audit an operation on cohorts that
// moves none of them, a cleanup of their old records: one transaction
// that reads the map and writes the record (its From the cohorts' phases
// then, its Action instead of To) and the version plus one.
//
// Spans entered at different times stay apart even when their phase is
// the same: each span's Since is when its cohorts entered the phase (the
// move's commit time), which the holds are measured from.
//
// # The application library
//
// The application keeps speaking in old keys and records of the old
// table or kind; the library (NewSpanner, NewDatastore) computes each record's new
// record with the very rekeyer the pipeline uses (NewDatastoreSpanner
// for a kind moving into a Spanner table: see "From Datastore to
// Spanner"), and routes every call by
// the phase of the record's cohort:
//
//	phase                         writes, deletes               reads
//	old                           old                           old
//	dual_write, backfilled,       old, then new                 old
//	  verified                      (old authoritative)
//	shadow                        old, then new                 both; returns old; compares
//	read_new                      new, then old                 new (old when the touched mark
//	                                (new authoritative)           says new missed a write, or
//	                                                              when new never held the record)
//	new_only                      new (deletes: new, then old)  new
//	done                          new                           new
//
// When old and new are in one database the two writes are one
// transaction, which can be the application's own (Spanner.BufferWrite,
// BufferDelete; Datastore.WriteInTransaction, DeleteInTransaction; these
// are refused whatever the phase when old and new are apart, so that a
// call that works in old does not break later). Across databases the
// authoritative write goes first; if it
// fails the call fails and nothing else is written; if the second fails
// the call succeeds and the record goes to the repair log (RekeyRepair,
// for part 2's verify and repair); if that fails too the call fails with
// an *UnrepairedError. In dual_write through read_new every write and
// delete on the new side also marks its key touched (RekeyTouched, with
// the commit time and the call's id), in the same transaction.
//
// # Phase cache
//
// The library reads the phase map at start and every CacheTTL/3, and acts
// on a map only while it was read less than CacheTTL ago: once the store
// cannot be read for longer, every call, in every phase, fails with
// ErrStalePhases — writing on a phase that may have moved could lose a
// write, reading on one could miss it. A call's context gets a deadline of
// the map's read time plus CacheTTL plus Skew/2, so no call acts on a
// phase past that. Every instance of an application must use the same
// CacheTTL and Skew, and the operator's hold (Rules.DualWriteHold) must be
// at least CacheTTL + Skew.
//
// The first read, when the library opens, may take up to ten seconds
// (its connection is new; the store may have just started), where a
// refresh gets CacheTTL/3: waiting longer for it is safe, since the map's
// age counts from the read's start; a first map already older than the
// TTL is read again within those seconds, so the library opens ready to
// route (or, if the store stays that slow, refusing calls until a refresh
// succeeds).
//
// The map's read time is the time of the snapshot read. On Spanner the
// refresh is one single-use query at a bounded staleness (at most
// CacheTTL/10, at most a second; SpannerStore.LoadStale): it takes no
// locks and waits on no transaction, so backfills, verifies and repairs
// running beside it cannot starve it (the emulator refuses multi-use
// read-only transactions while read-write ones run, which a strong
// read-only transaction kept hitting); its age is counted from the
// snapshot's timestamp, so a stale snapshot only shortens how long the
// map serves, and the argument below is unchanged.
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
//     reads old after M + H (BackfillRow, the backfill's write, refuses
//     any earlier) and writes a record in one transaction with a read of
//     its touched mark, only if the application has not touched
//     the key since M. Every new-side write or delete of the application
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
// from then until Since + H it holds the call (counted: SwitchWaits);
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
// # Interleaved tables
//
// A Spanner migration may carry tables interleaved in its main table
// (the config's interleaved; new holds them under the same names,
// interleaved under the new main table, their keys rewritten with their
// root's). A row of such a table belongs to its root row's user: the
// config's cohort.user must be a column of the main table's key, which
// every interleaved row carries, so each row routes as its root does and
// every argument above is made per row, with its own touched mark (a
// child's mark is keyed by its table's name and its new key). Three
// things are the tables' own:
//
//   - A new row's ancestors. A write of a child where old is written
//     first (dual_write to shadow) puts in new's transaction, before the
//     child, each ancestor's key columns alone (an InsertOrUpdate of the
//     key, which creates a missing row with its other columns NULL and
//     changes nothing in an existing one): old took the child, so its
//     parent exists there, while new may not hold it until the backfill,
//     which copies it whole (the placeholder marks nothing). Where new is
//     written first (read_new, old and new apart), a placeholder is
//     written only under a guard read in new's transaction: the ancestor
//     row missing and its mark saying Behind = "new", and the row in
//     old (read before that transaction). Such an ancestor's latest
//     write reached old, which was authoritative, and missed new (it is
//     in the repair log), so old holds it and reads of it go to old
//     until the repair copies it over the placeholder: the placeholder
//     changes nothing a read returns. Old's row need not be read in the
//     transaction: Behind = "new" is set only by a call that writes old
//     first, which none does in read_new, and cleared by every call that
//     writes new, so a guard that finds it set finds the record as it
//     was when the cohort entered read_new, old's row included. If old
//     lacks the row, the ancestor's latest call was a delete that new
//     missed: a placeholder would let a child of a deleted row be
//     acknowledged, and the repair's delete of the ancestor in new would
//     take the child with it (ON DELETE CASCADE); the child fails
//     instead (TestSpannerInterleavedChildOfMissedParent; the
//     interleaved soak found it, seed 9102). The guard's reads lock the
//     row and the mark, and a delete of the ancestor writes both, so
//     the two are ordered: after the delete the mark no longer says new
//     is behind, and no placeholder brings the row back. Any other
//     missing parent (deleted, never written) gets none, and the child
//     fails, as it would in one database.
//   - A delete takes the rows interleaved under the row. Each side's
//     transaction deletes, with the row, every descendant table's rows
//     under its key (a key range per table, whatever the tables' ON
//     DELETE), and new's marks every descendant that old or new held when
//     the call was built as deleted, with the row. So a backfill or
//     repair that read a descendant before the delete skips it, as it
//     skips a deleted row: every descendant old held is marked, and one
//     written after the call was built was written through the library
//     and marked by its own write (after the cohort's Since). A failed
//     second write of the delete marks each of those keys behind, as
//     "Missed writes" says of one.
//   - A read of a child reads, in the same snapshot as its own mark, the
//     marks of its ancestors, which stand for it where its own says
//     nothing: an ancestor's Behind (its latest write or delete missed a
//     store, so the child's rows there may be stale) sends the read where
//     Behind says, and an ancestor's deleted mark, or Behind = "old",
//     stops read_new's fallback to old. That covers a descendant written
//     between the delete's build and its commit, which has no delete
//     mark of its own.
//
// A write of a child under a parent deleted while one store missed that
// delete can be acknowledged by the store that still holds the parent,
// where one database would refuse it; the repair of the parent's entry
// then deletes the child there. A cohort backfill carries the tables: it
// reads each table's rows of the cohorts and writes a level only once
// the level above is written, so a child it writes finds its parent in
// new (copied, written by the application, or a placeholder), unless
// the parent was deleted, which marked the child. A cleanup deletes the
// main table's rows of done cohorts and their children go with them (ON
// DELETE CASCADE, which operator.CheckCleanup requires): nothing reads or
// writes old for a done cohort, whatever the table. Verify and repair
// compare and copy every table's rows, a child's keyed by its table and
// key as the library names it; the reverse backfill copies every table
// back (a child's old key is its root's, inverted, then its own
// columns), parents before children. The end-to-end test runs the demo's
// Customers with Orders interleaved through every phase.
//
// # From Datastore to Spanner
//
// DatastoreSpanner routes a Datastore kind (old) and the Spanner table
// that replaces it (new): an entity's new row is what the pipeline
// writes for it (the key path's elements in the source.key columns, then
// the rewrite; the properties as columns). Two stores never share a
// transaction, so it is the layout "old and new apart" of the sections
// above, with nothing else changed: the authoritative write commits
// first, the second after it, a failed second goes to the repair log,
// and there is no BufferWrite or WriteInTransaction. What the argument
// needs of the stores holds across them. The phase store, the touched
// marks and the repair log are all in new's database, so the marks'
// TouchedAt and the phases' times are one clock (Spanner's commit
// times), as the backfill's comparison of a mark with the cohort's
// entry into dual_write needs; a mark is written in the transaction of
// new's write, as within Spanner; read_new reads the mark and then the
// row at the mark's timestamp, one snapshot of new's database; old's
// reads are Datastore lookups by key, strongly consistent, as old's
// reads are in Datastore → Datastore.
//
// What it cannot do: a read of new gives back an entity under its old
// key whose properties are the row's columns other than the key's, so a
// property must survive the trip. NULL columns read back as absent
// properties (an entity written with an explicit null reads back
// without it, and a shadow read counts that as a mismatch); keys,
// embedded entities and geo points, which a column keeps only as text,
// are refused where new is written, naming the property (by the library,
// and by the cohort backfill, which dead-letters the entity: a staged
// migration's rekeyer has StrictColumns); times keep
// Datastore's microseconds. Descendant kinds, references,
// keep_original_key and interleaved target tables are refused when the
// library opens. Every cohort job takes the pair: the backfill's
// conditional commits, verify (a finding read again in both stores at
// one read time) and repair, RepairOld, cleanup, rekey load, and the
// reverse backfill (operator.DatastoreFromSpannerReverse: in one
// transaction of old it reads old's entities, then new's rows strongly,
// and writes old as new holds it, each row turned back into its entity by
// Rekeyer.Invert, under a key of one path element).
//
// # Batches
//
// WriteBatch (what `rekey load` writes through) routes every record as
// Write does, each its own call with its own phase, deadline and touched
// mark, and then commits the calls whose phases write the same sides in
// the same order together: the first side's mutations of all of them in
// one commit, then the second side's in one more (one transaction for
// both when old and new share a database). The argument above is made
// per call and holds for each call of a batch: its authoritative write
// is in a commit that precedes the commit of its other write; its new
// side's mark is in the transaction of its new-side write; the commits
// end by the earliest deadline of the batch's calls, so by the call's
// own. Calls of opposite orders are never in one commit (they are in
// different groups). A key written twice in one batch has its second
// write in a later round of commits, so a commit holds one write per key
// and a key's writes land in their order. A failed commit fails every
// call in it or, for a second write, logs each for repair as Write
// would; a call whose mutations cannot be built fails alone.
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
// Redirected); if new has no record it returns none when the mark says
// the record was deleted or old is behind, and reads old (a fallback) only
// for a record new never held. In dual_write, backfilled, verified and
// shadow it reads the mark (with new at its snapshot), and returns new's
// record if Behind = "old" (old missed a write new took while it was
// authoritative, before a rollback); else it reads old, after the mark.
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
// (TestSpannerConsultReadMarkFirst orders the two reads with the taps so;
// an interleaved soak of seed 9001 had reported such a read once). The
// price is one more round trip in those phases when old and new are
// apart: the two reads no longer overlap.
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
// and new to old where old did (RepairOld: one transaction in old's
// database that reads the old record, taking its lock, then new and the
// mark, strongly, and writes old as new holds it, as a reverse backfill
// does), then clears the entries, and Behind where the mark still carries
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
// the same transaction, which deletes from old those new does not hold:
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
// fail returns an *UnrepairedError: the stores differ on the record and
// no mark says so until verify finds it; reads may return either value.
// A new-side record left from an earlier, rolled-back dual_write whose old
// record was deleted meanwhile is not visited by a backfill that reads
// old; verify reports it as extra in new. Entries of writes old missed
// are repaired only in read_new (while old is authoritative, a copy from
// new to old could overwrite an application write that reached old and
// not yet new).
package cutover
