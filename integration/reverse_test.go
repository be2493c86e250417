package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/pipeline"
)

// walk moves cohorts rs from dual_write (backfilled already) through
// verified and read_new to new_only, by the rules.
func (e *stagedEnv) walkToNewOnly(t *testing.T, rs []cohort.Range) {
	t.Helper()
	e.move(t, rs, phases.Verified)
	e.move(t, rs, phases.ReadNew)
	waitHold()
	e.move(t, rs, phases.NewOnly)
	waitHold()
}

// TestReverseBackfill takes cohorts to new_only, where the application
// writes, deletes and creates records in new only, then runs the reverse
// backfill (operator.Reverse) while an application goroutine keeps
// writing: afterwards the cohorts are in dual_write and old holds exactly
// what new holds, every record at its latest acknowledged write.
func TestReverseBackfill(t *testing.T) {
	for _, se := range slices.Concat(stagedEnvs, stagedCross) {
		t.Run(se.name, func(t *testing.T) {
			ctx := context.Background()
			e := se.make(t)
			users, rs := stagedSeed(t, e, "rv-user", 10, 3)
			e.move(t, rs, phases.DualWrite)
			waitHold()
			if _, _, err := e.backfill(t, cohortRunner, rs, false); err != nil {
				t.Fatal(err)
			}
			e.walkToNewOnly(t, rs)
			for _, r := range rs {
				e.waitSeen(t, r.First, phases.NewOnly)
			}
			// new_only: the application writes new alone.
			if err := e.app.Write(ctx, e.rec(users[0], 0, "new-only")); err != nil {
				t.Fatal(err)
			}
			if err := e.app.Delete(ctx, e.key(users[1], 1)); err != nil {
				t.Fatal(err)
			}
			if err := e.app.Write(ctx, e.rec(users[2], 9, "created")); err != nil {
				t.Fatal(err)
			}
			// A delete in new_only whose second half (old's) failed: new
			// no longer holds the record, old does.
			e.changeNew(t, users[1], 2, "", true)
			if got := e.oldPages(t)[logID(users[0], 0)]; got != "seed" {
				t.Fatalf("old %s = %q in new_only, want the seed (new only is written)", logID(users[0], 0), got)
			}

			// The application keeps writing while the reverse backfill runs.
			var mu sync.Mutex
			acked := map[string]string{}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				rnd := rand.New(rand.NewPCG(3, 4))
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
					u, q := users[3+rnd.IntN(len(users)-3)], int64(rnd.IntN(3))
					v := fmt.Sprintf("live-%d", n)
					if e.app.Write(ctx, e.rec(u, q, v)) == nil {
						mu.Lock()
						acked[logID(u, q)] = v
						mu.Unlock()
					}
				}
			}()
			_, res, a, err := operator.Reverse(ctx, e.cfg, operator.CohortOptions{Migration: e.migration, Cohorts: rs, Who: "test-reverse"}, pipeline.Runner{Runner: cohortRunner})
			time.Sleep(200 * time.Millisecond)
			close(stop)
			wg.Wait()
			if err != nil {
				if dl := readDeadLetters(t, e.cfg.DeadLetter); len(dl) > 0 {
					t.Logf("first dead letter: %+v", dl[0])
				}
				t.Fatal(err)
			}
			t.Logf("reverse backfill: %s; %d live writes acknowledged", res.Counters, len(acked))
			if a == nil || a.To != phases.DualWrite || a.From != string(phases.ReadNew) {
				t.Errorf("audit %+v, want read_new to dual_write", a)
			}
			if res.Counters[migration.DeadLettered] != 0 {
				t.Errorf("counters %s: want no dead letters", res.Counters)
			}
			// Old is authoritative again: it holds every acknowledged live
			// write, and what new holds of every other record (new may lag
			// behind old for records written since the move to dual_write,
			// whose first writes go to old alone).
			old, nw := e.oldPages(t), e.newPages(t)
			for k, v := range acked {
				if old[k] != v {
					t.Errorf("old %s = %q, want the latest acknowledged write %q", k, old[k], v)
				}
			}
			for k, v := range nw {
				if _, live := acked[k]; !live && old[k] != v {
					t.Errorf("old %s = %q, new %q", k, old[k], v)
				}
			}
			for k := range old {
				if _, ok := nw[k]; !ok {
					t.Errorf("old holds %s = %q, which new does not", k, old[k])
				}
			}
			if old[logID(users[0], 0)] != "new-only" || old[logID(users[2], 9)] != "created" {
				t.Errorf("old misses the new_only writes: %q, %q", old[logID(users[0], 0)], old[logID(users[2], 9)])
			}
			if _, ok := old[logID(users[1], 1)]; ok {
				t.Errorf("old still holds %s, deleted in new_only", logID(users[1], 1))
			}
			if _, ok := old[logID(users[1], 2)]; ok {
				t.Errorf("old still holds %s, deleted in new_only where old's delete failed", logID(users[1], 2))
			}
			m, err := e.phases.Load(ctx, e.migration)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				if p := m.Phase(r.First); p != phases.DualWrite {
					t.Errorf("cohort %d is %s, want dual_write", r.First, p)
				}
			}
		})
	}
}
