package cutover_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/record"
)

// The library's cache timing in these tests, in Options and, for the
// operator's jobs (a repair opens the library too), in the configs.
const (
	envTTL  = 2 * time.Second
	envSkew = 500 * time.Millisecond
	// envCohortTiming is envTTL and envSkew as the config's cohort keys.
	envCohortTiming = "cache_ttl: 2s, skew: 500ms"
)

const (
	logsDDL   = `CREATE TABLE Logs (UserId STRING(36) NOT NULL, Seq INT64 NOT NULL, Page STRING(MAX)) PRIMARY KEY (UserId, Seq)`
	logsV2DDL = `CREATE TABLE LogsV2 (ShardId INT64 NOT NULL, UserId STRING(36) NOT NULL, Seq INT64 NOT NULL, Page STRING(MAX)) PRIMARY KEY (ShardId, UserId, Seq)`
)

// spannerEnv is a Spanner → Spanner migration of Logs (shard: a ShardId
// column in front, the rest unchanged) with the library on it.
type spannerEnv struct {
	lib        *cutover.Spanner
	old, new   *spanner.Client
	store      phases.SpannerStore
	migration  string
	configPath string
}

// newSpannerEnv creates the databases (one, or source and target apart)
// with the target table (newDDL, or logsV2DDL when empty) and the phase
// store's tables, and opens the library with a short cache TTL.
func newSpannerEnv(t *testing.T, sameDB bool, newDDL string) *spannerEnv {
	return newSpannerEnvVia(t, sameDB, newDDL, "", "")
}

// newSpannerEnvVia is newSpannerEnv with old's client and new's (the
// library's) going to the emulator through the proxies at oldVia and
// newVia (host:port; "" for the emulator itself), old and new apart.
func newSpannerEnvVia(t *testing.T, sameDB bool, newDDL, oldVia, newVia string) *spannerEnv {
	t.Helper()
	ctx := context.Background()
	if newDDL == "" {
		newDDL = logsV2DDL
	}
	target := append([]string{newDDL}, phases.SpannerDDL...)
	var oldC, newC *spanner.Client
	via := func(addr string) {
		if addr != "" {
			t.Setenv(emulator.EnvSpannerHost, addr)
		}
	}
	if sameDB {
		oldC = emulator.TestDB(t, append([]string{logsDDL}, target...)...)
		newC = oldC
	} else {
		via(oldVia)
		oldC = emulator.TestDB(t, logsDDL)
		via(newVia)
		newC = emulator.TestDB(t, target...)
	}
	dbID := func(c *spanner.Client) string { return c.DatabaseName()[strings.LastIndex(c.DatabaseName(), "/")+1:] }
	path := filepath.Join(t.TempDir(), "rekey.yaml")
	yaml := fmt.Sprintf(`
source: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: Logs}
target: {type: spanner, project: %[1]s, instance: %[2]s, database: %[4]s, table: LogsV2}
rewrite: {strategy: shard, params: {n: 8, mode: abs}}
cohort: {user: UserId, %[5]s}
`, emulator.SpannerProject(), emulator.SpannerInstance(), dbID(oldC), dbID(newC), envCohortTiming)
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	mig := fmt.Sprintf("logs-%d", time.Now().UnixNano())
	lib, err := cutover.OpenSpanner(ctx, oldC, path, cutover.Options{
		Migration: mig, CacheTTL: envTTL, Skew: envSkew, // the user id: the config's cohort.user
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lib.Close)
	return &spannerEnv{lib: lib, old: oldC, new: newC, store: phases.SpannerStore{Client: newC}, migration: mig, configPath: path}
}

// setPhase forces user's cohort to p and waits until the library acts on
// it.
func (e *spannerEnv) setPhase(t *testing.T, user string, p phases.Phase) {
	t.Helper()
	movePhase(t, e.store, e.migration, e.lib, user, p)
}

// movePhase forces user's cohort of migration to p in store and waits
// until lib acts on it (and, where the move changes what a call writes
// first, until every instance does).
func movePhase(t *testing.T, store phases.Store, migration string, lib interface{ Phases() *phases.Map }, user string, p phases.Phase) {
	t.Helper()
	c := cohort.Of(user, cohort.DefaultBuckets)
	from := lib.Phases().Phase(c)
	if _, _, err := store.Move(context.Background(), phases.Move{Migration: migration, Cohorts: []cohort.Range{{First: c, Last: c}}, To: p, Force: true, Who: "test"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for lib.Phases().Phase(c) != p {
		if time.Now().After(deadline) {
			t.Fatalf("the library did not see cohort %d move to %s", c, p)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p == phases.DualWrite || newAuthority(from) != newAuthority(p) {
		time.Sleep(envTTL + envSkew)
	}
}

// writtenIn says which stores a write reaches in each phase (the
// package doc's table).
var writtenIn = map[phases.Phase]struct{ old, new bool }{
	phases.Old: {true, false}, phases.DualWrite: {true, true}, phases.Backfilled: {true, true},
	phases.Verified: {true, true}, phases.Shadow: {true, true}, phases.ReadNew: {true, true},
	phases.NewOnly: {false, true}, phases.Done: {false, true},
}

func newAuthority(p phases.Phase) bool {
	return p == phases.ReadNew || p == phases.NewOnly || p == phases.Done
}

// pages returns the Page values stored for user in table.
func pages(t *testing.T, c *spanner.Client, table, user string) []string {
	return pagesWhere(t, c, table, "UserId", user, "Seq")
}

// pagesWhere returns the Page values of table's rows whose column holds
// user, in the order of by.
func pagesWhere(t *testing.T, c *spanner.Client, table, column, user, by string) []string {
	t.Helper()
	var out []string
	err := c.Single().Query(context.Background(), spanner.Statement{SQL: "SELECT Page FROM " + table + " WHERE " + column + " = @u ORDER BY " + by, Params: map[string]any{"u": user}}).Do(func(r *spanner.Row) error {
		var p spanner.NullString
		if err := r.Columns(&p); err != nil {
			return err
		}
		out = append(out, p.StringVal)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func logRow(user string, seq int64, page string) record.Record {
	return record.Record{Table: "Logs", Fields: []record.Field{{Name: "UserId", Value: record.String(user)}, {Name: "Seq", Value: record.Int(seq)}, {Name: "Page", Value: record.String(page)}}}
}

func logKey(user string, seq int64) record.Record {
	return record.Record{Table: "Logs", Fields: []record.Field{{Name: "UserId", Value: record.String(user)}, {Name: "Seq", Value: record.Int(seq)}}}
}

// TestSpannerRouting writes, reads and deletes a record of a user in each
// phase, old and new in one database and in two, and checks from the
// tables themselves where each call went: the package doc's table.
func TestSpannerRouting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, same := range []bool{true, false} {
		t.Run(fmt.Sprintf("same database %v", same), func(t *testing.T) {
			e := newSpannerEnv(t, same, "")
			for _, p := range phases.Phases {
				user := "user-" + string(p)
				e.setPhase(t, user, p)
				if err := e.lib.Write(ctx, logRow(user, 1, "v1")); err != nil {
					t.Fatalf("%s: write: %v", p, err)
				}
				w := writtenIn[p]
				if got := pages(t, e.old, "Logs", user); (len(got) == 1 && got[0] == "v1") != w.old {
					t.Errorf("%s: old holds %q, want written %v", p, got, w.old)
				}
				if got := pages(t, e.new, "LogsV2", user); (len(got) == 1 && got[0] == "v1") != w.new {
					t.Errorf("%s: new holds %q, want written %v", p, got, w.new)
				}
				got, found, err := e.lib.Read(ctx, logKey(user, 1))
				if err != nil || !found || record.Diff(&got, ptr(logRow(user, 1, "v1"))) != "" {
					t.Errorf("%s: read %s, %v, %v; want the row as written, in old keys", p, got.Describe(), found, err)
				}
				if err := e.lib.Delete(ctx, logKey(user, 1)); err != nil {
					t.Fatalf("%s: delete: %v", p, err)
				}
				if got := append(pages(t, e.old, "Logs", user), pages(t, e.new, "LogsV2", user)...); len(got) != 0 && !(p == phases.NewOnly || p == phases.Done) {
					t.Errorf("%s: after the delete the stores hold %q", p, got)
				}
				if _, found, err := e.lib.Read(ctx, logKey(user, 1)); err != nil || found {
					t.Errorf("%s: read after delete: found %v, %v", p, found, err)
				}
				var deleted int64
				if err := e.new.Single().Query(ctx, spanner.Statement{SQL: "SELECT COUNT(*) FROM RekeyTouched WHERE Migration = @m AND NewKey LIKE @k AND Deleted",
					Params: map[string]any{"m": e.migration, "k": "%" + user + "%"}}).Do(func(r *spanner.Row) error { return r.Columns(&deleted) }); err != nil {
					t.Fatal(err)
				}
				if want := w.old && w.new; (deleted == 1) != want {
					t.Errorf("%s: %d keys marked deleted after the delete, want one: %v", p, deleted, want)
				}
			}
			st := e.lib.Stats()
			for _, p := range phases.Phases {
				if st.Writes[p] != 1 || st.Deletes[p] != 1 || st.Reads[p] != 2 {
					t.Errorf("stats of %s: %d writes, %d deletes, %d reads; want 1, 1, 2", p, st.Writes[p], st.Deletes[p], st.Reads[p])
				}
			}
			if st.Refreshes == 0 {
				t.Error("no phase refresh counted")
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestSpannerDualWriteWarmsUp: for its first TTL + skew/2 a dual_write
// cohort writes old only (instances that have not yet seen dual_write
// write old only too, and a new-side value written meanwhile could be
// left stale by them); then old and new.
func TestSpannerDualWriteWarmsUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newSpannerEnv(t, false, "")
	user := "user-warm"
	c := cohort.Of(user, cohort.DefaultBuckets)
	if _, _, err := e.store.Move(ctx, phases.Move{Migration: e.migration, Cohorts: []cohort.Range{{First: c, Last: c}}, To: phases.DualWrite, Who: "test"}); err != nil {
		t.Fatal(err)
	}
	for e.lib.Phases().Phase(c) != phases.DualWrite {
		time.Sleep(20 * time.Millisecond)
	}
	if err := e.lib.Write(ctx, logRow(user, 1, "early")); err != nil {
		t.Fatal(err)
	}
	if got := pages(t, e.new, "LogsV2", user); len(got) != 0 {
		t.Errorf("a write in dual_write's first moments reached new: %q", got)
	}
	if _, err := e.lib.BackfillRow(ctx, logRow(user, 1, "early")); err == nil || !strings.Contains(err.Error(), "less than the cache TTL plus skew") {
		t.Errorf("a backfill within the hold: %v, want it refused", err)
	}
	time.Sleep(envTTL + envSkew)
	if err := e.lib.Write(ctx, logRow(user, 1, "later")); err != nil {
		t.Fatal(err)
	}
	if got := pages(t, e.new, "LogsV2", user); len(got) != 1 || got[0] != "later" {
		t.Errorf("after the hold new holds %q, want the write", got)
	}
}

// TestSpannerReadNewFallsBack: in read_new a record the backfill has not
// copied is read from old, and counted.
func TestSpannerReadNewFallsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newSpannerEnv(t, true, "")
	user := "user-fallback"
	if _, err := e.old.Apply(ctx, []*spanner.Mutation{spanner.Insert("Logs", []string{"UserId", "Seq", "Page"}, []any{user, int64(7), "only-old"})}); err != nil {
		t.Fatal(err)
	}
	e.setPhase(t, user, phases.ReadNew)
	got, found, err := e.lib.Read(ctx, logKey(user, 7))
	if v, _ := got.Get("Page"); err != nil || !found || v.Str != "only-old" {
		t.Fatalf("read_new read of a record only in old: %s, %v, %v", got.Describe(), found, err)
	}
	if n := e.lib.Stats().Fallbacks; n != 1 {
		t.Errorf("%d fallbacks counted, want 1", n)
	}
	// In new_only there is no fallback: new is the only store.
	e.setPhase(t, user, phases.NewOnly)
	if _, found, err := e.lib.Read(ctx, logKey(user, 7)); err != nil || found {
		t.Errorf("new_only read of a record only in old: found %v, %v; want not found", found, err)
	}
}

// TestSpannerShadowComparesReads: in shadow a read returns old and counts
// a mismatch (with the key) when new holds another value.
func TestSpannerShadowComparesReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newSpannerEnv(t, false, "")
	user := "user-shadow"
	e.setPhase(t, user, phases.Shadow)
	if err := e.lib.Write(ctx, logRow(user, 1, "same")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.lib.Read(ctx, logKey(user, 1)); err != nil {
		t.Fatal(err)
	}
	if st := e.lib.Stats(); st.ShadowReads != 1 || st.ShadowMismatches != 0 {
		t.Fatalf("after an equal read: %d shadow reads, %d mismatches; want 1, 0", st.ShadowReads, st.ShadowMismatches)
	}
	if _, err := e.new.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		_, err := txn.Update(ctx, spanner.Statement{SQL: "UPDATE LogsV2 SET Page = 'drifted' WHERE UserId = @u", Params: map[string]any{"u": user}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	got, _, err := e.lib.Read(ctx, logKey(user, 1))
	if v, _ := got.Get("Page"); err != nil || v.Str != "same" {
		t.Errorf("shadow read returned %s, %v; want old's value", got.Describe(), err)
	}
	st := e.lib.Stats()
	if st.ShadowMismatches != 1 || len(st.MismatchSamples) != 1 || !strings.Contains(st.MismatchSamples[0], user) {
		t.Errorf("after a drifted read: %d mismatches, samples %q; want 1 naming %s", st.ShadowMismatches, st.MismatchSamples, user)
	}
}

// TestSpannerSecondWriteFailure: across databases, when the second write
// fails the call succeeds and the record is in the repair log; when the
// authoritative write fails the call fails and the other store is not
// written. The new table's Page holds 5 characters, so a longer one fails
// there only.
func TestSpannerSecondWriteFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newSpannerEnv(t, false, `CREATE TABLE LogsV2 (ShardId INT64 NOT NULL, UserId STRING(36) NOT NULL, Seq INT64 NOT NULL, Page STRING(5)) PRIMARY KEY (ShardId, UserId, Seq)`)
	dual, readNew := "user-dual", "user-readnew"
	e.setPhase(t, dual, phases.DualWrite)
	e.setPhase(t, readNew, phases.ReadNew)
	if err := e.lib.Write(ctx, logRow(dual, 1, "longer than five")); err != nil {
		t.Fatalf("dual_write with a failing second write: %v, want success", err)
	}
	if got := pages(t, e.old, "Logs", dual); len(got) != 1 {
		t.Errorf("old holds %q, want the row", got)
	}
	var n int64
	var op, missed, key string
	if err := e.new.Single().Query(ctx, spanner.Statement{SQL: "SELECT COUNT(*), MAX(Op), MAX(Missed), MAX(OldKey) FROM RekeyRepair WHERE Migration = @m", Params: map[string]any{"m": e.migration}}).
		Do(func(r *spanner.Row) error { return r.Columns(&n, &op, &missed, &key) }); err != nil {
		t.Fatal(err)
	}
	if n != 1 || op != "write" || missed != "new" || !strings.Contains(key, dual) {
		t.Errorf("repair log: %d entries (%s, missed %s, key %s); want one write that missed new, of %s", n, op, missed, key, dual)
	}
	if st := e.lib.Stats(); st.Repairs != 1 {
		t.Errorf("%d repairs counted, want 1", st.Repairs)
	}
	if err := e.lib.Write(ctx, logRow(readNew, 1, "longer than five")); err == nil {
		t.Error("read_new with a failing authoritative write succeeded")
	}
	if got := pages(t, e.old, "Logs", readNew); len(got) != 0 {
		t.Errorf("after the authoritative write failed, old holds %q; want nothing", got)
	}
}

// TestSpannerBufferWrite: the library adds a dual write to the
// application's own transaction (one database), which commits both rows
// with the application's own; across databases it refuses.
func TestSpannerBufferWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newSpannerEnv(t, true, "")
	user := "user-txn"
	e.setPhase(t, user, phases.DualWrite)
	_, err := e.old.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		if err := txn.BufferWrite([]*spanner.Mutation{spanner.InsertOrUpdate("Logs", []string{"UserId", "Seq", "Page"}, []any{"someone-else", int64(1), "app's own"})}); err != nil {
			return err
		}
		return e.lib.BufferWrite(ctx, txn, logRow(user, 1, "in txn"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if o, n := pages(t, e.old, "Logs", user), pages(t, e.new, "LogsV2", user); len(o) != 1 || len(n) != 1 || o[0] != "in txn" || n[0] != "in txn" {
		t.Errorf("after the application's transaction: old %q, new %q; want the row in both", o, n)
	}
	apart := newSpannerEnv(t, false, "")
	apart.setPhase(t, user, phases.DualWrite)
	_, err = apart.old.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return apart.lib.BufferWrite(ctx, txn, logRow(user, 1, "x"))
	})
	if err == nil || !strings.Contains(err.Error(), "different databases") {
		t.Errorf("BufferWrite across databases: %v, want a refusal", err)
	}
	// In new_only too, where the one write is new's: txn is old's.
	apart.setPhase(t, "user-new-only", phases.NewOnly)
	_, err = apart.old.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		return apart.lib.BufferWrite(ctx, txn, logRow("user-new-only", 1, "x"))
	})
	if err == nil || !strings.Contains(err.Error(), "different databases") {
		t.Errorf("BufferWrite across databases in new_only: %v, want a refusal", err)
	}
}
