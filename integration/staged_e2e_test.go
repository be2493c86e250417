package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/record"
)

// simApp is a simulated application: workers goroutines reading,
// writing and deleting random records of their own users through the
// library at a steady rate, each call retried until it succeeds (as an
// application does; a call may fail on an injected fault or while the
// emulator is busy). It checks every read against the latest
// acknowledged write of its record and keeps what each record should
// hold. pause stops every call until the returned resume.
type simApp struct {
	e       *stagedEnv
	mu      sync.Mutex
	want    map[string]*string // "user/seq" → page, nil when deleted
	fails   []string
	calls   int
	retries int
	gate    sync.RWMutex
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

func startSimApp(t *testing.T, e *stagedEnv, users []string, seqs, workers int) *simApp {
	t.Helper()
	a := &simApp{e: e, want: map[string]*string{}, stop: make(chan struct{})}
	for _, u := range users {
		for q := range int64(seqs) {
			v := "seed"
			a.want[logID(u, q)] = &v
		}
	}
	ctx := context.Background()
	for w := range workers {
		var mine []string
		for i, u := range users {
			if i%workers == w {
				mine = append(mine, u)
			}
		}
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), 11))
			for n := 0; ; n++ {
				select {
				case <-a.stop:
					return
				case <-time.After(8 * time.Millisecond):
				}
				u, q := mine[rnd.IntN(len(mine))], int64(rnd.IntN(seqs))
				k := logID(u, q)
				a.gate.RLock()
				a.mu.Lock()
				want := a.want[k]
				a.mu.Unlock()
				if e.cascade && q > 0 && a.get(logID(u, 0)) == nil {
					q, k, want = 0, logID(u, 0), nil // a child needs its parent: write the parent
				}
				switch r := rnd.IntN(100); {
				case r < 45:
					v := fmt.Sprintf("w%d-%d", w, n)
					if a.do("write "+k, func() error { return e.app.Write(ctx, e.rec(u, q, v)) }) {
						a.set(k, &v)
					}
				case r < 60:
					if a.do("delete "+k, func() error { return e.app.Delete(ctx, e.key(u, q)) }) {
						a.set(k, nil)
						if e.cascade && q == 0 { // its children go with it
							for c := int64(1); c < int64(seqs); c++ {
								a.set(logID(u, c), nil)
							}
						}
					}
				default:
					var got record.Record
					var found bool
					if a.do("read "+k, func() (err error) { got, found, err = e.app.Read(ctx, e.key(u, q)); return err }) {
						page, _ := got.Get("Page")
						switch {
						case want == nil && found:
							a.fail("read %s: %q, want nothing (deleted)", k, page.Str)
						case want != nil && !found:
							a.fail("read %s: nothing, want %q", k, *want)
						case want != nil && page.Str != *want:
							a.fail("read %s: %q, want %q", k, page.Str, *want)
						case want != nil:
							if d := writtenFieldsDiff(got, e.rec(u, q, *want)); d != "" {
								a.fail("read %s: %s", k, d)
							}
						}
					}
				}
				a.gate.RUnlock()
			}
		}()
	}
	return a
}

// deadLetters is what the dead-letter file at path holds (its first
// lines), for a failure's message.
func deadLetters(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.SplitN(string(b), "\n", 6)
	return "\ndead letters:\n" + strings.Join(lines[:min(len(lines), 5)], "\n")
}

// writtenFieldsDiff describes how the fields of read record got differ
// from those of written record w ("" if every field w has comes back
// with its value; got may hold more, such as a row's other columns).
func writtenFieldsDiff(got, w record.Record) string {
	var extra []string
	for _, f := range got.Fields {
		if !slices.ContainsFunc(w.Fields, func(g record.Field) bool { return strings.EqualFold(g.Name, f.Name) }) {
			extra = append(extra, f.Name)
		}
	}
	return record.FieldsDiff(got.Fields, w.Fields, extra...)
}

func (a *simApp) get(k string) *string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.want[k]
}

func (a *simApp) set(k string, v *string) {
	a.mu.Lock()
	a.want[k] = v
	a.mu.Unlock()
}

func (a *simApp) fail(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.fails) < 20 {
		a.fails = append(a.fails, fmt.Sprintf(format, args...))
	}
}

// do retries f until it succeeds, for up to 20 s.
func (a *simApp) do(what string, f func() error) bool {
	a.mu.Lock()
	a.calls++
	a.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := f()
		if err == nil {
			return true
		}
		if time.Now().After(deadline) {
			a.fail("%s: %v (no success in 20 s)", what, err)
			return false
		}
		a.mu.Lock()
		a.retries++
		a.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

// pause holds every call until resume is called.
func (a *simApp) pause() (resume func()) {
	a.gate.Lock()
	return a.gate.Unlock
}

func (a *simApp) close() {
	a.once.Do(func() { close(a.stop) })
	a.wg.Wait()
}

// wanted is what the records should hold now: "user/seq" → page, the
// deleted ones left out.
func (a *simApp) wanted() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]string{}
	for k, v := range a.want {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

// TestStagedMigrationEndToEnd is the staged cutover end to end on both
// stores: a simulated application reads, writes and deletes its users'
// records through the library at a steady rate while the test moves 1%,
// then 10%, 50% and 100% of the cohorts through every phase — dual_write,
// a backfill (backfilled), repair and verify --mark (verified), shadow,
// read_new, new_only, done — rolls one cohort back from read_new (to
// dual_write, backfilled and verified again) and another from new_only
// (the reverse backfill), and cleans up: every old record is deleted.
// On Spanner, old and new are in two databases and 5% of the second
// writes of dual writes fail (the commit tap), which the repair log and
// repair close (and, in read_new, reads of a record whose write new
// missed go to old until the repair); backfills and repairs meanwhile
// meet 5% transient faults (Unavailable), which they retry. Datastore's one
// database writes both in one transaction.
// Every read must return the latest acknowledged write of its record;
// after the reverse backfill old holds every write of its cohort; each
// verify --mark is clean; at the end new, authoritative, holds exactly
// every acknowledged write and no deleted record.
func TestStagedMigrationEndToEnd(t *testing.T) {
	stagedEndToEnd(t, stagedShapes, stagedStages)
}

// stagedStages are the end-to-end test's stages on prism: 1%, then 10%,
// 50% and 100% of the cohorts.
var stagedStages = [][]cohort.Range{{{First: 0, Last: 0}}, {{First: 1, Last: 9}}, {{First: 10, Last: 49}}, {{First: 50, Last: 99}}}

// stagedEndToEnd runs the end-to-end test over shapes, moving the cohorts
// through every phase in stages (at least two): those shapes that run
// alone one after another, then the others side by side (a shape spends
// most of its time waiting for the phase caches to turn). One cohort of
// the last stage but one rolls back from read_new, one of the last from
// new_only.
func stagedEndToEnd(t *testing.T, shapes []stagedShape, stages [][]cohort.Range) {
	back, reverse := len(stages)-2, len(stages)-1
	inStage := func(c, i int) bool {
		return slices.ContainsFunc(stages[i], func(r cohort.Range) bool { return c >= r.First && c <= r.Last })
	}
	for _, se := range shapes {
		t.Run(se.name, func(t *testing.T) {
			if !se.alone {
				t.Parallel()
			}
			ctx := context.Background()
			e := se.make(t)
			const seqs = 3
			users, _ := stagedSeed(t, e, "e2e-user", 40, seqs)
			// The cohorts rolled back: one of the last stage but one from
			// read_new, one of the last from new_only; each with users.
			var fromReadNew, fromNewOnly = -1, -1
			for _, u := range users {
				switch c := cohortOf(u); {
				case inStage(c, back) && fromReadNew < 0:
					fromReadNew = c
				case inStage(c, reverse) && fromNewOnly < 0:
					fromNewOnly = c
				}
			}
			if fromReadNew < 0 || fromNewOnly < 0 {
				t.Fatal("no users in the rolled-back cohorts' stages")
			}
			// faults sets what the tap injects into writes of new's data
			// tables (e.faultTables; in the interleaved shape old's tables
			// have the same names, and the jobs' clients of old go through
			// the tap too): none, transient ones only (Unavailable, which
			// every writer retries), or those and permanent ones
			// (PermissionDenied: an application's second write fails and
			// goes to the repair log; a backfill's, a repair's, a reverse
			// backfill's or a cleanup's would fail it by design, so those
			// run under transient faults only).
			const (
				noFaults = iota
				transientFaults
				allFaults
			)
			faultsMode := func(m int) {
				if e.tap == nil {
					return
				}
				f := committap.Faults{}
				switch m {
				case transientFaults:
					f = committap.Faults{Rate: 0.05, Kinds: []committap.Fault{{Code: codes.Unavailable}}, Tables: e.faultTables, Seed: 5}
				case allFaults:
					f = committap.Faults{Rate: 0.05, Kinds: []committap.Fault{{Code: codes.PermissionDenied}, {Code: codes.Unavailable}}, Tables: e.faultTables, Seed: 5}
				}
				e.tap.SetFaults(f)
			}
			faults := func(on bool) {
				if on {
					faultsMode(allFaults)
				} else {
					faultsMode(noFaults)
				}
			}
			app := startSimApp(t, e, users, seqs, 4)
			defer app.close()
			faults(true)

			// verified takes cohorts from dual_write to verified: backfill,
			// then repair and verify --mark (faults off meanwhile: what they
			// put in the repair log is repaired before the mark).
			verified := func(rs []cohort.Range) {
				t.Helper()
				faultsMode(transientFaults)
				if _, _, err := e.backfill(t, cohortRunner, rs, false); err != nil {
					t.Fatalf("backfill %s: %v%s", cohort.Format(rs), err, deadLetters(e.cfg.DeadLetter))
				}
				faults(false)
				defer faults(true)
				for attempt := 1; ; attempt++ {
					if _, _, err := operator.Repair(ctx, e.cfg, operator.RepairOptions{Migration: e.migration, Cohorts: rs, ReportPath: filepath.Join(t.TempDir(), "repair.jsonl"), Who: "e2e"}, pipeline.Runner{Runner: cohortRunner}); err != nil {
						t.Fatalf("repair %s: %v", cohort.Format(rs), err)
					}
					by, _, err := e.verify(t, rs, true)
					if err == nil {
						return
					}
					if !errors.Is(err, operator.ErrNotClean) || attempt == 3 {
						for c, v := range by {
							if !v.Clean() {
								t.Logf("cohort %d: %+v", c, v)
							}
						}
						t.Fatalf("verify --mark %s (attempt %d): %v", cohort.Format(rs), attempt, err)
					}
				}
			}
			// repairMissed repairs, in read_new, what new missed while old
			// was authoritative (second writes that failed): new_only
			// needs it.
			repairMissed := func(rs []cohort.Range) {
				t.Helper()
				faultsMode(transientFaults)
				defer faults(true)
				_, res, err := operator.Repair(ctx, e.cfg, operator.RepairOptions{Migration: e.migration, Cohorts: rs, ReportPath: filepath.Join(t.TempDir(), "repair.jsonl"), Who: "e2e"}, pipeline.Runner{Runner: cohortRunner})
				if err != nil {
					t.Fatalf("repair in read_new %s: %v", cohort.Format(rs), err)
				}
				if n := res.Counters[operator.RepairLogCleared]; n > 0 {
					t.Logf("repair in read_new of %s: %d entries of writes new missed, %s", cohort.Format(rs), n, res.Counters)
				}
			}
			for i, rs := range stages {
				e.move(t, rs, phases.DualWrite)
				waitHold()
				verified(rs)
				e.move(t, rs, phases.Shadow)
				time.Sleep(300 * time.Millisecond)
				e.move(t, rs, phases.ReadNew)
				waitHold()
				// Repaired at once, as an operator would: until then new
				// lacks the rows whose writes it missed in shadow, so an
				// application's write of a child of one fails in read_new
				// (docs/limits.md).
				repairMissed(rs)
				if i == back { // one cohort back from read_new, and forward again
					x := one(fromReadNew)
					e.move(t, x, phases.DualWrite)
					waitHold()
					verified(x)
					e.move(t, x, phases.ReadNew)
					waitHold()
					repairMissed(x)
				}
				e.move(t, rs, phases.NewOnly)
				waitHold()
				if i == reverse { // one cohort back from new_only: the reverse backfill
					y := one(fromNewOnly)
					faultsMode(transientFaults)
					_, res, _, err := operator.Reverse(ctx, e.cfg, operator.CohortOptions{Migration: e.migration, Cohorts: y, Who: "e2e"}, pipeline.Runner{Runner: cohortRunner})
					faults(true)
					if err != nil {
						t.Fatalf("reverse backfill of cohort %d: %v%s", fromNewOnly, err, deadLetters(e.cfg.DeadLetter))
					} else {
						t.Logf("reverse backfill of cohort %d: %s", fromNewOnly, res.Counters)
					}
					// Old, authoritative again, holds every write of the cohort.
					resume := app.pause()
					want, old := app.wanted(), e.oldPages(t)
					for _, u := range users {
						if cohortOf(u) != fromNewOnly {
							continue
						}
						for q := range int64(seqs) {
							k := logID(u, q)
							if want[k] != old[k] {
								t.Errorf("after the reverse backfill old %s = %q, want %q", k, old[k], want[k])
							}
						}
					}
					resume()
					waitHold()
					verified(y)
					e.move(t, y, phases.ReadNew)
					waitHold()
					repairMissed(y)
					e.move(t, y, phases.NewOnly)
					waitHold()
				}
				e.move(t, rs, phases.Done)
			}
			waitHold()
			// Every cohort is done: the old records go, while the
			// application goes on (done neither reads nor writes old).
			faultsMode(transientFaults)
			_, res, a, err := operator.Cleanup(ctx, e.cfg, operator.CohortOptions{Migration: e.migration, Cohorts: []cohort.Range{{First: 0, Last: stagedBuckets - 1}}, Who: "e2e"}, pipeline.Runner{Runner: cohortRunner})
			faults(true)
			if err != nil {
				t.Fatalf("cleanup: %v%s", err, deadLetters(e.cfg.DeadLetter))
			}
			t.Logf("cleanup: %s; audit %s by %s", res.Counters, a.Action, a.Who)
			if old := e.oldPages(t); len(old) != 0 {
				t.Errorf("old holds %d records after the cleanup, want none", len(old))
			}
			time.Sleep(500 * time.Millisecond)
			faults(false)
			app.close()

			st := e.app.Stats()
			t.Logf("%d calls (%d retried); library: %+v", app.calls, app.retries, st)
			for _, f := range app.fails {
				t.Error(f)
			}
			if st.Unrepaired != 0 {
				t.Errorf("%d writes neither reached both stores nor the repair log", st.Unrepaired)
			}
			m, err := e.phases.Load(ctx, e.migration)
			if err != nil {
				t.Fatal(err)
			}
			for c := range stagedBuckets {
				if p := m.Phase(c); p != phases.Done {
					t.Errorf("cohort %d is %s, want done", c, p)
				}
			}
			want, got := app.wanted(), e.newPages(t)
			for k, v := range want {
				if got[k] != v {
					t.Errorf("new %s = %q, want the latest acknowledged write %q", k, got[k], v)
				}
			}
			for k, v := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("new holds %s = %q, deleted by the application", k, v)
				}
			}
			if e.checkNew != nil {
				e.checkNew(t)
			}
		})
	}
}
