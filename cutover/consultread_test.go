package cutover_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/internal/testkit/committap"
)

// TestSpannerConsultReadMarkFirst, TestDatastoreConsultReadMarkFirst,
// TestDatastoreSpannerConsultReadMarkFirst: old
// and new apart, a write that new took and old missed in read_new (old's
// commit failed; the mark says Behind = "old") and then a rollback to
// dual_write (or on to shadow). A read there reads old unless the mark
// says old is behind. Another instance's write of the same record lands
// after the read has read old and before it reads the mark: it writes old
// first, then new, and its touch clears Behind. Had the read taken old's
// record from before that write, with the mark from after it, it would
// return the value the missed write replaced — older than a write
// acknowledged before the read began. The read must take the mark first
// and old after it (see the package doc, "Missed writes"): then a cleared
// mark means old already holds the write that cleared it.
//
// The taps order the two reads: the hook on the mark's read waits for old's
// read to arrive (it arrives first when the two run at once), lets it
// finish, then makes the other write.
func TestSpannerConsultReadMarkFirst(t *testing.T) { eachConsultPhase(t, spannerMissedEnv) }
func TestDatastoreConsultReadMarkFirst(t *testing.T) {
	eachConsultPhase(t, datastoreMissedEnv)
}
func TestDatastoreSpannerConsultReadMarkFirst(t *testing.T) { eachConsultPhase(t, crossMissedEnv) }

// eachConsultPhase runs checkConsultReadMarkFirst in dual_write and in
// shadow, each on an env of its own.
func eachConsultPhase(t *testing.T, env func(*testing.T) missedEnv) {
	for _, p := range []cutover.Phase{cutover.DualWrite, cutover.Shadow} {
		t.Run(string(p), func(t *testing.T) { checkConsultReadMarkFirst(t, env(t), p) })
	}
}

// touchedTable is the touched marks' table (Spanner) or kind (Datastore).
const touchedTable = "RekeyTouched"

func checkConsultReadMarkFirst(t *testing.T, e missedEnv, phase cutover.Phase) {
	ctx := context.Background()
	user := "user-consult"
	e.setPhase(t, user, cutover.ReadNew)
	if err := e.lib.Write(ctx, e.row(user, 1, "v1")); err != nil {
		t.Fatal(err)
	}
	e.tapOld.SetFaults(committap.Faults{Rate: 1, Kinds: []committap.Fault{{Code: codes.Unavailable}}, Tables: []string{e.oldTable}})
	err := e.lib.Write(ctx, e.row(user, 1, "v2"))
	e.tapOld.SetFaults(committap.Faults{})
	if err != nil {
		t.Fatalf("a write whose second commit failed: %v, want success (new took it)", err)
	}
	if got := e.oldHas(t, user); len(got) != 1 || got[0] != "v1" {
		t.Fatalf("old holds %q, want [v1] (old missed v2)", got)
	}
	e.setPhase(t, user, phase)
	read := func() string {
		t.Helper()
		got, found, err := e.lib.Read(ctx, e.key(user, 1))
		if err != nil {
			t.Fatalf("read in %s: %v", phase, err)
		}
		v, _ := got.Get("Page")
		if !found {
			return "(none)"
		}
		return v.Str
	}
	if got := read(); got != "v2" {
		t.Fatalf("%s read of a write old missed: %q, want v2 (the mark says old is behind)", phase, got)
	}

	oldRead := make(chan struct{}, 1)
	e.tapOld.OnRead(e.oldTable, func() {
		select {
		case oldRead <- struct{}{}:
		default:
		}
	})
	// The hook runs in the tap's goroutine: its outcome comes back
	// through a channel.
	wrote := make(chan error, 1)
	e.tapNew.OnRead(touchedTable, func() {
		select {
		case <-oldRead:
			time.Sleep(150 * time.Millisecond) // old's read, on its way, ends
		case <-time.After(400 * time.Millisecond): // old is read after the mark
		}
		select {
		case wrote <- e.lib.Write(ctx, e.row(user, 1, "v3")):
		default: // a second hooked read: the first outcome is kept
		}
	})
	got := read()
	e.tapOld.OnRead(e.oldTable, nil)
	e.tapNew.OnRead(touchedTable, nil)
	var werr error
	select {
	case werr = <-wrote:
	default:
		t.Fatal("the read did not read the touched mark through new's tap")
	}
	if werr != nil {
		t.Fatalf("the other instance's write: %v", werr)
	}
	switch got {
	case "v2", "v3": // the latest acknowledged before the read, or the one overlapping it
	case "v1":
		t.Errorf("%s read returned v1, which v2 replaced before the read began: it read old before the overlapping write, and the mark after that write cleared Behind", phase)
	default:
		t.Errorf("%s read returned %q, want v2 or v3", phase, got)
	}
	if got := read(); got != "v3" {
		t.Errorf("%s read after the last write: %q, want v3", phase, got)
	}
}

// TestSpannerShadowWriteInFlight, TestDatastoreShadowWriteInFlight,
// TestDatastoreSpannerShadowWriteInFlight: old and new apart, in shadow.
// Another instance's write of the record lands between a shadow read's
// read of new (with its mark) and its read of old: the read sees new
// before the write and old after it. That difference is a write in
// flight, not a mismatch: on a second look both stores hold the write,
// and it is counted as settled. Without the second look every read that
// overlaps a write of its record would count a mismatch.
func TestSpannerShadowWriteInFlight(t *testing.T) { checkShadowWriteInFlight(t, spannerMissedEnv(t)) }
func TestDatastoreShadowWriteInFlight(t *testing.T) {
	checkShadowWriteInFlight(t, datastoreMissedEnv(t))
}
func TestDatastoreSpannerShadowWriteInFlight(t *testing.T) {
	checkShadowWriteInFlight(t, crossMissedEnv(t))
}

func checkShadowWriteInFlight(t *testing.T, e missedEnv) {
	ctx := context.Background()
	user := "user-inflight"
	e.setPhase(t, user, cutover.Shadow)
	if err := e.lib.Write(ctx, e.row(user, 1, "v1")); err != nil {
		t.Fatal(err)
	}
	// The hook runs in the tap's goroutine, once (the second look reads
	// old too): its outcome comes back through a channel.
	wrote := make(chan error, 1)
	var once sync.Once
	e.tapOld.OnRead(e.oldTable, func() {
		once.Do(func() { wrote <- e.lib.Write(ctx, e.row(user, 1, "v2")) })
	})
	got, found, err := e.lib.Read(ctx, e.key(user, 1))
	e.tapOld.OnRead(e.oldTable, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatalf("the other instance's write: %v", err)
		}
	default:
		t.Fatal("the shadow read did not read old through old's tap")
	}
	if v, _ := got.Get("Page"); !found || v.Str != "v2" {
		t.Errorf("shadow read: %s (found %v), want v2, old's record when it was read", got.Describe(), found)
	}
	st := e.lib.Stats()
	if st.ShadowReads != 1 || st.ShadowMismatches != 0 || st.ShadowSettled != 1 || st.ShadowPending != 0 {
		t.Errorf("shadow reads %d, mismatches %d (%q), settled %d, awaiting repair %d; want 1, 0, 1, 0", st.ShadowReads, st.ShadowMismatches, st.MismatchSamples, st.ShadowSettled, st.ShadowPending)
	}
}
