// Package cutover moves a live application's users onto a migration's new
// keys a cohort at a time (package cohort: a hash of the user id), while
// the pipeline backfills each cohort: it is the library through which the
// application reads and writes (Spanner: NewSpanner; Datastore:
// NewDatastore; a Datastore kind moving into a Spanner table:
// NewDatastoreSpanner).
//
// Each cohort is in one phase (Phase: Old, DualWrite, ..., Done), kept
// in the phase store that the application and the operator share. The
// phases, their rules, the phase store, the touched marks and the repair
// log, and the argument why no acknowledged write is lost, are package
// phases' (github.com/rekeyio/rekey/cutover/phases); this package names
// of them what an application uses: Phase and its values, Map and Span
// (Library.Phases), DefaultCacheTTL and DefaultSkew (Options),
// ErrNoPhaseStore.
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
// the commit time and the call's id), in the same transaction. How the
// marks and the log are kept, and how reads consult them, is package
// phases' "Missed writes".
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
// CacheTTL and Skew, and the operator's hold
// (phases.Rules.DualWriteHold) must be at least CacheTTL + Skew.
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
// CacheTTL/10, at most a second; phases.SpannerStore.LoadStale): it takes no
// locks and waits on no transaction, so backfills, verifies and repairs
// running beside it cannot starve it (the emulator refuses multi-use
// read-only transactions while read-write ones run, which a strong
// read-only transaction kept hitting); its age is counted from the
// snapshot's timestamp, so a stale snapshot only shortens how long the
// map serves, and the argument of package phases is unchanged.
//
// # Interleaved tables
//
// A Spanner migration may carry tables interleaved in its main table
// (the config's interleaved; new holds them under the same names,
// interleaved under the new main table, their keys rewritten with their
// root's). A row of such a table belongs to its root row's user: the
// config's cohort.user must be a column of the main table's key, which
// every interleaved row carries, so each row routes as its root does and
// every argument of package phases is made per row, with its own touched
// mark (a child's mark is keyed by its table's name and its new key).
// Three things are the tables' own:
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
//     package phases' "Missed writes" says of one.
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
// new (copied, written by the application, or a placeholder), unless an
// application call on the parent since the cohort's Since kept the
// backfill from copying it or took it out of new. The delete's marks of
// the children come with its second half, in new, after old's: a
// backfill's commit of a child in between finds neither the parent nor
// a mark (the end-to-end test met it, old's delete landed while new's
// was being retried). While old is authoritative such a child is
// skipped, counted with the rows the marks stop
// (operator.SpannerBackfill reads the parents in the commit's
// transaction once new refuses one): if old lacks it, old lost it with
// its parent and skipping it is the copy; if old still holds it (a write
// of the parent that missed new, in the repair log), new lacks it, and
// the verify that must pass before shadow finds it missing and the
// repair copies it after its parent. In read_new (a repair of the log,
// new authoritative) the refusal stands and fails the repair, which
// keeps the entry (TestSpannerBackfillChildOfGoneParent). A cleanup deletes the
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
// above and of package phases, with nothing else changed: the authoritative write commits
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
// both when old and new share a database). The argument of package
// phases is made per call and holds for each call of a batch: its
// authoritative write is in a commit that precedes the commit of its
// other write; its new side's mark is in the transaction of its new-side
// write; the commits end by the earliest deadline of the batch's calls,
// so by the call's own. Calls of opposite orders are never in one commit (they are in
// different groups). A key written twice in one batch has its second
// write in a later round of commits, so a commit holds one write per key
// and a key's writes land in their order. A failed commit fails every
// call in it or, for a second write, logs each for repair as Write
// would; a call whose mutations cannot be built fails alone.
package cutover
