package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// stagedLogsXDDL is the Spanner table the Datastore → Spanner staged
// tests move kind Log into: the entity's key name in LogKey, a ShardId in
// front (shard), the properties User, Seq and Page as columns.
const stagedLogsXDDL = `CREATE TABLE LogsX (ShardId INT64 NOT NULL, LogKey STRING(MAX) NOT NULL, User STRING(36), Seq INT64, Page STRING(MAX)) PRIMARY KEY (ShardId, LogKey)`

// newStagedDatastoreSpanner makes the Datastore → Spanner env: kind Log
// of a namespace of the Datastore emulator's database (as
// newStagedDatastore's old) into table LogsX of a Spanner database,
// which holds the phase store.
func newStagedDatastoreSpanner(t *testing.T) *stagedEnv {
	t.Helper()
	ctx := context.Background()
	c := emulator.TestDatastore(t)
	newC := emulator.TestDB(t, append([]string{stagedLogsXDDL}, phases.SpannerDDL...)...)
	oldNS := emulator.UniqueNamespace("staged-x")
	yaml := fmt.Sprintf(`
source: {type: datastore, project: %[1]s, namespace: %[2]s, kind: Log, key: "LogKey STRING(MAX)"}
target: {type: spanner, project: %[3]s, instance: %[4]s, database: %[5]s, table: LogsX}
rewrite: {strategy: shard, params: {n: 8, mode: abs}}
dead_letter: %[6]s
cohort: {user: User, buckets: %[7]d, cache_ttl: %[8]s, skew: %[9]s}
`, emulator.DatastoreProject(), oldNS, emulator.SpannerProject(), emulator.SpannerInstance(), dbID(newC), filepath.Join(t.TempDir(), "dead.jsonl"), stagedBuckets, stagedTTL, stagedSkew)
	e := &stagedEnv{store: "datastore-spanner", migration: fmt.Sprintf("logs-%d", time.Now().UnixNano()), phases: phases.SpannerStore{Client: newC}}
	e.cfg, e.configPath = loadYAML(t, yaml), writeConfig(t, yaml)
	// The library's client of new (and every Spanner client made from
	// now on) goes through a commit tap.
	tap, err := committap.Start(os.Getenv(emulator.EnvSpannerHost))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tap.Close)
	t.Setenv(emulator.EnvSpannerHost, tap.Addr())
	e.tap, e.faultTables = tap, []string{"LogsX"}
	lib, err := cutover.OpenDatastoreSpanner(ctx, c, e.configPath, cutover.Options{Migration: e.migration})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lib.Close)
	e.app = lib
	oldLogsIn(e, c, oldNS, false, false, "")
	e.newPages = spannerLogsBy(newC, "LogsX", "User")
	e.changeNew = spannerChangeLogBy(newC, "LogsX", "User")
	return e
}

// stagedCross are the envs of migrations from one store to the other,
// run by the cohort jobs that take them.
var stagedCross = []stagedShape{{"datastore to spanner", newStagedDatastoreSpanner, true}}

// TestStagedDatastoreSpannerStrictColumns: a cohort backfill from
// Datastore to Spanner does not flatten a key-valued property into a
// column (the library's reads of new could not give it back): the entity
// goes to the dead letters with the property named, the others are
// copied, and the cohort stays in dual_write.
func TestStagedDatastoreSpannerStrictColumns(t *testing.T) {
	e := newStagedDatastoreSpanner(t)
	const user = "strict-user"
	bad := e.rec(user, 1, "with a key")
	ref := rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Page", ID: 7}}}
	bad.Fields = append(bad.Fields, record.Field{Name: "Ref", Value: record.Key(ref)})
	e.putOld(t, e.rec(user, 0, "plain"), bad)
	e.move(t, one(cohortOf(user)), phases.DualWrite)
	e.waitSeen(t, cohortOf(user), phases.DualWrite)
	waitHold()
	res, a, err := e.backfill(t, "prism", one(cohortOf(user)), false)
	if !errors.Is(err, operator.ErrBackfillIncomplete) || a != nil {
		t.Fatalf("backfill: %v (audit %+v); want it incomplete, the cohort not moved", err, a)
	}
	if c := res.Counters; c[migration.Written] != 1 || c[migration.DeadLettered] != 1 {
		t.Errorf("counters %s; want 1 written, 1 dead-lettered", c)
	}
	dead := readDeadLetters(t, e.cfg.DeadLetter)
	if len(dead) != 1 || !strings.Contains(dead[0].Reason, "property Ref holds a key") {
		t.Errorf("dead letters %+v; want the entity with its property named", dead)
	}
	if got := e.newPages(t); len(got) != 1 || got[logID(user, 0)] != "plain" {
		t.Errorf("new holds %v; want only %s", got, logID(user, 0))
	}
}
