package cutover_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/record"
)

// missedEnv is what checkMissedWrites needs of a store: the library with
// old's and new's commits each through a tap of their own.
type missedEnv struct {
	lib interface {
		app
		RepairOld(context.Context, []phases.RepairEntry) ([]phases.RepairEntry, error)
	}
	store          phases.Store
	migration      string
	tapOld, tapNew *committap.Tap
	// oldTable and newTable are the data tables (kinds) of old and new.
	oldTable, newTable string
	setPhase           func(t *testing.T, user string, p phases.Phase)
	row                func(user string, seq int64, page string) record.Record
	key                func(user string, seq int64) record.Record
	oldHas, newHas     func(t *testing.T, user string) []string
}

// TestSpannerMissedWrites and TestDatastoreMissedWrites: old and new in
// two databases, a delete in read_new that reached new and not old (old's
// commit failed; or new's response was lost, so the call failed) is never
// undone by a read — not in read_new, not after a rollback to dual_write
// — and a repair in read_new applies it to old; a rollback to old is
// refused until then. Before the touched marks said which store is
// behind, read_new fell back to old for a record new lacked and returned
// the deleted value.
func TestSpannerMissedWrites(t *testing.T)   { checkMissedWrites(t, spannerMissedEnv(t)) }
func TestDatastoreMissedWrites(t *testing.T) { checkMissedWrites(t, datastoreMissedEnv(t)) }

// spannerMissedEnv is a Spanner library whose old and new are two
// databases, each behind a tap of its own.
func spannerMissedEnv(t *testing.T) missedEnv {
	tapOld, tapNew := twoTaps(t, emulator.EnvSpannerHost)
	e := newSpannerEnvVia(t, false, "", tapOld.Addr(), tapNew.Addr())
	return missedEnv{
		lib: e.lib, store: e.store, migration: e.migration, tapOld: tapOld, tapNew: tapNew,
		oldTable: "Logs", newTable: "LogsV2", setPhase: e.setPhase, row: logRow, key: logKey,
		oldHas: func(t *testing.T, user string) []string { return pages(t, e.old, "Logs", user) },
		newHas: func(t *testing.T, user string) []string { return pages(t, e.new, "LogsV2", user) },
	}
}

// datastoreMissedEnv is the same for Datastore: the test's own clients
// (old's, and its reads of new) go through tapOld, the library's client of
// new through tapNew; both sides' entities are of kind Log.
func datastoreMissedEnv(t *testing.T) missedEnv {
	tapOld, tapNew := twoTaps(t, emulator.EnvDatastoreHost)
	t.Setenv(emulator.EnvDatastoreHost, tapOld.Addr())
	e := newDSEnvIn(t, dsNewDatabase, func() { t.Setenv(emulator.EnvDatastoreHost, tapNew.Addr()) })
	return missedEnv{
		lib: e.lib, store: e.store, migration: e.migration, tapOld: tapOld, tapNew: tapNew,
		oldTable: "Log", newTable: "Log", setPhase: e.setPhase, row: e.entity, key: e.key,
		oldHas: func(t *testing.T, user string) []string { return e.pagesIn(t, e.oldNS, user) },
		newHas: func(t *testing.T, user string) []string { return e.pagesIn(t, e.newNS, user) },
	}
}

// twoTaps starts two commit taps in front of the emulator at the address
// in the environment variable hostEnv.
func twoTaps(t *testing.T, hostEnv string) (*committap.Tap, *committap.Tap) {
	if hostEnv == emulator.EnvSpannerHost {
		emulator.RequireSpanner(t)
	} else {
		emulator.RequireDatastore(t)
	}
	var taps [2]*committap.Tap
	for i := range taps {
		tp, err := committap.Start(os.Getenv(hostEnv))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tp.Close)
		taps[i] = tp
	}
	return taps[0], taps[1]
}

func checkMissedWrites(t *testing.T, e missedEnv) {
	ctx := context.Background()
	user := "user-missed"
	c := cohort.Of(user, cohort.DefaultBuckets)
	read := func(when string) (string, bool) {
		t.Helper()
		got, found, err := e.lib.Read(ctx, e.key(user, 1))
		if err != nil {
			t.Fatalf("%s: read: %v", when, err)
		}
		v, _ := got.Get("Page")
		return v.Str, found
	}
	before := func(p phases.Phase) {
		t.Helper()
		e.tapOld.SetFaults(committap.Faults{})
		e.tapNew.SetFaults(committap.Faults{})
		e.setPhase(t, user, p)
	}
	before(phases.ReadNew)
	if err := e.lib.Write(ctx, e.row(user, 1, "v1")); err != nil {
		t.Fatal(err)
	}

	// Old's half of a delete fails before it reaches old.
	e.tapOld.SetFaults(committap.Faults{Rate: 1, Kinds: []committap.Fault{{Code: codes.Unavailable}}, Tables: []string{e.oldTable}})
	if err := e.lib.Delete(ctx, e.key(user, 1)); err != nil {
		t.Fatalf("a delete whose second write failed: %v, want success (new took it)", err)
	}
	e.tapOld.SetFaults(committap.Faults{})
	if got := e.oldHas(t, user); len(got) != 1 {
		t.Fatalf("old holds %q, want the record its failed delete left", got)
	}
	if v, found := read("after a delete old missed"); found {
		t.Errorf("read_new read after a delete that old missed: %q, want none (the deleted record came back)", v)
	}

	// New applies a delete and its response is lost: the call fails, old
	// is never written.
	if err := e.lib.Write(ctx, e.row(user, 1, "v2")); err != nil {
		t.Fatal(err)
	}
	e.tapNew.SetFaults(committap.Faults{Rate: 1, Kinds: []committap.Fault{{Code: codes.Unavailable, Lost: true}}, Tables: []string{e.newTable}})
	if err := e.lib.Delete(ctx, e.key(user, 1)); err == nil {
		t.Fatal("a delete whose response was lost succeeded")
	}
	e.tapNew.SetFaults(committap.Faults{})
	if got, gotNew := e.oldHas(t, user), e.newHas(t, user); len(got) != 1 || got[0] != "v2" || len(gotNew) != 0 {
		t.Fatalf("old holds %q, new %q; want [v2] and nothing (new applied the delete, old was not written)", got, gotNew)
	}
	if v, found := read("after a delete whose response was lost"); found {
		t.Errorf("read_new read after a delete new applied: %q, want none", v)
	}

	// Roll back: once the switch is through, reads go to old, except
	// where the mark says old is behind.
	hold := phases.Rules{DualWriteHold: envTTL + envSkew}
	if _, _, err := e.store.Move(ctx, phases.Move{Migration: e.migration, Cohorts: []cohort.Range{{First: c, Last: c}}, To: phases.DualWrite, Rules: hold, Who: "test"}); err != nil {
		t.Fatalf("rollback from read_new held %s: %v", hold.DualWriteHold, err)
	}
	for e.lib.Phases().Phase(c) != phases.DualWrite {
		time.Sleep(20 * time.Millisecond)
	}
	if v, found := read("in the rollback's first moments"); found {
		t.Errorf("read while the rollback takes effect: %q, want none", v)
	}
	time.Sleep(envTTL + envSkew)
	redirected := e.lib.Stats().Redirected
	if v, found := read("after the rollback"); found {
		t.Errorf("dual_write read after a rollback of a delete old missed: %q, want none", v)
	}
	if e.lib.Stats().Redirected != redirected+1 {
		t.Error("the read was not counted as redirected to new")
	}
	_, _, err := e.store.Move(ctx, phases.Move{Migration: e.migration, Cohorts: []cohort.Range{{First: c, Last: c}}, To: phases.Old, Rules: hold, Who: "test"})
	if !errors.Is(err, phases.ErrIllegal) {
		t.Errorf("a move to old while old missed writes: %v, want it refused", err)
	}

	// Repair in read_new: old gets new's state, the entries go, and the
	// mark no longer redirects.
	before(phases.ReadNew)
	entries, err := operator.RepairsOf(ctx, e.store, e.migration)
	if err != nil {
		t.Fatal(err)
	}
	done, err := e.lib.RepairOld(ctx, entries)
	if err != nil || len(done) != 2 {
		t.Fatalf("RepairOld of %d entries: %d done, %v; want 2", len(entries), len(done), err)
	}
	if err := e.store.(phases.RepairLog).ClearRepairs(ctx, e.migration, done); err != nil {
		t.Fatal(err)
	}
	if got := e.oldHas(t, user); len(got) != 0 {
		t.Errorf("after the repair old holds %q, want nothing", got)
	}
	before(phases.DualWrite)
	redirected = e.lib.Stats().Redirected
	if v, found := read("after the repair"); found || e.lib.Stats().Redirected != redirected {
		t.Errorf("dual_write read after the repair: %q, %v, redirected %d more; want none from old", v, found, e.lib.Stats().Redirected-redirected)
	}
	if _, _, err := e.store.Move(ctx, phases.Move{Migration: e.migration, Cohorts: []cohort.Range{{First: c, Last: c}}, To: phases.Old, Rules: hold, Who: "test"}); err != nil {
		t.Errorf("a move to old after the repair: %v", err)
	}
}
