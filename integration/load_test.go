package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/write/throttle"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/record"
)

// TestPhaseAwareLoad loads a file of new records (rekey load) while a
// staged migration is under way, with users in three cohorts: one in old,
// one in dual_write, one in new_only. Each record must land where its
// cohort's phase says — old only, both, new only — and be counted so.
func TestPhaseAwareLoad(t *testing.T) {
	for _, se := range slices.Concat(stagedEnvs, stagedCross) {
		t.Run(se.name, func(t *testing.T) {
			ctx := context.Background()
			e := se.make(t)
			// Three users in three cohorts.
			inPhase := []phases.Phase{phases.Old, phases.DualWrite, phases.NewOnly}
			var users []string
			seen := map[int]bool{}
			for i := 0; len(users) < len(inPhase); i++ {
				u := fmt.Sprintf("load-user-%d", i)
				if !seen[cohortOf(u)] {
					seen[cohortOf(u)] = true
					users = append(users, u)
				}
			}
			for i, p := range inPhase[1:] {
				if _, _, err := e.phases.Move(ctx, phases.Move{Migration: e.migration, Buckets: stagedBuckets, Cohorts: one(cohortOf(users[i+1])), To: p, Force: true, Who: "test"}); err != nil {
					t.Fatal(err)
				}
			}
			for i, p := range inPhase {
				e.waitSeen(t, cohortOf(users[i]), p)
			}
			waitHold() // dual_write writes both once every instance does

			const seqs = 4
			var lines []byte
			for _, u := range users {
				for q := range int64(seqs) {
					r := e.rec(u, q, "loaded")
					lines = append(record.AppendJSON(lines, &r, true), '\n')
				}
			}
			path := filepath.Join(t.TempDir(), "new.jsonl")
			if err := os.WriteFile(path, lines, 0o644); err != nil {
				t.Fatal(err)
			}
			_, res, err := operator.Load(ctx, e.cfg, operator.LoadFiles{Path: path, Format: "jsonl", Delimiter: ",", Migration: e.migration}, pipeline.Runner{Runner: cohortRunner})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("load: %s", res.Counters)
			c := res.Counters
			if c[operator.LoadOldOnly] != seqs || c[operator.LoadBoth] != seqs || c[operator.LoadNewOnly] != seqs || c["dead_lettered"] != 0 {
				t.Errorf("counters %s; want %d records each to old only, both and new only", c, seqs)
			}
			old, nw := e.oldPages(t), e.newPages(t)
			for i, u := range users {
				inOld, inNew := inPhase[i] != phases.NewOnly, inPhase[i] != phases.Old
				for q := range int64(seqs) {
					k := logID(u, q)
					if (old[k] == "loaded") != inOld || (nw[k] == "loaded") != inNew {
						t.Errorf("%s (cohort %s): old %q, new %q; want in old %v, in new %v", k, inPhase[i], old[k], nw[k], inOld, inNew)
					}
				}
			}
		})
	}
}

// TestLoadRampUp: a phase-aware load goes under the job's ramp-up as a
// run does. rampRows records of users whose cohorts are in old are
// loaded under the ramp of TestRampUp; the commits of old's table that
// reached the emulator (the commit tap) are judged by checkRamp: no
// second over 1.15x the schedule's budget, and at least 80% of it used.
func TestLoadRampUp(t *testing.T) {
	for _, se := range stagedEnvs {
		t.Run(se.name, func(t *testing.T) {
			ctx := context.Background()
			e := se.make(t)
			host := emulator.EnvSpannerHost
			if e.store == "datastore" {
				host = emulator.EnvDatastoreHost
			}
			tap := startTap(t, host)
			cfg := *e.cfg
			cfg.Ramp = config.RampConfig{Profile: throttle.ProfileCustom, Base: rampBase, Growth: rampGrowth, IntervalSeconds: rampInterval.Seconds()}
			var lines []byte
			for i := range rampRows {
				r := e.rec(fmt.Sprintf("ramp-user-%04d", i/4), int64(i%4), "loaded")
				lines = append(record.AppendJSON(lines, &r, true), '\n')
			}
			path := filepath.Join(t.TempDir(), "new.jsonl")
			if err := os.WriteFile(path, lines, 0o644); err != nil {
				t.Fatal(err)
			}
			_, res, err := operator.Load(ctx, &cfg, operator.LoadFiles{Path: path, Format: "jsonl", Delimiter: ",", Migration: e.migration}, pipeline.Runner{Runner: cohortRunner})
			if err != nil {
				t.Fatal(err)
			}
			if c := res.Counters; c[operator.LoadOldOnly] != rampRows || c["dead_lettered"] != 0 {
				t.Fatalf("counters %s; want %d records to old only", c, rampRows)
			}
			if res.Counters["throttled_ms"] == 0 {
				t.Errorf("throttled_ms is 0: the ramp never held the load back")
			}
			table := cfg.Source.Table
			if table == "" {
				table = cfg.Source.Kind
			}
			checkRamp(t, tap, res, table)
		})
	}
}
