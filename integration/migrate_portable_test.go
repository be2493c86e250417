package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/beamtest"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

const portableDDL = `CREATE TABLE Visits (
  ShardId INT64 NOT NULL,
  UserId STRING(36) NOT NULL,
  VisitId INT64 NOT NULL,
  Page STRING(MAX),
  Code STRING(4)
) PRIMARY KEY (ShardId, UserId, VisitId)`

// TestMigrateOnJobServer runs a JSON Lines → Spanner migration with
// --runner universal on a Beam job server (prism, started standalone by
// scripts/test.sh, the way Flink and Spark job servers run), the SDK
// worker in this process (LOOPBACK): the counters come from the job
// server's metrics and the target holds exactly the expected rows.
//
// With the worker pool, the same job runs with its SDK worker in another
// process, started by the pool in a folder and TMPDIR of its own from the
// binary the job staged (no --worker_binary: rekey stages its own), as a
// Flink or Spark job server runs it; write.shuffle: always sends every
// record through the global shuffle between the processes' stages.
func TestMigrateOnJobServer(t *testing.T) {
	for _, env := range []string{"loopback", "worker pool"} {
		t.Run(env, func(t *testing.T) {
			var pool *beamtest.Pool
			if env == "loopback" {
				beamtest.UseJobServer(t)
			} else {
				pool = beamtest.UseWorkerPool(t)
			}
			migrateOnJobServer(t, env == "worker pool")
			if pool != nil {
				for _, w := range pool.Started(t) {
					t.Logf("worker %s ran as process %d in %s", w.ID, w.PID, w.Dir)
				}
			}
		})
	}
}

func migrateOnJobServer(t *testing.T, shuffle bool) {
	const n = 600
	sr := spannerRewriter(t, rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 8, "mode": "abs", "columns": []any{"UserId"}}},
		"UserId STRING(36), VisitId INT64")
	var lines []string
	want := map[string]record.Record{}
	for i := range n {
		user := fmt.Sprintf("user-%03d", i%97)
		lines = append(lines, fmt.Sprintf(`{"VisitId": %d, "UserId": %q, "Page": "/p/%d", "Code": "c%d"}`, i, user, i, i%10))
		nk, err := sr.Rewrite(nil, []rewrite.Value{rewrite.String(user), rewrite.Int64(int64(i))})
		if err != nil {
			t.Fatal(err)
		}
		want[keyText(nk)] = record.Record{Table: "Visits", Fields: []record.Field{
			{Name: "ShardId", Value: record.Int(nk[0].Int)},
			{Name: "UserId", Value: record.String(user)},
			{Name: "VisitId", Value: record.Int(int64(i))},
			{Name: "Page", Value: record.String(fmt.Sprintf("/p/%d", i))},
			{Name: "Code", Value: record.String(fmt.Sprintf("c%d", i%10))},
		}}
	}
	// One row the table refuses: Code is too long for STRING(4).
	lines = append(lines, `{"VisitId": 100000, "UserId": "u", "Code": "too long"}`)
	in := writeLines(t, "visits.jsonl", lines)
	dstID, dst := newSpannerTarget(t, "portable", portableDDL)
	cfg := loadYAML(t, fmt.Sprintf(`
source: {type: jsonl, path: %q, table: Visits, key: "UserId STRING(36), VisitId INT64"}
target: {type: spanner, project: %s, instance: %s, database: %s, table: Visits}
rewrite: {strategy: shard, params: {n: 8, mode: abs, columns: [UserId]}}
dead_letter: %q
write: {shuffle: %s}
`, in, emulator.SpannerProject(), emulator.SpannerInstance(), dstID, filepath.Join(t.TempDir(), "dead.jsonl"), map[bool]string{false: "auto", true: "always"}[shuffle]))
	start := time.Now()
	res := migrate(t, cfg, "universal")
	t.Logf("%s in %s (job %s)", res.Counters.String(), time.Since(start).Round(time.Millisecond), res.JobID)
	wantCounters(t, res, n+1, n+1, n, 1)
	if res.JobID == "" {
		t.Error("no job id")
	}
	if dead := readDeadLetters(t, cfg.DeadLetter); len(dead) != 1 || dead[0].Stage != record.StageWrite {
		t.Errorf("dead letters %+v; want the row with the long code, at stage write", dead)
	}
	checkSpannerRows(t, "universal", readRows(t, dst, "Visits"), sr.Out(), want)
}

// TestConcurrentMigrationsCountApart runs two migrations at once in this
// process on every local runner, one across the other: the first reads a
// named pipe, and the second runs between the first opening the pipe and
// the pipe being fed. Each reports exactly its own counts and writes
// exactly its own records.
func TestConcurrentMigrationsCountApart(t *testing.T) {
	const long, short = 900, 250
	for _, runner := range runners {
		t.Run(runner, func(t *testing.T) {
			dir := t.TempDir()
			fifo := filepath.Join(dir, "long.csv")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Skipf("no named pipes here: %v", err)
			}
			csv := []string{"Id,Job"}
			for k := range long {
				csv = append(csv, fmt.Sprintf("%d,long", k))
			}
			var jsonl []string
			for k := range short {
				jsonl = append(jsonl, fmt.Sprintf(`{"Id": %d, "Job": "short"}`, k))
			}
			// A line without its key: read, then dead-lettered.
			jsonl = append(jsonl, `{"Job": "short"}`)
			longCfg := loadYAML(t, fmt.Sprintf(`
source: {type: csv, path: %q, table: T, key: "Id INT64"}
target: {type: jsonl, path: %q}
rewrite: {strategy: shard, params: {n: 4, mode: abs}}
dead_letter: %q
`, fifo, filepath.Join(dir, "long.jsonl"), filepath.Join(dir, "long-dead.jsonl")))
			shortCfg := loadYAML(t, fmt.Sprintf(`
source: {type: jsonl, path: %q, table: T, key: "Id INT64"}
target: {type: jsonl, path: %q}
rewrite: {strategy: shard, params: {n: 4, mode: abs}}
dead_letter: %q
`, writeLines(t, "short.jsonl", jsonl), filepath.Join(dir, "short.jsonl"), filepath.Join(dir, "short-dead.jsonl")))

			var longRes *migration.Result
			var longErr error
			longDone := make(chan struct{})
			go func() {
				defer close(longDone)
				_, longRes, longErr = migration.Run(context.Background(), longCfg, migration.Options{}, pipeline.Runner{Runner: runner})
			}()
			// The long migration is reading when its pipe opens.
			w := openWhenRead(t, fifo, longDone)
			shortRes := migrate(t, shortCfg, runner)
			if w != nil {
				if _, err := w.WriteString(strings.Join(csv, "\n") + "\n"); err != nil {
					t.Errorf("feeding %s: %v", fifo, err)
				}
				_ = w.Close()
			}
			<-longDone
			if longErr != nil {
				t.Fatalf("long migration on %s: %v", runner, longErr)
			}
			for _, m := range []struct {
				name                string
				res                 *migration.Result
				out                 string
				read, written, dead int
			}{
				{"long", longRes, longCfg.Target.Path, long, long, 0},
				{"short", shortRes, shortCfg.Target.Path, short + 1, short, 1},
			} {
				c := m.res.Counters
				if c[migration.Read] != int64(m.read) || c[migration.Written] != int64(m.written) || c[migration.DeadLettered] != int64(m.dead) {
					t.Errorf("%s migration: counters %s; want read=%d written=%d dead_lettered=%d", m.name, c, m.read, m.written, m.dead)
				}
				if got := len(readJSONL(t, m.out)); got != m.written {
					t.Errorf("%s migration: %d records written, want %d", m.name, got, m.written)
				}
			}
		})
	}
}

// openWhenRead opens the named pipe for writing once its reader has opened
// it, unless the reading migration ends first (nil).
func openWhenRead(t *testing.T, fifo string, readerDone <-chan struct{}) *os.File {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			return f
		}
		if !errors.Is(err, syscall.ENXIO) || time.Now().After(deadline) {
			t.Errorf("opening %s: %v", fifo, err)
			return nil
		}
		select {
		case <-readerDone:
			t.Error("the migration reading the pipe ended before it opened it")
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestOnWorkerPool runs the pipeline commands' integration tests again
// with their jobs' SDK workers in processes of their own (the worker
// pool: --environment_type EXTERNAL on the prism job server, each worker
// in a folder and TMPDIR of its own, from the binary the job staged), as
// Flink and Spark run them: migrations with the global shuffle and
// interleaved children, dry runs, redrives, and the whole staged cutover
// (backfill, verify, repair, reverse backfill, cleanup, with the
// application writing) and the phase-aware load. Each worker is another
// process: nothing the test process holds is there.
//
// The staged cutover runs on the pool in poolShapes, not in all seven
// shapes, and in two stages (poolStages), not four: those three take both
// stores' readers and writers through every cohort job, with the
// children of interleaved tables, references rewritten, and entities
// turned into rows and back. In CI only the first runs (-full: all three).
func TestOnWorkerPool(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: every job on the worker pool")
	}
	pool := beamtest.UseWorkerPool(t)
	old, oldCohort := runners, cohortRunner
	runners, cohortRunner = []string{"universal"}, "universal"
	t.Cleanup(func() { runners, cohortRunner = old, oldCohort })
	for _, c := range []struct {
		name string
		test func(*testing.T)
	}{
		{"spanner to spanner, interleaved children", TestMigrateSpannerToSpanner},
		{"datastore to datastore", TestMigrateDatastoreToDatastore},
		{"dry run", TestDryRunWritesNothing},
		{"redrive", TestRedriveAfterFixingTheTarget},
		{"staged cutover", func(t *testing.T) { stagedEndToEnd(t, poolShapesOf(), poolStages) }},
		{"load", TestPhaseAwareLoad},
	} {
		before := len(pool.Workers(t))
		t.Run(c.name, c.test)
		if ran := len(pool.Workers(t)) - before; ran == 0 && !t.Failed() {
			t.Errorf("%s: no job ran on the worker pool", c.name)
		}
	}
	pool.Started(t)
}

// poolShapesOf is the staged shapes TestOnWorkerPool runs: in CI the
// first of poolShapes (old and new in two stores, each of whose jobs'
// workers reach both), with -full all of them (each also runs on prism in
// TestStagedMigrationEndToEnd).
func poolShapesOf() []stagedShape {
	if *full {
		return poolShapes
	}
	return poolShapes[:1]
}

// poolStages are the stages of the staged cutover on the worker pool:
// half the cohorts, then the rest. Every kind of job still runs on the
// pool's workers (backfill, repair, verify --mark, the reverse backfill,
// cleanup), with half the jobs of TestStagedMigrationEndToEnd's four
// stages, which each take a worker pool's staging and start.
var poolStages = [][]cohort.Range{{{First: 0, Last: 49}}, {{First: 50, Last: 99}}}

// poolShapes are the staged shapes TestOnWorkerPool runs with -full.
var poolShapes = []stagedShape{
	{"datastore to spanner", newStagedDatastoreSpanner, true},
	{"spanner interleaved", newStagedInterleaved, true},
	{"datastore references", newStagedDatastoreRefs, false},
}
