package cutover_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// dsEnv is a Datastore migration of kind Log from one namespace to
// another (hashprefix on the root element) with the library on it; the
// user id is the Log entity's User property. Old is in the default
// database; new in it too, or in database newDB.
type dsEnv struct {
	lib          *cutover.Datastore
	c            *datastore.Client // the application's client, of old's database
	newC         *datastore.Client // a client of new's database (c when it is the same)
	store        phases.DatastoreStore
	migration    string
	configPath   string
	oldNS, newNS string
}

func newDSEnv(t *testing.T) *dsEnv { return newDSEnvIn(t, "", nil) }

// newDSEnvIn is newDSEnv with new in database newDB ("" the default);
// beforeOpen, if set, runs just before the library is opened (after the
// test's own clients are), e.g. to put a tap between the library's
// client of new and the emulator.
func newDSEnvIn(t *testing.T, newDB string, beforeOpen func()) *dsEnv {
	t.Helper()
	ctx := context.Background()
	c := emulator.TestDatastore(t)
	e := &dsEnv{c: c, newC: c, oldNS: emulator.UniqueNamespace("cut-old"), newNS: emulator.UniqueNamespace("cut-new"), migration: fmt.Sprintf("logs-%d", time.Now().UnixNano())}
	if newDB != "" {
		nc, err := datastoredb.Client(ctx, emulator.DatastoreProject(), newDB)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		e.newC = nc
	}
	e.configPath = filepath.Join(t.TempDir(), "rekey.yaml")
	if err := os.WriteFile(e.configPath, []byte(fmt.Sprintf(`
source: {type: datastore, project: %[1]s, namespace: %[2]s, kind: Log}
target: {type: datastore, project: %[1]s, database: %[4]q, namespace: %[3]s, kind: Log}
rewrite: {strategy: hashprefix}
cohort: {user: User, %[5]s}
`, emulator.DatastoreProject(), e.oldNS, e.newNS, newDB, envCohortTiming)), 0o644); err != nil {
		t.Fatal(err)
	}
	if beforeOpen != nil {
		beforeOpen()
	}
	lib, err := cutover.OpenDatastore(ctx, c, e.configPath, cutover.Options{Migration: e.migration, CacheTTL: envTTL, Skew: envSkew})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lib.Close)
	e.lib, e.store = lib, phases.DatastoreStore{Client: e.newC, Namespace: e.newNS}
	return e
}

// entity is user's log seq, in the old namespace; the user id is both in
// the key's name and the User property, so reads by key route too.
func (e *dsEnv) entity(user string, seq int64, page string) record.Record {
	r := e.key(user, seq)
	r.Fields = append(r.Fields, record.Field{Name: "Page", Value: record.String(page)})
	return r
}

func (e *dsEnv) key(user string, seq int64) record.Record {
	k := rewrite.DatastoreKey{Namespace: e.oldNS, Path: []rewrite.PathElement{{Kind: "Log", Name: fmt.Sprintf("%s.%d", user, seq)}}}
	return record.Record{Table: "Log", Key: &k, Fields: []record.Field{{Name: "User", Value: record.String(user)}}}
}

// pagesIn returns user's Page values in namespace ns (of old's database,
// or of new's for new's namespace).
func (e *dsEnv) pagesIn(t *testing.T, ns, user string) []string {
	t.Helper()
	var out []string
	var ents []struct {
		User, Page string
	}
	c := e.c
	if ns == e.newNS {
		c = e.newC
	}
	if _, err := c.GetAll(context.Background(), datastore.NewQuery("Log").Namespace(ns).FilterField("User", "=", user), &ents); err != nil {
		t.Fatal(err)
	}
	for _, x := range ents {
		out = append(out, x.Page)
	}
	return out
}

func (e *dsEnv) setPhase(t *testing.T, user string, p phases.Phase) {
	t.Helper()
	movePhase(t, e.store, e.migration, e.lib, user, p)
}

// TestDatastoreRouting: the package doc's table for entities, both
// namespaces in one database (dual writes in one transaction), and old
// and new in two databases (two commits, the authoritative first).
func TestDatastoreRouting(t *testing.T) {
	t.Parallel()
	t.Run("one database", func(t *testing.T) { checkDatastoreRouting(t, newDSEnv(t)) })
	t.Run("two databases", func(t *testing.T) { checkDatastoreRouting(t, newDSEnvIn(t, dsNewDatabase, nil)) })
}

// dsNewDatabase is the emulator database the two-database tests put new
// in (their namespaces keep them apart).
const dsNewDatabase = "rekey-cutover-new"

func checkDatastoreRouting(t *testing.T, e *dsEnv) {
	ctx := context.Background()
	for _, p := range phases.Phases {
		user := "user-" + string(p)
		e.setPhase(t, user, p)
		if err := e.lib.Write(ctx, e.entity(user, 1, "v1")); err != nil {
			t.Fatalf("%s: write: %v", p, err)
		}
		w := writtenIn[p]
		if got := e.pagesIn(t, e.oldNS, user); (len(got) == 1) != w.old {
			t.Errorf("%s: old holds %q, want written %v", p, got, w.old)
		}
		if got := e.pagesIn(t, e.newNS, user); (len(got) == 1 && got[0] == "v1") != w.new {
			t.Errorf("%s: new holds %q, want written %v", p, got, w.new)
		}
		got, found, err := e.lib.Read(ctx, e.key(user, 1))
		if v, _ := got.Get("Page"); err != nil || !found || v.Str != "v1" || got.Key.Namespace != e.oldNS {
			t.Errorf("%s: read %s, %v, %v; want the entity as written, under its old key", p, got.Describe(), found, err)
		}
		if err := e.lib.Delete(ctx, e.key(user, 1)); err != nil {
			t.Fatalf("%s: delete: %v", p, err)
		}
		if _, found, err := e.lib.Read(ctx, e.key(user, 1)); err != nil || found {
			t.Errorf("%s: read after delete: found %v, %v", p, found, err)
		}
	}
	if st := e.lib.Stats(); st.Writes[phases.Shadow] != 1 || st.ShadowReads != 2 || st.ShadowMismatches != 0 {
		t.Errorf("stats: %+v", st)
	}
}

// TestDatastoreConcurrentCutover is TestSpannerConcurrentCutover for
// entities: old and new in one database, and in two.
func TestDatastoreConcurrentCutover(t *testing.T) {
	t.Parallel()
	t.Run("one database", func(t *testing.T) { datastoreConcurrentCutover(t, newDSEnv(t)) })
	t.Run("two databases", func(t *testing.T) { datastoreConcurrentCutover(t, newDSEnvIn(t, dsNewDatabase, nil)) })
}

func datastoreConcurrentCutover(t *testing.T, e *dsEnv) {
	ctx := context.Background()
	second, err := cutover.OpenDatastore(ctx, e.c, e.configPath, cutover.Options{Migration: e.migration, CacheTTL: envTTL, Skew: envSkew})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	concurrentCutover(t, fixture{
		libs: []app{e.lib, second}, store: e.store, migration: e.migration, row: e.entity, key: e.key, configPath: e.configPath,
		seed: func(recs []record.Record) error {
			_, err := datastoredb.NewWriter(e.c).Write(ctx, recs)
			return err
		},
		oldRows: func(users []string) ([]record.Record, error) { return entitiesOf(e.c, e.oldNS, "User", users) },
	})
}

// TestDatastoreSecondWriteFailure: old and new in two databases, the
// library's commits of Log entities to new refused (PermissionDenied,
// through a tap in front of new's client only). In dual_write the
// application's write succeeds on old, and the miss goes to the repair
// log in new's database; a read_new read of that entity sees the pending
// repair and reads old; in read_new, where new is authoritative, the
// write fails and old is not written. In shadow the difference is
// counted as awaiting repair, not as a mismatch.
func TestDatastoreSecondWriteFailure(t *testing.T) {
	ctx := context.Background()
	var tap *committap.Tap
	e := newDSEnvIn(t, dsNewDatabase, func() {
		var err error
		if tap, err = committap.Start(os.Getenv(emulator.EnvDatastoreHost)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tap.Close)
		t.Setenv(emulator.EnvDatastoreHost, tap.Addr())
	})
	dual, readNew := "user-dual", "user-readnew"
	e.setPhase(t, dual, phases.DualWrite)
	e.setPhase(t, readNew, phases.ReadNew)
	tap.SetFaults(committap.Faults{Rate: 1, Kinds: []committap.Fault{{Code: codes.PermissionDenied}}, Tables: []string{"Log"}})

	if err := e.lib.Write(ctx, e.entity(dual, 1, "v1")); err != nil {
		t.Fatalf("dual_write with a failing second write: %v, want success", err)
	}
	if got := e.pagesIn(t, e.oldNS, dual); len(got) != 1 || got[0] != "v1" {
		t.Errorf("old holds %q, want [v1]", got)
	}
	if got := e.pagesIn(t, e.newNS, dual); len(got) != 0 {
		t.Errorf("new holds %q, though its commits were refused", got)
	}
	var repairs []struct {
		Migration, Op, OldKey, Missed, Reason string
		Cohort                                int64
		LoggedAt                              time.Time
	}
	q := datastore.NewQuery(phases.DatastoreRepairKind).Namespace(e.newNS).FilterField("Migration", "=", e.migration)
	if _, err := e.newC.GetAll(ctx, q, &repairs); err != nil {
		t.Fatal(err)
	}
	if len(repairs) != 1 || repairs[0].Op != "write" || repairs[0].Missed != "new" || !strings.Contains(repairs[0].OldKey, dual) || !strings.Contains(repairs[0].Reason, "PermissionDenied") {
		t.Errorf("repair log in new's database: %+v; want one write of %s that missed new, with its reason", repairs, dual)
	}
	if st := e.lib.Stats(); st.Repairs != 1 || st.Unrepaired != 0 {
		t.Errorf("repairs %d, unrepaired %d; want 1, 0", st.Repairs, st.Unrepaired)
	}

	// In shadow, before a repair, a read returns old's entity, and the
	// difference from new is counted as awaiting that repair (the
	// touched mark says new missed a write), not as a mismatch.
	e.setPhase(t, dual, phases.Shadow)
	got, found, err := e.lib.Read(ctx, e.key(dual, 1))
	if v, _ := got.Get("Page"); err != nil || !found || v.Str != "v1" {
		t.Errorf("shadow read of the entity new missed: %s, %v, %v; want v1 from old", got.Describe(), found, err)
	}
	if st := e.lib.Stats(); st.ShadowReads != 1 || st.ShadowMismatches != 0 || st.ShadowPending != 1 {
		t.Errorf("shadow reads %d, mismatches %d (%q), awaiting repair %d; want 1, 0, 1", st.ShadowReads, st.ShadowMismatches, st.MismatchSamples, st.ShadowPending)
	}

	// The cohort moves on before a repair: read_new reads old for the
	// entity new missed (its touched mark says so), counted as redirected.
	e.setPhase(t, dual, phases.ReadNew)
	got, found, err = e.lib.Read(ctx, e.key(dual, 1))
	if v, _ := got.Get("Page"); err != nil || !found || v.Str != "v1" {
		t.Errorf("read_new read of the entity new missed: %s, %v, %v; want v1 from old", got.Describe(), found, err)
	}
	if st := e.lib.Stats(); st.Redirected != 1 || st.Fallbacks != 0 {
		t.Errorf("%d redirected, %d fallbacks; want 1, 0", st.Redirected, st.Fallbacks)
	}

	if err := e.lib.Write(ctx, e.entity(readNew, 1, "v1")); err == nil {
		t.Error("read_new with a failing authoritative write succeeded")
	}
	if got := e.pagesIn(t, e.oldNS, readNew); len(got) != 0 {
		t.Errorf("after the authoritative write failed, old holds %q; want nothing", got)
	}
	if n := len(tap.Commits()); n == 0 {
		t.Error("no commit went through the tap: the library's client of new bypassed it")
	}
}

// TestDatastoreWriteInTransaction: the library adds a dual write (and a
// dual delete) to the application's own transaction (one database), which
// commits them with the application's own mutations, or rolls them back
// with it; across databases it refuses, whatever the phase.
func TestDatastoreWriteInTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newDSEnv(t)
	user := "user-txn"
	e.setPhase(t, user, phases.DualWrite)
	other := datastore.NameKey("Other", "someone-else", nil)
	other.Namespace = e.oldNS
	if _, err := e.c.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
		if _, err := tx.Put(other, &datastore.PropertyList{{Name: "Page", Value: "app's own"}}); err != nil {
			return err
		}
		return e.lib.WriteInTransaction(ctx, tx, e.entity(user, 1, "in txn"))
	}); err != nil {
		t.Fatal(err)
	}
	if o, n := e.pagesIn(t, e.oldNS, user), e.pagesIn(t, e.newNS, user); len(o) != 1 || len(n) != 1 || o[0] != "in txn" || n[0] != "in txn" {
		t.Errorf("after the application's transaction: old %q, new %q; want the entity in both", o, n)
	}
	var props datastore.PropertyList
	if err := e.c.Get(ctx, other, &props); err != nil {
		t.Errorf("the application's own entity: %v", err)
	}

	boom := errors.New("the application gives up")
	_, err := e.c.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
		if err := e.lib.WriteInTransaction(ctx, tx, e.entity(user, 2, "rolled back")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("a transaction that fails: %v", err)
	}
	if o, n := e.pagesIn(t, e.oldNS, user), e.pagesIn(t, e.newNS, user); len(o) != 1 || len(n) != 1 {
		t.Errorf("after a rolled-back transaction: old %q, new %q; want only the first entity in each", o, n)
	}

	if _, err := e.c.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
		return e.lib.DeleteInTransaction(ctx, tx, e.key(user, 1))
	}); err != nil {
		t.Fatal(err)
	}
	if o, n := e.pagesIn(t, e.oldNS, user), e.pagesIn(t, e.newNS, user); len(o) != 0 || len(n) != 0 {
		t.Errorf("after a delete in a transaction: old %q, new %q; want none", o, n)
	}

	apart := newDSEnvIn(t, dsNewDatabase, nil)
	for _, p := range []phases.Phase{phases.Old, phases.DualWrite, phases.NewOnly} {
		u := "user-apart-" + string(p)
		apart.setPhase(t, u, p)
		_, err := apart.c.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
			return apart.lib.WriteInTransaction(ctx, tx, apart.entity(u, 1, "x"))
		})
		if err == nil || !strings.Contains(err.Error(), "different databases") {
			t.Errorf("%s: WriteInTransaction across databases: %v, want a refusal", p, err)
		}
	}
}

// entitiesOf are the Log entities of namespace ns whose property prop
// holds one of users.
func entitiesOf(c *datastore.Client, ns, prop string, users []string) ([]record.Record, error) {
	var out []record.Record
	for _, u := range users {
		var props []datastore.PropertyList
		keys, err := c.GetAll(context.Background(), datastore.NewQuery("Log").Namespace(ns).FilterField(prop, "=", u), &props)
		if err != nil {
			return nil, err
		}
		for i, k := range keys {
			r, err := datastoredb.FromEntity(k, props[i])
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}
