package cutover_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/internal/datastoredb"
	"github.com/rekeyio/rekey/internal/emulator"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// dsEnv is a Datastore migration of kind Log from one namespace to
// another (hashprefix on the root element) with the library on it; the
// user id is the Log entity's User property.
type dsEnv struct {
	lib          *cutover.Datastore
	c            *datastore.Client
	store        cutover.DatastoreStore
	migration    string
	configPath   string
	oldNS, newNS string
}

func newDSEnv(t *testing.T) *dsEnv {
	t.Helper()
	ctx := context.Background()
	c := emulator.TestDatastore(t)
	e := &dsEnv{c: c, oldNS: emulator.UniqueNamespace("cut-old"), newNS: emulator.UniqueNamespace("cut-new"), migration: fmt.Sprintf("logs-%d", time.Now().UnixNano())}
	e.configPath = filepath.Join(t.TempDir(), "rekey.yaml")
	if err := os.WriteFile(e.configPath, []byte(fmt.Sprintf(`
source: {type: datastore, project: %[1]s, namespace: %[2]s, kind: Log}
target: {type: datastore, project: %[1]s, namespace: %[3]s, kind: Log}
rewrite: {strategy: hashprefix}
cohort: {user: User}
`, emulator.DatastoreProject(), e.oldNS, e.newNS)), 0o644); err != nil {
		t.Fatal(err)
	}
	lib, err := cutover.OpenDatastore(ctx, c, e.configPath, cutover.Options{Migration: e.migration, CacheTTL: envTTL, Skew: envSkew})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lib.Close)
	e.lib, e.store = lib, cutover.DatastoreStore{Client: c, Namespace: e.newNS}
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

// pagesIn returns user's Page values in namespace ns.
func (e *dsEnv) pagesIn(t *testing.T, ns, user string) []string {
	t.Helper()
	var out []string
	var ents []struct {
		User, Page string
	}
	if _, err := e.c.GetAll(context.Background(), datastore.NewQuery("Log").Namespace(ns).FilterField("User", "=", user), &ents); err != nil {
		t.Fatal(err)
	}
	for _, x := range ents {
		out = append(out, x.Page)
	}
	return out
}

func (e *dsEnv) setPhase(t *testing.T, user string, p cutover.Phase) {
	t.Helper()
	c := cohort.Of(user, cohort.DefaultBuckets)
	if _, _, err := e.store.Move(context.Background(), cutover.Move{Migration: e.migration, Cohorts: []cohort.Range{{First: c, Last: c}}, To: p, Force: true, Who: "test"}); err != nil {
		t.Fatal(err)
	}
	for e.lib.Phases().Phase(c) != p {
		time.Sleep(20 * time.Millisecond)
	}
	if p == cutover.DualWrite {
		time.Sleep(envTTL + envSkew)
	}
}

// TestDatastoreRouting: the package doc's table for entities, both
// namespaces in one database (dual writes in one transaction).
func TestDatastoreRouting(t *testing.T) {
	ctx := context.Background()
	e := newDSEnv(t)
	type want struct{ old, new bool }
	wants := map[cutover.Phase]want{
		cutover.Old: {true, false}, cutover.DualWrite: {true, true}, cutover.Backfilled: {true, true},
		cutover.Verified: {true, true}, cutover.Shadow: {true, true}, cutover.ReadNew: {true, true},
		cutover.NewOnly: {false, true}, cutover.Done: {false, true},
	}
	for _, p := range cutover.Phases {
		user := "user-" + string(p)
		e.setPhase(t, user, p)
		if err := e.lib.Write(ctx, e.entity(user, 1, "v1")); err != nil {
			t.Fatalf("%s: write: %v", p, err)
		}
		w := wants[p]
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
	if st := e.lib.Stats(); st.Writes[cutover.Shadow] != 1 || st.ShadowReads != 2 || st.ShadowMismatches != 0 {
		t.Errorf("stats: %+v", st)
	}
}

func TestDatastoreConcurrentCutover(t *testing.T) {
	ctx := context.Background()
	e := newDSEnv(t)
	second, err := cutover.OpenDatastore(ctx, e.c, e.configPath, cutover.Options{Migration: e.migration, CacheTTL: envTTL, Skew: envSkew})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	concurrentCutover(t, fixture{
		libs: []app{e.lib, second}, store: e.store, migration: e.migration, row: e.entity, key: e.key,
		seed: func(recs []record.Record) error {
			_, err := datastoredb.NewWriter(e.c).Write(ctx, recs)
			return err
		},
		oldRows: func(users []string) ([]record.Record, error) {
			var out []record.Record
			for _, u := range users {
				var props []datastore.PropertyList
				keys, err := e.c.GetAll(ctx, datastore.NewQuery("Log").Namespace(e.oldNS).FilterField("User", "=", u), &props)
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
		},
	})
}
