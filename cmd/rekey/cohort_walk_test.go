package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
)

// phaseStoreConfigs writes a config for each phase store: a Spanner
// migration in one database (source table S, whose rows the test writes;
// new table T and the phase store's tables not yet created) and a
// Datastore migration between two fresh namespaces, with extra appended
// to its cohort section; the Spanner database's client comes along.
func phaseStoreConfigs(t *testing.T, extra string) (cfgs map[string]string, c *spanner.Client) {
	t.Helper()
	c = emulator.TestDB(t, "CREATE TABLE S (Id INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (Id)")
	db := c.DatabaseName()[strings.LastIndex(c.DatabaseName(), "/")+1:]
	emulator.RequireDatastore(t)
	return map[string]string{
		"spanner": writeTestConfig(t, fmt.Sprintf(`
source: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: S}
target: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: T}
rewrite: {strategy: bitreverse}
cohort: {user: Id%[4]s}
`, emulator.SpannerProject(), emulator.SpannerInstance(), db, extra)),
		"datastore": writeTestConfig(t, fmt.Sprintf(`
source: {type: datastore, project: %[1]s, namespace: %[2]s, kind: K}
target: {type: datastore, project: %[1]s, namespace: %[3]s, kind: K}
rewrite: {strategy: hashprefix}
cohort: {user: "key:K"%[4]s}
`, emulator.DatastoreProject(), emulator.UniqueNamespace(t.Name()+"old"), emulator.UniqueNamespace(t.Name()+"new"), extra)),
	}, c
}

// cohortCLI runs rekey with -c cfg --migration m after args.
func cohortCLI(cfg string) func(args ...string) (string, error) {
	return func(args ...string) (string, error) {
		var out, errw bytes.Buffer
		err := run(context.Background(), append(args, "-c", cfg, "--migration", "m"), strings.NewReader(""), &out, &errw)
		return out.String() + errw.String(), err
	}
}

// hasPhaseStore says whether the Spanner database has the phase store's
// tables.
func hasPhaseStore(t *testing.T, c *spanner.Client) bool {
	t.Helper()
	var n int64
	err := c.Single().Query(context.Background(), spanner.Statement{SQL: "SELECT COUNT(*) FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = '' AND TABLE_NAME = @t", Params: map[string]any{"t": phases.SpannerMigrationTable}}).Do(func(r *spanner.Row) error { return r.Columns(&n) })
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// Before the first move `cohort status` shows every cohort old on either
// store, without creating the phase store; `cohort log` shows no move;
// prepare creates it. No message names a Go function.
func TestCohortStatusBeforeFirstMove(t *testing.T) {
	cfgs, c := phaseStoreConfigs(t, ", buckets: 100")
	outs := map[string]string{}
	for _, store := range []string{"spanner", "datastore"} {
		rekey := cohortCLI(cfgs[store])
		out, err := rekey("cohort", "status")
		if err != nil {
			t.Fatalf("%s: status before the first move: %v\n%s", store, err, out)
		}
		if !regexp.MustCompile(`(?m)^0-99 +old +100 +100\.00% +- +- +never moved\n`).MatchString(out) || !strings.Contains(out, "no move yet (every cohort old)") {
			t.Errorf("%s: status before the first move:\n%s", store, out)
		}
		outs[store] = out
		if out, err := rekey("cohort", "log"); err != nil || strings.Count(out, "\n") != 1 {
			t.Errorf("%s: log before the first move: %v\n%s", store, err, out)
		}
	}
	if outs["spanner"] != outs["datastore"] {
		t.Errorf("status differs before the first move:\nspanner:\n%s\ndatastore:\n%s", outs["spanner"], outs["datastore"])
	}
	if hasPhaseStore(t, c) {
		t.Fatal("status or log created the phase store's tables")
	}
	// A library read of the missing store says so, naming no function.
	_, err := phases.SpannerStore{Client: c}.Load(context.Background(), "m")
	if !errors.Is(err, phases.ErrNoPhaseStore) || !strings.Contains(err.Error(), "rekey cohort prepare") || regexp.MustCompile(`[A-Z][a-z]+[A-Z]\w*Tables`).MatchString(err.Error()) {
		t.Errorf("loading a missing phase store: %v", err)
	}
}

// A staged cutover cannot start half-ready: before 'rekey cohort
// prepare', an advance to dual_write is refused, naming what is missing
// (the phase store's tables, the new table) and the command that makes
// it, and moves nothing; prepare creates the new table and the phase
// store and says the migration is ready (again: nothing more to do);
// then the advance moves. A new table dropped later stops the next
// advance, while a rollback still goes.
func TestCohortAdvanceRefusedUntilPrepared(t *testing.T) {
	cfgs, c := phaseStoreConfigs(t, ", buckets: 100")
	rekey := cohortCLI(cfgs["spanner"])
	out, err := rekey("cohort", "advance", "--cohorts", "0", "--to", "dual_write")
	for _, want := range []string{"not ready", "table RekeyCutover", "table RekeyRepair", "table RekeyTouched", "the application library does not open", "table T not found", "rekey cohort prepare -c CONFIG --migration m"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("advance before prepare: %v; want it refused saying %q\n%s", err, want, out)
		}
	}
	if hasPhaseStore(t, c) {
		t.Fatal("a refused advance created the phase store")
	}
	out, err = rekey("cohort", "prepare")
	if err != nil || !strings.Contains(out, "CREATE TABLE T") || !strings.Contains(out, "created the phase store: table RekeyCutover") || !strings.Contains(out, "migration m is ready") {
		t.Fatalf("prepare: %v\n%s", err, out)
	}
	if out, err = rekey("cohort", "prepare"); err != nil || strings.Contains(out, "created the phase store") || !strings.Contains(out, "migration m is ready") {
		t.Errorf("prepare again: %v\n%s", err, out)
	}
	if out, err := rekey("cohort", "advance", "--cohorts", "0", "--to", "dual_write"); err != nil || !strings.Contains(out, "moved cohorts 0 from old to dual_write (version 1)") {
		t.Fatalf("advance after prepare: %v\n%s", err, out)
	}
	if err := spannerDDL(context.Background(), c.DatabaseName(), []string{"DROP TABLE T"}); err != nil {
		t.Fatal(err)
	}
	if out, err := rekey("cohort", "advance", "--cohorts", "1", "--to", "dual_write"); err == nil || !strings.Contains(err.Error(), "the application library does not open") || strings.Contains(out, "moved") {
		t.Errorf("advance without the new table: %v\n%s", err, out)
	}
	if out, err := rekey("cohort", "rollback", "--cohorts", "0", "--to", "old"); err != nil || !strings.Contains(out, "moved cohorts 0 from dual_write to old") {
		t.Errorf("rollback without the new table: %v\n%s", err, out)
	}
	// The Datastore migration needs nothing created; prepare says it is ready.
	if out, err := cohortCLI(cfgs["datastore"])("cohort", "prepare"); err != nil || !strings.Contains(out, "migration m is ready") {
		t.Errorf("prepare on Datastore: %v\n%s", err, out)
	}
}

// The README's walk-through, with --percent steps mixed in, on either
// phase store: --percent P --to PHASE makes P% of the users be at PHASE
// or beyond; --cohorts A-B --to PHASE leaves the cohorts at PHASE already
// and moves the rest, and still refuses a move back or past a phase.
func TestCohortWalkThroughWithPercent(t *testing.T) {
	cfgs, _ := phaseStoreConfigs(t, ", cache_ttl: 200ms, skew: 100ms")
	const hold = 400 * time.Millisecond // cache_ttl + skew, and a little more
	for _, store := range []string{"spanner", "datastore"} {
		t.Run(store, func(t *testing.T) {
			rekey := cohortCLI(cfgs[store])
			if out, err := rekey("cohort", "prepare"); err != nil {
				t.Fatalf("prepare: %v\n%s", err, out)
			}
			step := func(want string, args ...string) string {
				t.Helper()
				out, err := rekey(append([]string{"cohort"}, args...)...)
				if err != nil || !strings.Contains(out, want) {
					t.Fatalf("%v: %v; want %q\n%s", args, err, want, out)
				}
				return out
			}
			step("moved cohorts 0-99 from old to dual_write", "advance", "--percent", "1", "--to", "dual_write")
			// From 1% to 100% in one step is refused: at most 10 times as many.
			if out, err := rekey("cohort", "advance", "--cohorts", "100-9999", "--to", "dual_write"); err == nil || !strings.Contains(err.Error(), "from 1.00% to 100.00% in one step, more than 10 times as many (--max-growth): at most 900 more cohorts now; --force") {
				t.Errorf("from 1%% to 100%% at once: %v\n%s", err, out)
			}
			// The walk-through's first line, after --percent 1 did it.
			step("cohorts 0-99 are at dual_write already: nothing to move", "advance", "--cohorts", "0-99", "--to", "dual_write")
			for _, to := range []string{"backfilled", "verified", "shadow", "read_new", "new_only", "done"} {
				time.Sleep(hold)
				step("moved cohorts 0-99 from ", "advance", "--cohorts", "0-99", "--to", to)
			}
			out := step("moved cohorts 100-199 from old to dual_write", "advance", "--percent", "2", "--to", "dual_write")
			for _, want := range []string{"1.00% of the users are at dual_write or beyond (100 cohorts); for 2%: cohorts 100-199 (1.00%) move", "2.00% of the users are at dual_write or beyond now (200 cohorts)"} {
				if !strings.Contains(out, want) {
					t.Errorf("--percent 2 does not say %q:\n%s", want, out)
				}
			}
			if out, err := rekey("cohort", "advance", "--percent", "5", "--to", "dual_write", "--dwell", "0s"); err == nil || !strings.Contains(err.Error(), "2.00% of the users are at dual_write or beyond now; 5% would be more than 2 times as many in one step: at most 4.00% now") {
				t.Errorf("--percent 5 after 2: %v\n%s", err, out)
			}
			step("nothing to move", "advance", "--percent", "1.5", "--to", "dual_write")
			// The walk-through's next range takes in the cohorts --percent moved.
			out = step("moved cohorts 200-999 from old to dual_write", "advance", "--cohorts", "100-999", "--to", "dual_write")
			if !strings.Contains(out, "cohorts 100-199 are at dual_write already: left as they are") || !strings.Contains(out, "10.00% of the users are at dual_write or beyond now") {
				t.Errorf("--cohorts 100-999 does not say what it left:\n%s", out)
			}
			// Still refused: a move back, a phase skipped, each writing nothing.
			if out, err := rekey("cohort", "advance", "--cohorts", "0-199", "--to", "dual_write"); err == nil || !errors.Is(err, phases.ErrIllegal) || !strings.Contains(err.Error(), "cohorts 0-99 are beyond dual_write (done): advance moves cohorts forward only") {
				t.Errorf("advancing done cohorts back to dual_write: %v\n%s", err, out)
			}
			if out, err := rekey("cohort", "advance", "--cohorts", "100-999", "--to", "verified"); err == nil || !strings.Contains(err.Error(), "verified needs backfilled") {
				t.Errorf("skipping backfilled: %v\n%s", err, out)
			}
			if out, err := rekey("cohort", "rollback", "--cohorts", "900-1000", "--to", "dual_write"); err == nil || !strings.Contains(err.Error(), "cohorts 1000 are before dual_write (old): rollback moves cohorts back only") {
				t.Errorf("rolling old cohorts forward: %v\n%s", err, out)
			}
			out = step("version 9", "status")
			if !regexp.MustCompile(`(?m)^100-999 +dual_write +900 +9\.00% `).MatchString(out) {
				t.Errorf("status after the walk-through:\n%s", out)
			}
			// --percent to a later phase takes the next cohorts that may move there.
			time.Sleep(hold)
			step("moved cohorts 100-199 from dual_write to backfilled", "advance", "--percent", "2", "--to", "backfilled")
			if out, err := rekey("cohort", "advance", "--percent", "3", "--to", "verified", "--dwell", "0s", "--max-growth", "4"); err == nil || !strings.Contains(err.Error(), "cohorts 200-9999 cannot: 200-999 dual_write; 1000-9999 old; verified needs backfilled") {
				t.Errorf("--percent past what may move: %v\n%s", err, out)
			}
		})
	}
}
