package cutover_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/record"
)

// TestSpannerConcurrentCutover runs two application instances (two
// libraries, each with its own phase cache) under six goroutines that
// write, delete and read random records of their own users while an
// operator walks the users' cohorts from old to new_only by the rules,
// with a backfill (BackfillRow) racing the application's writes and
// deletes. Every read must return the latest acknowledged write of its
// record (or nothing after a delete), every call must succeed, no shadow
// read may differ, and at the end new — the authoritative store — must
// hold exactly every acknowledged write. Old and new in one database, and
// in two.
func TestSpannerConcurrentCutover(t *testing.T) {
	t.Parallel()
	for _, same := range []bool{true, false} {
		t.Run(fmt.Sprintf("same database %v", same), func(t *testing.T) {
			ctx := context.Background()
			e := newSpannerEnv(t, same, "")
			second, err := cutover.OpenSpanner(ctx, e.old, e.configPath, cutover.Options{Migration: e.migration, CacheTTL: envTTL, Skew: envSkew})
			if err != nil {
				t.Fatal(err)
			}
			defer second.Close()
			concurrentCutover(t, fixture{
				libs: []app{e.lib, second}, store: e.store, migration: e.migration, row: logRow, key: logKey, configPath: e.configPath,
				seed: func(recs []record.Record) error {
					var ms []*spanner.Mutation
					for _, r := range recs {
						u, _ := r.Get("UserId")
						q, _ := r.Get("Seq")
						p, _ := r.Get("Page")
						ms = append(ms, spanner.Insert("Logs", []string{"UserId", "Seq", "Page"}, []any{u.Str, q.Int, p.Str}))
					}
					_, err := e.old.Apply(ctx, ms)
					return err
				},
				oldRows: func(users []string) ([]record.Record, error) {
					var rows []record.Record
					err := e.old.Single().Query(ctx, spanner.Statement{SQL: "SELECT UserId, Seq, Page FROM Logs WHERE UserId IN UNNEST(@u)", Params: map[string]any{"u": users}}).Do(func(r *spanner.Row) error {
						var u, p string
						var q int64
						if err := r.Columns(&u, &q, &p); err != nil {
							return err
						}
						rows = append(rows, logRow(u, q, p))
						return nil
					})
					return rows, err
				},
			})
		})
	}
}

// app is the library, for either store.
type app interface {
	Write(ctx context.Context, rec record.Record) error
	Delete(ctx context.Context, key record.Record) error
	Read(ctx context.Context, key record.Record) (record.Record, bool, error)
	BackfillRow(ctx context.Context, rec record.Record) (bool, error)
	Stats() cutover.Stats
	Phases() *phases.Map
}

// fixture is one store's setup for concurrentCutover: two instances of
// the library, the phase store, how records of a user look, how to seed
// old and how a backfill reads it.
type fixture struct {
	libs      []app
	store     phases.Store
	migration string
	row       func(user string, seq int64, page string) record.Record
	key       func(user string, seq int64) record.Record
	seed      func([]record.Record) error
	oldRows   func(users []string) ([]record.Record, error)
	// configPath is the migration's config, for the operator's repair.
	configPath string
	// faultsOff, if set, ends the faults injected into new's data
	// commits before the repair in read_new, which then must have
	// repair-log entries to repair.
	faultsOff func()
}

func concurrentCutover(t *testing.T, f fixture) {
	ctx := context.Background()
	libs := f.libs
	const workers, usersPerWorker, seqs = 4, 5, 3
	hold := phases.Rules{DualWriteHold: envTTL + envSkew}

	// Seed: every record exists in old before the cutover starts.
	expect := map[string]*string{} // "user/seq" -> value, nil when deleted
	var users []string
	var cohorts []cohort.Range
	var seed []record.Record
	for w := range workers {
		for u := range usersPerWorker {
			user := fmt.Sprintf("cc-%d-%d", w, u)
			users = append(users, user)
			c := cohort.Of(user, cohort.DefaultBuckets)
			cohorts = append(cohorts, cohort.Range{First: c, Last: c})
			for q := range seqs {
				v := "seed"
				expect[fmt.Sprintf("%s/%d", user, q)] = &v
				seed = append(seed, f.row(user, int64(q), v))
			}
		}
	}
	cohorts = cohort.Merge(cohorts)
	if err := f.seed(seed); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var failures []string
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 20 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	ops := make([]int, workers)
	retried := make([]int, workers)
	// do retries a call until it succeeds, as an application does (a
	// call may fail while the emulator, one transaction at a time, is
	// busy: a deadline, stale phases); one that never succeeds fails the
	// test.
	do := func(w int, what string, f func() error) bool {
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := f()
			if err == nil {
				return true
			}
			if time.Now().After(deadline) {
				fail("%s: %v (no success in 10 s)", what, err)
				return false
			}
			retried[w]++
			time.Sleep(20 * time.Millisecond)
		}
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), 7))
			n := 0
			for {
				select {
				case <-stop:
					ops[w] = n
					return
				default:
				}
				n++
				time.Sleep(3 * time.Millisecond)
				user := fmt.Sprintf("cc-%d-%d", w, rnd.IntN(usersPerWorker))
				q := rnd.IntN(seqs)
				k := fmt.Sprintf("%s/%d", user, q)
				lib := libs[rnd.IntN(len(libs))]
				mu.Lock()
				want := expect[k]
				mu.Unlock()
				switch r := rnd.IntN(100); {
				case r < 45:
					v := fmt.Sprintf("w%d-%d", w, n)
					if !do(w, "write "+k, func() error { return lib.Write(ctx, f.row(user, int64(q), v)) }) {
						continue
					}
					mu.Lock()
					expect[k] = &v
					mu.Unlock()
				case r < 60:
					if !do(w, "delete "+k, func() error { return lib.Delete(ctx, f.key(user, int64(q))) }) {
						continue
					}
					mu.Lock()
					expect[k] = nil
					mu.Unlock()
				default:
					var got record.Record
					var found bool
					if !do(w, "read "+k, func() (err error) { got, found, err = lib.Read(ctx, f.key(user, int64(q))); return err }) {
						continue
					}
					page, _ := got.Get("Page")
					switch {
					case want == nil && found:
						fail("read %s: %q, want nothing (deleted)", k, page.Str)
					case want != nil && !found:
						fail("read %s: nothing, want %q", k, *want)
					case want != nil && page.Str != *want:
						fail("read %s: %q, want %q", k, page.Str, *want)
					}
				}
			}
		}()
	}

	move := func(to phases.Phase) {
		t.Helper()
		if _, _, err := f.store.Move(ctx, phases.Move{Migration: f.migration, Cohorts: cohorts, To: to, Who: "operator", Rules: hold}); err != nil {
			t.Errorf("move to %s: %v", to, err)
		}
	}
	backfill := func() (copied, skipped int) {
		// Read old as a backfill does, then copy.
		rows, err := f.oldRows(users)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			time.Sleep(5 * time.Millisecond) // leave the application time to race the copy
			// Retried as the application's calls are: stale phases
			// or a deadline while the emulator is busy are transient.
			var wrote bool
			var err error
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if wrote, err = libs[0].BackfillRow(ctx, r); err == nil || time.Now().After(deadline) {
					break
				}
			}
			if err != nil {
				t.Errorf("backfill: %v (no success in 10 s)", err)
			}
			if wrote {
				copied++
			} else {
				skipped++
			}
		}
		return copied, skipped
	}
	// repairMissed is the operator's repair in read_new of what new missed
	// while old was authoritative. Apart, under load, a second write can
	// fail, or a first's response be lost (its deadline passes while the
	// emulator, one transaction at a time, is busy): the call is logged
	// for repair, and new_only refuses the cohorts until a repair
	// (package phases, "Missed writes").
	repaired := 0
	repairMissed := func() {
		t.Helper()
		entries, err := operator.RepairsOf(ctx, f.store, f.migration)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) == 0 {
			return
		}
		cfg, err := config.LoadFile(f.configPath)
		if err != nil {
			t.Fatal(err)
		}
		r, err := operator.RepairTallied(ctx, cfg, operator.RepairOptions{Migration: f.migration, Cohorts: cohorts, ReportPath: filepath.Join(t.TempDir(), "repair.jsonl"), Who: "operator"}, pipeline.Runner{Runner: "prism"})
		if err != nil {
			t.Fatalf("repair in read_new of %d repair-log entries (the first: %v): %v", len(entries), entries[0], err)
		}
		repaired = len(entries)
		t.Logf("repair in read_new of %d repair-log entries (the first: %v): %s; tally %+v", len(entries), entries[0], r.Result.Counters, r.Sides)
		// Under the application's traffic, every difference the repair
		// found is repaired, settled on recheck or left: the tally is of
		// the read_new side (new authoritative) and adds up.
		if len(r.Sides) != 1 || r.Sides[0].Authoritative != "new" {
			t.Errorf("repair tally %+v, want the one side of new, authoritative in read_new", r.Sides)
		}
		for _, s := range r.Sides {
			if s.Found() != s.Repaired()+s.Settled+s.Left() {
				t.Errorf("repair tally %+v: %d found, %d repaired + %d settled + %d left", s, s.Found(), s.Repaired(), s.Settled, s.Left())
			}
		}
	}
	time.Sleep(300 * time.Millisecond)
	move(phases.DualWrite)
	time.Sleep(hold.DualWriteHold)
	copied, skipped := backfill()
	move(phases.Backfilled)
	move(phases.Verified)
	move(phases.Shadow)
	time.Sleep(1500 * time.Millisecond)
	move(phases.ReadNew)
	time.Sleep(hold.DualWriteHold + 300*time.Millisecond)
	if f.faultsOff != nil {
		f.faultsOff()
	}
	repairMissed()
	move(phases.NewOnly)
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()

	total, retries := 0, 0
	for w := range ops {
		total += ops[w]
		retries += retried[w]
	}
	var st [2]cutover.Stats
	for i, l := range libs {
		st[i] = l.Stats()
	}
	t.Logf("%d calls (%d retried); backfill copied %d, skipped %d; repaired in read_new %d; instance stats: shadow reads %d+%d (awaiting repair %d+%d), fallbacks %d+%d, repairs %d+%d",
		total, retries, copied, skipped, repaired, st[0].ShadowReads, st[1].ShadowReads, st[0].ShadowPending, st[1].ShadowPending, st[0].Fallbacks, st[1].Fallbacks, st[0].Repairs, st[1].Repairs)
	for _, f := range failures {
		t.Error(f)
	}
	for i, s := range st {
		if s.ShadowMismatches != 0 || s.Unrepaired != 0 {
			t.Errorf("instance %d: %d shadow mismatches (%q), %d unrepaired; want none", i, s.ShadowMismatches, s.MismatchSamples, s.Unrepaired)
		}
	}
	if f.faultsOff != nil && repaired == 0 {
		t.Errorf("the faults in new's commits left nothing in the repair log: the repair in read_new went untested")
	}
	if total < 200 {
		t.Errorf("only %d calls were made: the test did not exercise the library", total)
	}
	// new is authoritative now: it holds every acknowledged write.
	finalDeadline := time.Now().Add(20 * time.Second) // all the final reads' retries together
	for k, want := range expect {
		user, seq, _ := strings.Cut(k, "/")
		q, _ := strconv.ParseInt(seq, 10, 64)
		var got record.Record
		var found bool
		var err error
		for ; ; time.Sleep(20 * time.Millisecond) {
			// Retried as the application's calls are (stale phases while
			// the emulator is busy are transient).
			if got, found, err = libs[0].Read(ctx, f.key(user, q)); err == nil || time.Now().After(finalDeadline) {
				break
			}
		}
		page, _ := got.Get("Page")
		switch {
		case err != nil:
			t.Errorf("final read %s: %v", k, err)
		case want == nil && found:
			t.Errorf("new holds %s = %q, deleted by an acknowledged delete", k, page.Str)
		case want != nil && (!found || page.Str != *want):
			t.Errorf("new holds %s = %q (found %v), want the acknowledged %q", k, page.Str, found, *want)
		}
	}
}
