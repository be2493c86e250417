package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// The staged-cutover tests migrate users' logs (user, seq → page) with
// the application library running on them, for Spanner (table Logs →
// LogsV2, a shard column in front) and Datastore (kind Log from one
// namespace to another, hashprefix on the key). Cohorts are few (100)
// so each holds several users, and the phase cache is short.
const (
	stagedBuckets = 100
	stagedTTL     = time.Second
	stagedSkew    = 500 * time.Millisecond
	stagedHold    = stagedTTL + stagedSkew
)

const (
	stagedLogsDDL   = `CREATE TABLE Logs (UserId STRING(36) NOT NULL, Seq INT64 NOT NULL, Page STRING(MAX)) PRIMARY KEY (UserId, Seq)`
	stagedLogsV2DDL = `CREATE TABLE LogsV2 (ShardId INT64 NOT NULL, UserId STRING(36) NOT NULL, Seq INT64 NOT NULL, Page STRING(MAX)) PRIMARY KEY (ShardId, UserId, Seq)`
)

// stagedApp is the application library, for either store.
type stagedApp interface {
	Write(ctx context.Context, rec record.Record) error
	WriteBatch(ctx context.Context, recs []record.Record) []error
	Delete(ctx context.Context, key record.Record) error
	Read(ctx context.Context, key record.Record) (record.Record, bool, error)
	Phases() *phases.Map
	Stats() cutover.Stats
	Close()
}

// stagedEnv is one store's staged migration: its config, phase store and
// library, and direct access to old and new that bypasses the library
// (to seed, and to look at what the stores hold).
type stagedEnv struct {
	store      string
	cfg        *config.Config
	configPath string
	migration  string
	phases     phases.Store
	app        stagedApp
	// tap, if set, is in front of the library's client of new (Spanner:
	// old and new in two databases), for faults in the second write of
	// new's faultTables.
	tap         *committap.Tap
	faultTables []string
	// users, if set, names the seeded users (default prefix-i).
	users func(prefix string, i int) string
	// cascade: seq 0 is a user's parent row and the other seqs its
	// interleaved children (Spanner): its delete deletes them, and a child
	// is written only under it.
	cascade bool

	// key is user's log seq's key alone, as the application gives it.
	key func(user string, seq int64) record.Record
	// putOld writes records to old directly; deleteOld deletes one.
	putOld    func(t *testing.T, recs ...record.Record)
	deleteOld func(t *testing.T, user string, seq int64)
	// changeNew sets a new record's page directly, or deletes it (del).
	changeNew func(t *testing.T, user string, seq int64, page string, del bool)
	// oldPages and newPages read every log of a store: "user/seq" → page.
	oldPages func(t *testing.T) map[string]string
	newPages func(t *testing.T) map[string]string
	// checkNew, if set, checks what else the shape puts in new's records
	// (the end-to-end test calls it last).
	checkNew func(t *testing.T)
}

// rec is user's log seq with page, as the application writes it.
func (e *stagedEnv) rec(user string, seq int64, page string) record.Record {
	r := e.key(user, seq)
	r.Fields = append(r.Fields, record.Field{Name: "Page", Value: record.String(page)})
	return r
}

func logID(user string, seq int64) string { return fmt.Sprintf("%s/%d", user, seq) }

// newStagedSpanner makes the Spanner env: Logs in one database, LogsV2
// and the phase store in another.
func newStagedSpanner(t *testing.T) *stagedEnv {
	t.Helper()
	ctx := context.Background()
	oldC := emulator.TestDB(t, stagedLogsDDL)
	newC := emulator.TestDB(t, append([]string{stagedLogsV2DDL}, phases.SpannerDDL...)...)
	yaml := fmt.Sprintf(`
source: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: Logs}
target: {type: spanner, project: %[1]s, instance: %[2]s, database: %[4]s, table: LogsV2}
rewrite: {strategy: shard, params: {n: 8, mode: abs}}
dead_letter: %[5]s
cohort: {user: UserId, buckets: %[6]d, cache_ttl: %[7]s, skew: %[8]s}
`, emulator.SpannerProject(), emulator.SpannerInstance(), dbID(oldC), dbID(newC), filepath.Join(t.TempDir(), "dead.jsonl"), stagedBuckets, stagedTTL, stagedSkew)
	e := &stagedEnv{store: "spanner", migration: fmt.Sprintf("logs-%d", time.Now().UnixNano()), phases: phases.SpannerStore{Client: newC}}
	e.cfg, e.configPath = loadYAML(t, yaml), writeConfig(t, yaml)
	// The library's client of new (and every client made from now on)
	// goes through a commit tap; the application's client of old, made
	// above, does not.
	tap, err := committap.Start(os.Getenv(emulator.EnvSpannerHost))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tap.Close)
	t.Setenv(emulator.EnvSpannerHost, tap.Addr())
	e.tap, e.faultTables = tap, []string{"LogsV2"}
	lib, err := cutover.OpenSpanner(ctx, oldC, e.configPath, cutover.Options{Migration: e.migration})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lib.Close)
	e.app = lib
	e.key = func(user string, seq int64) record.Record {
		return record.Record{Table: "Logs", Fields: []record.Field{{Name: "UserId", Value: record.String(user)}, {Name: "Seq", Value: record.Int(seq)}}}
	}
	e.putOld = func(t *testing.T, recs ...record.Record) {
		t.Helper()
		var ms []*spanner.Mutation
		for _, r := range recs {
			u, _ := r.Get("UserId")
			q, _ := r.Get("Seq")
			p, _ := r.Get("Page")
			ms = append(ms, spanner.InsertOrUpdate("Logs", []string{"UserId", "Seq", "Page"}, []any{u.Str, q.Int, p.Str}))
		}
		if _, err := oldC.Apply(ctx, ms); err != nil {
			t.Fatal(err)
		}
	}
	e.deleteOld = func(t *testing.T, user string, seq int64) {
		t.Helper()
		if _, err := oldC.Apply(ctx, []*spanner.Mutation{spanner.Delete("Logs", spanner.Key{user, seq})}); err != nil {
			t.Fatal(err)
		}
	}
	e.oldPages, e.newPages = spannerLogs(oldC, "Logs"), spannerLogs(newC, "LogsV2")
	e.changeNew = spannerChangeLog(newC, "LogsV2")
	return e
}

// spannerLogs reads every log of table (columns UserId, Seq, Page) of
// c's database: "user/seq" → page.
func spannerLogs(c *spanner.Client, table string) func(t *testing.T) map[string]string {
	return spannerLogsBy(c, table, "UserId")
}

// spannerLogsBy is spannerLogs with the user in column user.
func spannerLogsBy(c *spanner.Client, table, user string) func(t *testing.T) map[string]string {
	return func(t *testing.T) map[string]string {
		t.Helper()
		out := map[string]string{}
		err := c.Single().Query(context.Background(), spanner.Statement{SQL: "SELECT " + user + ", Seq, Page FROM " + table}).Do(func(r *spanner.Row) error {
			var u spanner.NullString
			var q spanner.NullInt64
			var p spanner.NullString
			if err := r.Columns(&u, &q, &p); err != nil {
				return err
			}
			out[logID(u.StringVal, q.Int64)] = p.StringVal
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
}

// spannerChangeLog sets the page of a log of table directly, or deletes
// it (stagedEnv.changeNew).
func spannerChangeLog(c *spanner.Client, table string) func(t *testing.T, user string, seq int64, page string, del bool) {
	return spannerChangeLogBy(c, table, "UserId")
}

// spannerChangeLogBy is spannerChangeLog with the user in column
// userCol.
func spannerChangeLogBy(c *spanner.Client, table, userCol string) func(t *testing.T, user string, seq int64, page string, del bool) {
	return func(t *testing.T, user string, seq int64, page string, del bool) {
		t.Helper()
		where := " WHERE " + userCol + " = @u AND Seq = @q"
		st := spanner.Statement{SQL: "UPDATE " + table + " SET Page = @p" + where, Params: map[string]any{"u": user, "q": seq, "p": page}}
		if del {
			st.SQL = "DELETE FROM " + table + where
		}
		_, err := c.ReadWriteTransaction(context.Background(), func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			n, err := txn.Update(ctx, st)
			if err == nil && n != 1 {
				err = fmt.Errorf("%d rows changed, want 1", n)
			}
			return err
		})
		if err != nil {
			t.Fatalf("changing new %s: %v", logID(user, seq), err)
		}
	}
}

// dsLog is a Log entity as the tests read it (OldKey: the old key a
// migration with keep_original_key keeps).
type dsLog struct {
	User   string
	Seq    int64
	Page   string
	OldKey *datastore.Key
	Prev   *datastore.Key
	Cust   *datastore.Key
}

// newStagedDatastore makes the Datastore env: kind Log from one namespace
// to another of the emulator's database, the phase store in the new one.
// The user id is in the key's name ("user.seq") and the User property.
func newStagedDatastore(t *testing.T) *stagedEnv {
	return newStagedDatastoreWith(t, "rewrite: {strategy: hashprefix}", false, "")
}

// newStagedDatastoreRefs is newStagedDatastore with two references in
// every log: Prev, the key of the user's first log (seq 0), rewritten with
// the logs' own keys (references: [Prev]); and Cust, the key of the
// user's Customer, which another run moves to a namespace of its own with
// hashprefix keys (references_to that run's config), so that a backfill
// rewrites it to that run's key and a reverse backfill gives it back.
func newStagedDatastoreRefs(t *testing.T) *stagedEnv {
	crm, crm2 := emulator.UniqueNamespace("staged-crm"), emulator.UniqueNamespace("staged-crm2")
	customers := writeConfig(t, fmt.Sprintf("source: {type: datastore, project: %[1]s, namespace: %[2]s, kind: Customer}\ntarget: {type: datastore, project: %[1]s, namespace: %[3]s, kind: Customer}\nrewrite: {strategy: hashprefix}\n",
		emulator.DatastoreProject(), crm, crm2))
	e := newStagedDatastoreWith(t, fmt.Sprintf("rewrite: {strategy: hashprefix}\nreferences: [Prev]\nreferences_to: [{property: Cust, config: %q}]", customers), false, crm)
	st, err := rewrite.New(rewrite.StepConfig{Strategy: "hashprefix"})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := st.Datastore()
	if err != nil {
		t.Fatal(err)
	}
	c, newNS := emulator.TestDatastore(t), e.cfg.Target.Namespace
	e.checkNew = func(t *testing.T) {
		t.Helper()
		var logs []dsLog
		if _, err := c.GetAll(context.Background(), datastore.NewQuery("Log").Namespace(newNS), &logs); err != nil {
			t.Fatal(err)
		}
		for _, l := range logs {
			want := func(k rewrite.DatastoreKey, ns string) *datastore.Key {
				nk, err := ds.Rewrite(k)
				if err != nil {
					t.Fatal(err)
				}
				nk.Namespace = ns
				return datastoredb.KeyToDatastore(nk)
			}
			cust := want(rewrite.DatastoreKey{Namespace: crm, Path: []rewrite.PathElement{{Kind: "Customer", Name: l.User}}}, crm2)
			prev := want(rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Log", Name: l.User + ".0"}}}, newNS)
			if !l.Cust.Equal(cust) || !l.Prev.Equal(prev) {
				t.Errorf("new %s: Cust %v, Prev %v; want %v (the other run's key) and %v", logID(l.User, l.Seq), l.Cust, l.Prev, cust, prev)
			}
		}
	}
	return e
}

// newStagedDatastoreGroups is newStagedDatastore with each log in its
// user's entity group: a descendant (kind Log) of the root User:<user>,
// which the migration's kind is (the roots themselves never exist); the
// rewrite changes the root only, and the user is the root's name.
func newStagedDatastoreGroups(t *testing.T) *stagedEnv {
	return newStagedDatastoreWith(t, "rewrite: {strategy: hashprefix}\nancestors: root", true, "")
}

// newStagedDatastoreKept is newStagedDatastore with keys no inverse can
// give back (UUIDv5) and the old key kept in each new entity (OldKey), so
// that a reverse backfill must read it.
func newStagedDatastoreKept(t *testing.T) *stagedEnv {
	return newStagedDatastoreWith(t, "rewrite: {strategy: uuid, params: {version: 5}}\nkeep_original_key: OldKey", false, "")
}

// newStagedDatastoreWith is newStagedDatastore with the config's rewrite
// settings rewriteYAML, the logs in their users' entity groups if
// grouped (newStagedDatastoreGroups), and a reference Cust to the user's
// Customer in namespace custNS unless it is empty (newStagedDatastoreRefs).
func newStagedDatastoreWith(t *testing.T, rewriteYAML string, grouped bool, custNS string) *stagedEnv {
	t.Helper()
	ctx := context.Background()
	c := emulator.TestDatastore(t)
	oldNS, newNS := emulator.UniqueNamespace("staged-old"), emulator.UniqueNamespace("staged-new")
	kind, user := "Log", "User"
	if grouped {
		kind, user, rewriteYAML = "User", "key:User", rewriteYAML+"\ndescendants: [Log]"
	}
	yaml := fmt.Sprintf(`
source: {type: datastore, project: %[1]s, namespace: %[2]s, kind: %[9]s}
target: {type: datastore, project: %[1]s, namespace: %[3]s, kind: %[9]s}
%[8]s
dead_letter: %[4]s
cohort: {user: %[10]s, buckets: %[5]d, cache_ttl: %[6]s, skew: %[7]s}
`, emulator.DatastoreProject(), oldNS, newNS, filepath.Join(t.TempDir(), "dead.jsonl"), stagedBuckets, stagedTTL, stagedSkew, rewriteYAML, kind, user)
	e := &stagedEnv{store: "datastore", migration: fmt.Sprintf("logs-%d", time.Now().UnixNano()), phases: phases.DatastoreStore{Client: c, Namespace: newNS}}
	e.cfg, e.configPath = loadYAML(t, yaml), writeConfig(t, yaml)
	lib, err := cutover.OpenDatastore(ctx, c, e.configPath, cutover.Options{Migration: e.migration})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lib.Close)
	e.app = lib
	oldLogsIn(e, c, oldNS, grouped, strings.Contains(rewriteYAML, "references:"), custNS)
	e.newPages = datastoreLogs(c, newNS)
	e.changeNew = func(t *testing.T, user string, seq int64, page string, del bool) {
		t.Helper()
		var logs []datastore.PropertyList
		keys, err := c.GetAll(ctx, datastore.NewQuery("Log").Namespace(newNS).FilterField("User", "=", user).FilterField("Seq", "=", seq), &logs)
		if err != nil || len(keys) != 1 {
			t.Fatalf("finding new %s: %d entities, %v", logID(user, seq), len(keys), err)
		}
		if del {
			err = c.Delete(ctx, keys[0])
		} else {
			pl := logs[0]
			for i := range pl {
				if pl[i].Name == "Page" {
					pl[i].Value = page
				}
			}
			_, err = c.Put(ctx, keys[0], &pl)
		}
		if err != nil {
			t.Fatalf("changing new %s: %v", logID(user, seq), err)
		}
	}
	return e
}

// oldLogsIn makes old of e the Log entities of namespace ns of c's
// database, keyed "user.seq" (under the root User:user if grouped; with a
// reference Prev to the user's first log if refs; with a reference Cust to
// Customer:user in namespace custNS unless it is empty), with properties
// User and Seq: e.key, putOld, deleteOld and oldPages.
func oldLogsIn(e *stagedEnv, c *datastore.Client, oldNS string, grouped, refs bool, custNS string) {
	e.key = func(user string, seq int64) record.Record {
		k := rewrite.DatastoreKey{Namespace: oldNS, Path: []rewrite.PathElement{{Kind: "Log", Name: fmt.Sprintf("%s.%d", user, seq)}}}
		if grouped {
			k.Path = append([]rewrite.PathElement{{Kind: "User", Name: user}}, k.Path...)
		}
		r := record.Record{Table: "Log", Key: &k, Fields: []record.Field{{Name: "User", Value: record.String(user)}, {Name: "Seq", Value: record.Int(seq)}}}
		if refs {
			first := rewrite.DatastoreKey{Namespace: oldNS, Path: []rewrite.PathElement{{Kind: "Log", Name: user + ".0"}}}
			r.Fields = append(r.Fields, record.Field{Name: "Prev", Value: record.Key(first)})
		}
		if custNS != "" {
			cust := rewrite.DatastoreKey{Namespace: custNS, Path: []rewrite.PathElement{{Kind: "Customer", Name: user}}}
			r.Fields = append(r.Fields, record.Field{Name: "Cust", Value: record.Key(cust)})
		}
		return r
	}
	e.putOld = func(t *testing.T, recs ...record.Record) {
		t.Helper()
		putEntities(t, c, recs)
	}
	e.deleteOld = func(t *testing.T, user string, seq int64) {
		t.Helper()
		var parent *datastore.Key
		if grouped {
			parent = datastore.NameKey("User", user, nil)
			parent.Namespace = oldNS
		}
		k := datastore.NameKey("Log", fmt.Sprintf("%s.%d", user, seq), parent)
		k.Namespace = oldNS
		if err := c.Delete(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	e.oldPages = datastoreLogs(c, oldNS)
}

// datastoreLogs reads every Log entity of namespace ns: "user/seq" →
// page.
func datastoreLogs(c *datastore.Client, ns string) func(t *testing.T) map[string]string {
	return func(t *testing.T) map[string]string {
		t.Helper()
		var logs []dsLog
		if _, err := c.GetAll(context.Background(), datastore.NewQuery("Log").Namespace(ns), &logs); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, l := range logs {
			out[logID(l.User, l.Seq)] = l.Page
		}
		return out
	}
}

// stagedEnvs are the two stores' envs, by name.
// cohortRunner is the runner the staged tests' cohort jobs run on: prism
// (its SDK worker in the test process), or universal with the workers in
// processes of their own (TestOnWorkerPool).
var cohortRunner = "prism"

// stagedShape is one shape of migration the staged tests run: a name
// and the env that sets it up; alone if that env points the process's
// emulator variable at a commit tap of its own (t.Setenv), which keeps
// it from running beside the others.
type stagedShape struct {
	name  string
	make  func(t *testing.T) *stagedEnv
	alone bool
}

var stagedEnvs = []stagedShape{
	{"spanner", newStagedSpanner, true},
	{"datastore", newStagedDatastore, false},
}

// stagedShapes are the envs the end-to-end test runs: stagedEnvs and the
// other shapes of migration the staged cutover takes.
var stagedShapes = slices.Concat(stagedEnvs, []stagedShape{
	{"datastore keep_original_key", newStagedDatastoreKept, false},
	{"datastore entity groups", newStagedDatastoreGroups, false},
	{"datastore references", newStagedDatastoreRefs, false},
	{"spanner interleaved", newStagedInterleaved, true},
}, stagedCross)

// move moves cohorts to phase by the rules, as the operator does.
func (e *stagedEnv) move(t *testing.T, rs []cohort.Range, to phases.Phase) {
	t.Helper()
	if _, _, err := e.phases.Move(context.Background(), phases.Move{Migration: e.migration, Buckets: stagedBuckets, Cohorts: rs, To: to, Who: "test", Rules: phases.RulesFor(e.cfg)}); err != nil {
		t.Fatalf("move %s to %s: %v", cohort.Format(rs), to, err)
	}
}

// waitSeen waits until the library acts on cohort c's phase p.
func (e *stagedEnv) waitSeen(t *testing.T, c int, p phases.Phase) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); e.app.Phases().Phase(c) != p; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the library did not see cohort %d move to %s", c, p)
		}
	}
	// A move that switches the authoritative store takes effect once
	// every instance knows it.
	if sp := e.app.Phases().SpanOf(c); sp.SwitchesAuthority() {
		time.Sleep(time.Until(sp.Since.Add(stagedHold)))
	}
}

// backfill runs a cohort backfill of rs on runner.
func (e *stagedEnv) backfill(t *testing.T, runner string, rs []cohort.Range, force bool) (*migration.Result, *phases.Audit, error) {
	t.Helper()
	_, res, a, err := operator.Backfill(context.Background(), e.cfg, operator.CohortOptions{Migration: e.migration, Cohorts: rs, Force: force, Who: "test-backfill", Run: migration.Options{CreateTarget: true}}, pipeline.Runner{Runner: runner})
	return res, a, err
}

// cohortOf is user's cohort.
func cohortOf(user string) int { return cohort.Of(user, stagedBuckets) }

// cohortsOf is the cohorts of users, merged, and the set of them.
func cohortsOf(users []string) ([]cohort.Range, map[int]bool) {
	var rs []cohort.Range
	in := map[int]bool{}
	for _, u := range users {
		in[cohortOf(u)] = true
		rs = append(rs, one(cohortOf(u))...)
	}
	return cohort.Merge(rs), in
}

// one is the range of cohort c alone.
func one(c int) []cohort.Range { return []cohort.Range{{First: c, Last: c}} }
