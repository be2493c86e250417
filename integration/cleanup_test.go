package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/rewrite"
)

// cleanupBatchRows is the cleanup's write.batch_rows: small, so the
// deletes of a few hundred records make many commits whose order can be
// judged.
const cleanupBatchRows = 8

// TestCohortCleanup runs `rekey cohort cleanup` (operator.Cleanup) on
// both stores, under a ramp-up, every call of the pipeline going through
// a commit tap. Some cohorts are done, one is in new_only, the rest old;
// new holds records the application wrote in done. A cleanup that names
// the new_only cohort is refused and sends no commit; a dry run sends no
// commit at all and counts what it would delete. The cleanup of the done
// cohorts deletes exactly their old records (every other cohort's old
// records and all of new untouched) and records itself in the audit; its
// deletes went out in many commits, each within a narrow range of the
// deleted keys, in an order far from ascending. A Spanner source reads
// only the done cohorts' rows.
func TestCohortCleanup(t *testing.T) {
	for _, se := range slices.Concat(stagedEnvs, stagedCross) {
		t.Run(se.name, func(t *testing.T) {
			ctx := context.Background()
			e := se.make(t)
			// One commit at a time (the Spanner emulator's way anyway): the
			// tap sees the deletes in the order they were planned.
			e.cfg.Write.BatchRows, e.cfg.Write.Parallelism = cleanupBatchRows, 1
			e.cfg.Ramp = config.RampConfig{Profile: config.RampCustom, Base: 200, Growth: 2, IntervalSeconds: 1}
			const seqs = 8
			var users []string
			for i := range 60 {
				users = append(users, fmt.Sprintf("cl-user-%d", i))
			}
			done, isDone := cohortsOf(users[:20])
			newOnly := -1
			for _, u := range users {
				if !isDone[cohortOf(u)] {
					newOnly = cohortOf(u)
					break
				}
			}
			for _, u := range users {
				for q := range int64(seqs) {
					e.putOld(t, e.rec(u, q, "old"))
				}
			}
			for _, m := range []struct {
				rs []cohort.Range
				to phases.Phase
			}{{done, phases.Done}, {one(newOnly), phases.NewOnly}} {
				if _, _, err := e.phases.Move(ctx, phases.Move{Migration: e.migration, Buckets: stagedBuckets, Cohorts: m.rs, To: m.to, Force: true, Who: "test"}); err != nil {
					t.Fatal(err)
				}
			}
			// The application writes new in done.
			e.waitSeen(t, cohortOf(users[0]), phases.Done)
			for _, u := range users[:3] {
				if err := e.app.Write(ctx, e.rec(u, 100, "new")); err != nil {
					t.Fatal(err)
				}
			}
			oldBefore, newBefore := e.oldPages(t), e.newPages(t)
			if len(newBefore) != 3 {
				t.Fatalf("new holds %d records, want the application's 3", len(newBefore))
			}
			deleted := 0
			for id := range oldBefore {
				u, _, _ := strings.Cut(id, "/")
				if isDone[cohortOf(u)] {
					deleted++
				}
			}

			var tap *committap.Tap
			if e.store == "spanner" {
				key, _ := rewrite.ParseKeySchema("Logs", "UserId STRING(36), Seq INT64")
				tap = startTap(t, emulator.EnvSpannerHost, key)
			} else {
				tap = startTap(t, emulator.EnvDatastoreHost)
			}
			table := map[string]string{"spanner": "Logs", "datastore": "Log", "datastore-spanner": "Log"}[e.store]
			cleanup := func(rs []cohort.Range, dry, force bool) (*migration.Result, *phases.Audit, error) {
				t.Helper()
				var out runNotes
				_, res, a, err := operator.Cleanup(ctx, e.cfg, operator.CohortOptions{Migration: e.migration, Cohorts: rs, Force: force, Who: "test-cleanup", Run: migration.Options{Notes: out.Say, DryRun: dry}}, pipeline.Runner{Runner: cohortRunner})
				t.Logf("cleanup of %s (dry run %v, force %v):\n%s", cohort.Format(rs), dry, force, out.String())
				return res, a, err
			}

			// A cohort in new_only is refused: nothing is deleted.
			if _, _, err := cleanup(append(slices.Clone(done), one(newOnly)...), false, false); !errors.Is(err, operator.ErrNotCleanable) || !strings.Contains(err.Error(), fmt.Sprintf("%d are new_only", newOnly)) {
				t.Fatalf("cleanup with cohort %d (new_only): %v, want ErrNotCleanable naming it", newOnly, err)
			}
			noCommits(t, tap)

			// A dry run reads and plans, and sends no commit.
			res, a, err := cleanup(done, true, false)
			if err != nil || a != nil {
				t.Fatalf("dry run: %v, audit %+v", err, a)
			}
			if c := res.Counters; c[migration.WouldDelete+table] != int64(deleted) || c[migration.Deleted] != 0 {
				t.Errorf("dry run counters %s; want %s%s=%d deleted=0", c, migration.WouldDelete, table, deleted)
			}
			noCommits(t, tap)
			if got := e.oldPages(t); !maps.Equal(got, oldBefore) {
				t.Fatalf("the dry run changed old: %d records, %d before", len(got), len(oldBefore))
			}

			res, a, err = cleanup(done, false, false)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("counters: %s", res.Counters)
			c := res.Counters
			if c[migration.Deleted] != int64(deleted) || c[migration.Written] != 0 || c[migration.DeadLettered] != 0 {
				t.Errorf("counters %s; want deleted=%d written=0 dead_lettered=0", c, deleted)
			}
			if c["throttled_ms"] == 0 {
				t.Errorf("throttled_ms is 0: the ramp-up never paced the deletes")
			}
			if e.store == "spanner" && (c[migration.Read] != int64(deleted) || c[migration.CohortOther] != 0) {
				t.Errorf("counters %s; want read=%d cohort_other=0 (the cohorts filtered in the query)", c, deleted)
			}
			want := map[string]string{}
			for id, p := range oldBefore {
				u, _, _ := strings.Cut(id, "/")
				if !isDone[cohortOf(u)] {
					want[id] = p
				}
			}
			if got := e.oldPages(t); !maps.Equal(got, want) {
				t.Errorf("old holds %d records after the cleanup, want the %d of cohorts not done (of %d)", len(got), len(want), len(oldBefore))
			}
			if got := e.newPages(t); !maps.Equal(got, newBefore) {
				t.Errorf("new changed: %v, was %v", got, newBefore)
			}
			if a == nil || a.Action != phases.ActionCleanup || a.Cohorts != cohort.Format(done) || a.From != string(phases.Done) || a.Who != "test-cleanup" || a.Forced || !strings.Contains(a.Why, fmt.Sprintf("%d old records deleted", deleted)) {
				t.Errorf("audit %+v, want the cleanup of %s from done by test-cleanup", a, cohort.Format(done))
			}
			audits, err := e.phases.Audits(ctx, e.migration)
			if err != nil {
				t.Fatal(err)
			}
			if last := audits[len(audits)-1]; a == nil || last.Action != phases.ActionCleanup || last.Version != a.Version || last.Cohorts != a.Cohorts {
				t.Errorf("the stored audit ends with %+v, want the cleanup", last)
			}
			checkDeleteOrder(t, tap, table, deleted)

			// Forced, the new_only cohort's old records go too, said so.
			if _, a, err = cleanup(one(newOnly), false, true); err != nil || a == nil || !a.Forced || a.From != string(phases.NewOnly) {
				t.Fatalf("a forced cleanup of cohort %d (new_only): %v, audit %+v", newOnly, err, a)
			}
			for id := range e.oldPages(t) {
				if u, _, _ := strings.Cut(id, "/"); cohortOf(u) == newOnly || isDone[cohortOf(u)] {
					t.Errorf("old still holds %s of cohort %d", id, cohortOf(u))
				}
			}
		})
	}
}

// checkDeleteOrder judges the commits to table the tap saw succeed: they
// delete want keys in commits of at most cleanupBatchRows keys, each
// within a narrow range of the deleted keys (key-local: its keys span at
// most a sixteenth of them in key order), in an order far from ascending
// (shuffled: of all pairs of commits, at least a quarter come in
// descending order of their lowest keys; ascending gives none, a random
// order half).
func checkDeleteOrder(t *testing.T, tap *committap.Tap, table string, want int) {
	t.Helper()
	commits := committap.Keys(tap.Commits(), table)
	var all [][]byte
	for _, c := range commits {
		all = append(all, c...)
	}
	if len(all) != want {
		t.Fatalf("the tap saw %d deletes of %s in %d commits, want %d", len(all), table, len(commits), want)
	}
	for _, c := range commits {
		if len(c) > cleanupBatchRows {
			t.Fatalf("a commit of %d deletes, want at most write.batch_rows %d (the planned batches)", len(c), cleanupBatchRows)
		}
	}
	slices.SortFunc(all, bytes.Compare)
	rank := func(k []byte) int { i, _ := slices.BinarySearchFunc(all, k, bytes.Compare); return i }
	lows := make([]int, len(commits))
	widest := 0
	for i, c := range commits {
		lo, hi := len(all), -1
		for _, k := range c {
			r := rank(k)
			lo, hi = min(lo, r), max(hi, r)
		}
		lows[i] = lo
		widest = max(widest, hi-lo+1)
	}
	if widest > len(all)/16 {
		t.Errorf("a commit's keys span %d of the %d deleted keys in key order, want at most a sixteenth (key-local)", widest, len(all))
	}
	desc, pairs := 0, 0
	for i := range lows {
		for j := i + 1; j < len(lows); j++ {
			pairs++
			if lows[j] < lows[i] {
				desc++
			}
		}
	}
	t.Logf("%d deletes in %d commits, the widest spanning %d keys; commits' lowest keys' ranks in arrival order %v: %d of %d pairs descending", len(all), len(commits), widest, lows, desc, pairs)
	if 4*desc < pairs {
		t.Errorf("%d of %d pairs of commits come in descending key order, want at least a quarter (shuffled, not ascending)", desc, pairs)
	}
}
