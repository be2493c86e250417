package cutover_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// logsXDDL is the new table of the Datastore → Spanner migration: the
// entity's key name in LogKey, a ShardId in front (shard), the
// properties as columns.
const logsXDDL = `CREATE TABLE LogsX (ShardId INT64 NOT NULL, LogKey STRING(MAX) NOT NULL, UserId STRING(MAX), Page STRING(MAX), Hits INT64) PRIMARY KEY (ShardId, LogKey)`

// crossEnv is a Datastore → Spanner migration of kind Log (key names
// "user.seq", properties UserId and Page) into the Spanner table LogsX
// with the library on it; the user id is the UserId property.
type crossEnv struct {
	lib        *cutover.DatastoreSpanner
	c          *datastore.Client
	newC       *spanner.Client
	store      phases.SpannerStore
	migration  string
	configPath string
	ns         string
}

func newCrossEnv(t *testing.T) *crossEnv { return newCrossEnvVia(t, nil, nil) }

// newCrossEnvVia is newCrossEnv with the clients of old (the
// application's) and of new (the library's, and the test's reads of new)
// going to the emulators through the taps oldVia and newVia (nil: the
// emulator itself).
func newCrossEnvVia(t *testing.T, oldVia, newVia *committap.Tap) *crossEnv {
	t.Helper()
	if newVia != nil {
		t.Setenv(emulator.EnvSpannerHost, newVia.Addr())
	}
	newC := emulator.TestDB(t, append([]string{logsXDDL}, phases.SpannerDDL...)...)
	if oldVia != nil {
		t.Setenv(emulator.EnvDatastoreHost, oldVia.Addr())
	}
	e := &crossEnv{c: emulator.TestDatastore(t), newC: newC, ns: emulator.UniqueNamespace("cross"), migration: fmt.Sprintf("cross-%d", time.Now().UnixNano())}
	db := newC.DatabaseName()[strings.LastIndex(newC.DatabaseName(), "/")+1:]
	e.configPath = filepath.Join(t.TempDir(), "rekey.yaml")
	if err := os.WriteFile(e.configPath, []byte(fmt.Sprintf(`
source: {type: datastore, project: %[1]s, namespace: %[2]s, kind: Log, key: "LogKey STRING(MAX)"}
target: {type: spanner, project: %[3]s, instance: %[4]s, database: %[5]s, table: LogsX}
rewrite: {strategy: shard, params: {n: 8, mode: abs}}
cohort: {user: UserId, %[6]s}
`, emulator.DatastoreProject(), e.ns, emulator.SpannerProject(), emulator.SpannerInstance(), db, envCohortTiming)), 0o644); err != nil {
		t.Fatal(err)
	}
	e.lib = e.open(t)
	e.store = phases.SpannerStore{Client: newC}
	return e
}

func (e *crossEnv) open(t *testing.T) *cutover.DatastoreSpanner {
	t.Helper()
	lib, err := cutover.OpenDatastoreSpanner(context.Background(), e.c, e.configPath, cutover.Options{Migration: e.migration, CacheTTL: envTTL, Skew: envSkew, NewSpannerClient: e.newC})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lib.Close)
	return lib
}

func (e *crossEnv) key(user string, seq int64) record.Record {
	k := rewrite.DatastoreKey{Namespace: e.ns, Path: []rewrite.PathElement{{Kind: "Log", Name: fmt.Sprintf("%s.%d", user, seq)}}}
	return record.Record{Table: "Log", Key: &k, Fields: []record.Field{{Name: "UserId", Value: record.String(user)}}}
}

func (e *crossEnv) entity(user string, seq int64, page string) record.Record {
	r := e.key(user, seq)
	r.Fields = append(r.Fields, record.Field{Name: "Page", Value: record.String(page)}, record.Field{Name: "Hits", Value: record.Int(seq)})
	return r
}

// oldPages are the Page values of user's entities in old.
func (e *crossEnv) oldPages(t *testing.T, user string) []string {
	t.Helper()
	var ents []struct {
		UserId, Page string
		Hits         int64
	}
	if _, err := e.c.GetAll(context.Background(), datastore.NewQuery("Log").Namespace(e.ns).FilterField("UserId", "=", user), &ents); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range ents {
		out = append(out, x.Page)
	}
	return out
}

func (e *crossEnv) setPhase(t *testing.T, user string, p phases.Phase) {
	t.Helper()
	movePhase(t, e.store, e.migration, e.lib, user, p)
}

// TestDatastoreSpannerRouting: the package doc's table for a Datastore
// kind moving into a Spanner table: each phase writes the entity, the
// row or both; reads give back the entity as written, under its old key,
// from whichever store the phase reads; deletes reach the same stores.
func TestDatastoreSpannerRouting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newCrossEnv(t)
	for _, p := range phases.Phases {
		user := "user-" + string(p)
		e.setPhase(t, user, p)
		if err := e.lib.Write(ctx, e.entity(user, 7, "v1")); err != nil {
			t.Fatalf("%s: write: %v", p, err)
		}
		w := writtenIn[p]
		if got := e.oldPages(t, user); (len(got) == 1 && got[0] == "v1") != w.old {
			t.Errorf("%s: old holds %q, want written %v", p, got, w.old)
		}
		if got := pagesWhere(t, e.newC, "LogsX", "UserId", user, "LogKey"); (len(got) == 1 && got[0] == "v1") != w.new {
			t.Errorf("%s: new holds %q, want written %v", p, got, w.new)
		}
		got, found, err := e.lib.Read(ctx, e.key(user, 7))
		if err != nil || !found {
			t.Fatalf("%s: read: found %v, %v", p, found, err)
		}
		want := e.entity(user, 7, "v1")
		if d := record.Diff(&got, &want); d != "" || got.Key.String() != want.Key.String() {
			t.Errorf("%s: read %s (%s); want the entity as written, under its old key", p, got.Describe(), d)
		}
		if err := e.lib.Delete(ctx, e.key(user, 7)); err != nil {
			t.Fatalf("%s: delete: %v", p, err)
		}
		if _, found, err := e.lib.Read(ctx, e.key(user, 7)); err != nil || found {
			t.Errorf("%s: read after delete: found %v, %v", p, found, err)
		}
		if n := len(e.oldPages(t, user)) + len(pagesWhere(t, e.newC, "LogsX", "UserId", user, "LogKey")); n != 0 {
			t.Errorf("%s: %d records left after the delete", p, n)
		}
	}
	if st := e.lib.Stats(); st.Writes[phases.Shadow] != 1 || st.ShadowReads != 2 || st.ShadowMismatches != 0 {
		t.Errorf("stats: %+v", st)
	}
}

// TestDatastoreSpannerRefusesFlattened: a property that a Spanner column
// keeps only as text (here a key) is refused where new is written, with
// the property named; old alone still takes it.
func TestDatastoreSpannerRefusesFlattened(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newCrossEnv(t)
	rec := e.entity("flat", 1, "v1")
	other := rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Page", ID: 3}}}
	rec.Fields = append(rec.Fields, record.Field{Name: "Ref", Value: record.Value{Kind: record.KindKey, Key: &other}})
	if err := e.lib.Write(ctx, rec); err != nil {
		t.Fatalf("old: %v", err)
	}
	e.setPhase(t, "flat", phases.ReadNew)
	err := e.lib.Write(ctx, rec)
	if err == nil || !strings.Contains(err.Error(), "property Ref holds a key") {
		t.Fatalf("read_new: %v; want the key-valued property refused by name", err)
	}
}

// TestDatastoreSpannerConcurrentCutover is TestSpannerConcurrentCutover
// for a Datastore kind moving into a Spanner table. Old and new share no
// transaction, so new's data commits fail now and then (a tenth of them,
// refused or applied with the response lost) until read_new: what new
// missed while old was authoritative goes to the repair log, and the
// operator's repair in read_new must put it right before new_only.
func TestDatastoreSpannerConcurrentCutover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newCrossEnv(t)
	// The library's client of new goes through the tap (t.Setenv, as
	// newCrossEnvVia uses, would keep the test from running in parallel).
	tapNew, err := committap.Start(os.Getenv(emulator.EnvSpannerHost))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tapNew.Close)
	viaTap, err := spanner.NewClient(ctx, e.newC.DatabaseName(), option.WithEndpoint(tapNew.Addr()), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(viaTap.Close)
	open := func() *cutover.DatastoreSpanner {
		lib, err := cutover.OpenDatastoreSpanner(ctx, e.c, e.configPath, cutover.Options{Migration: e.migration, CacheTTL: envTTL, Skew: envSkew, NewSpannerClient: viaTap})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(lib.Close)
		return lib
	}
	tapNew.SetFaults(committap.Faults{Rate: 0.1, Seed: 11, Tables: []string{"LogsX"}, Kinds: []committap.Fault{
		{Code: codes.PermissionDenied}, {Code: codes.DeadlineExceeded, Lost: true},
	}})
	concurrentCutover(t, fixture{
		faultsOff: func() { tapNew.SetFaults(committap.Faults{}) },
		libs:      []app{open(), open()}, store: e.store, migration: e.migration, row: e.entity, key: e.key, configPath: e.configPath,
		seed: func(recs []record.Record) error {
			_, err := datastoredb.NewWriter(e.c).Write(ctx, recs)
			return err
		},
		oldRows: func(users []string) ([]record.Record, error) { return entitiesOf(e.c, e.ns, "UserId", users) },
	})
}

// TestDatastoreSpannerBackfillRow: a backfill's write of an old entity
// puts its row in new; once the application has written the record in
// dual_write, a backfill of the value it read before is skipped, and
// read_new reads the application's value.
func TestDatastoreSpannerBackfillRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newCrossEnv(t)
	if err := e.lib.Write(ctx, e.entity("bf", 1, "seed")); err != nil {
		t.Fatal(err)
	}
	e.setPhase(t, "bf", phases.DualWrite)
	if wrote, err := e.lib.BackfillRow(ctx, e.entity("bf", 1, "seed")); err != nil || !wrote {
		t.Fatalf("backfill: wrote %v, %v; want written", wrote, err)
	}
	if got := pagesWhere(t, e.newC, "LogsX", "UserId", "bf", "LogKey"); len(got) != 1 || got[0] != "seed" {
		t.Fatalf("new holds %q after the backfill; want [seed]", got)
	}
	if err := e.lib.Write(ctx, e.entity("bf", 1, "app")); err != nil {
		t.Fatal(err)
	}
	if wrote, err := e.lib.BackfillRow(ctx, e.entity("bf", 1, "seed")); err != nil || wrote {
		t.Fatalf("stale backfill: wrote %v, %v; want skipped", wrote, err)
	}
	e.setPhase(t, "bf", phases.ReadNew)
	got, found, err := e.lib.Read(ctx, e.key("bf", 1))
	if v, _ := got.Get("Page"); err != nil || !found || v.Str != "app" {
		t.Fatalf("read_new: %s, %v, %v; want the application's write", got.Describe(), found, err)
	}
}

// TestDatastoreSpannerMissedWrites is TestDatastoreMissedWrites for a
// Datastore kind moving into a Spanner table: a delete in read_new that
// reached new and not old is never undone by a read, and RepairOld puts
// it right in old.
func TestDatastoreSpannerMissedWrites(t *testing.T) { checkMissedWrites(t, crossMissedEnv(t)) }

// crossMissedEnv is spannerMissedEnv for Datastore → Spanner: old in the
// Datastore emulator, new in the Spanner emulator, each behind a tap.
func crossMissedEnv(t *testing.T) missedEnv {
	tapOld, _ := twoTaps(t, emulator.EnvDatastoreHost)
	tapNew, _ := twoTaps(t, emulator.EnvSpannerHost)
	e := newCrossEnvVia(t, tapOld, tapNew)
	return missedEnv{
		lib: e.lib, store: e.store, migration: e.migration, tapOld: tapOld, tapNew: tapNew,
		oldTable: "Log", newTable: "LogsX", setPhase: e.setPhase, row: e.entity, key: e.key,
		oldHas: e.oldPages,
		newHas: func(t *testing.T, user string) []string {
			return pagesWhere(t, e.newC, "LogsX", "UserId", user, "LogKey")
		},
	}
}
