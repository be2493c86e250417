// Command verify measures `rekey verify` against a plain read of both
// sides, in one run on the Spanner emulator: N rows of Logs (old) are
// migrated into LogsV2 (new, a shard column in front); then, alternating
// which goes first, --reps times each:
//
//   - the baseline: a Beam job on the same runner that reads old and new
//     with the same source rekey's jobs use (partitioned reads of both
//     tables) and counts the rows;
//   - rekey's verify of every cohort (operator.Verify: the same reads,
//     the rewrite of old, the join by new key, the comparison, the
//     rechecks of the findings, the report).
//
// --extra adds rows to new that old does not hold: each is a finding,
// read again before it counts. The report gives each side's median wall
// time and rows/s, and the ratio of the medians.
//
//	go run ./bench/verify [-n 100000] [-extra 0] [-reps 3] [-runner prism]
//
// It uses the emulator named by SPANNER_EMULATOR_HOST, or starts the
// installed one.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/bench/internal/migrate"
	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms/source"
)

const (
	logsDDL   = `CREATE TABLE Logs (UserId STRING(36) NOT NULL, Seq INT64 NOT NULL, Page STRING(MAX)) PRIMARY KEY (UserId, Seq)`
	logsV2DDL = `CREATE TABLE LogsV2 (ShardId INT64 NOT NULL, UserId STRING(36) NOT NULL, Seq INT64 NOT NULL, Page STRING(MAX)) PRIMARY KEY (ShardId, UserId, Seq)`
	buckets   = 100
	users     = 1000
)

var rowsRead = beam.NewCounter("bench", "rows_read")

func init() { register.Function2x0(countRows) }

// countRows counts a batch's rows.
func countRows(ctx context.Context, batch record.Batch) { rowsRead.Inc(ctx, int64(batch.Len())) }

func main() {
	n := flag.Int("n", 100_000, "rows in old (and, migrated, in new)")
	extra := flag.Int("extra", 0, "rows only new holds (each a finding)")
	reps := flag.Int("reps", 3, "runs of each side")
	runner := flag.String("runner", "prism", "Beam runner")
	flag.Parse()
	beam.Init()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := run(context.Background(), *n, *extra, *reps, *runner); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n, extra, reps int, runner string) error {
	stop, err := migrate.UseSpanner(ctx)
	defer stop()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	oldDB, err := migrate.NewDatabase(ctx, "vold", logsDDL)
	if err != nil {
		return err
	}
	newDB, err := migrate.NewDatabase(ctx, "vnew", append([]string{logsV2DDL}, phases.SpannerDDL...)...)
	if err != nil {
		return err
	}
	if err := fill(ctx, oldDB, n, func(i int) *spanner.Mutation {
		return spanner.Insert("Logs", []string{"UserId", "Seq", "Page"}, []any{fmt.Sprintf("user-%04d", i%users), int64(i), fmt.Sprintf("page %d of the log", i)})
	}); err != nil {
		return fmt.Errorf("filling old: %w", err)
	}
	yaml := fmt.Sprintf(`
source: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: Logs}
target: {type: spanner, project: %[1]s, instance: %[2]s, database: %[4]s, table: LogsV2}
rewrite: {strategy: shard, params: {n: 8, mode: abs}}
cohort: {user: UserId, buckets: %[5]d}
`, emulator.SpannerProject(), emulator.SpannerInstance(), oldDB, newDB, buckets)
	if _, err := migrate.Run(ctx, runner, dir, yaml, nil); err != nil {
		return fmt.Errorf("migrating old to new: %w", err)
	}
	if err := fill(ctx, newDB, extra, func(i int) *spanner.Mutation {
		return spanner.Insert("LogsV2", []string{"ShardId", "UserId", "Seq", "Page"}, []any{int64(0), fmt.Sprintf("user-%04d", i%users), int64(n + i), "extra"})
	}); err != nil {
		return fmt.Errorf("adding the extra rows: %w", err)
	}
	cfg, err := migrate.LoadConfig(filepath.Join(dir, "rekey.yaml"), filepath.Join(dir, "dead.jsonl"))
	if err != nil {
		return err
	}
	j, err := migration.Resolve(ctx, cfg)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	fmt.Printf("%d rows in old and new, %d more in new only; %s runner, %d reps; %s, GOMAXPROCS %d, %d CPUs, host %s\n",
		n, extra, runner, reps, runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), host)
	var base, ver []time.Duration
	for rep := range reps {
		sides := []func() error{
			func() error {
				d, err := plainRead(ctx, j, runner, int64(2*n+extra))
				base = append(base, d)
				return err
			},
			func() error {
				d, err := verify(ctx, cfg, runner, dir, n, extra)
				ver = append(ver, d)
				return err
			},
		}
		if rep%2 == 1 {
			slices.Reverse(sides)
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return err
			}
		}
	}
	b, v := median(base), median(ver)
	rows := float64(2*n + extra)
	fmt.Printf("plain read of old and new (baseline): median %.2f s, %.0f rows/s  %v\n", b.Seconds(), rows/b.Seconds(), base)
	fmt.Printf("rekey verify:                         median %.2f s, %.0f rows/s  %v\n", v.Seconds(), rows/v.Seconds(), ver)
	fmt.Printf("verify / plain read: %.2fx the time\n", v.Seconds()/b.Seconds())
	return nil
}

// fill writes n rows, 2,000 a commit.
func fill(ctx context.Context, db string, n int, row func(i int) *spanner.Mutation) error {
	c, err := spanner.NewClient(ctx, spannerdb.DatabasePath(emulator.SpannerProject(), emulator.SpannerInstance(), db))
	if err != nil {
		return err
	}
	defer c.Close()
	for i := 0; i < n; i += 2000 {
		var ms []*spanner.Mutation
		for k := i; k < min(n, i+2000); k++ {
			ms = append(ms, row(k))
		}
		if _, err := c.Apply(ctx, ms); err != nil {
			return err
		}
	}
	return nil
}

// plainRead reads old and new with rekey's Spanner source in one Beam
// job and counts the rows (want of them).
func plainRead(ctx context.Context, j *migration.Job, runner string, want int64) (time.Duration, error) {
	start := time.Now()
	p, s := beam.NewPipelineWithRoot()
	for _, e := range []config.Endpoint{j.Config.Source, j.Config.Target} {
		batches, _ := source.Spanner(s, source.SpannerConfig{Project: e.Project, Instance: e.Instance, Database: e.Database, Table: e.Table})
		beam.ParDo0(s, countRows, batches)
	}
	pr, err := beam.Run(ctx, runner, p)
	if err != nil {
		return 0, fmt.Errorf("plain read: %w", err)
	}
	d := time.Since(start)
	var got int64
	for _, c := range pr.Metrics().AllMetrics().Counters() {
		if c.Name() == "rows_read" {
			got += c.Result()
		}
	}
	if got != want {
		return d, fmt.Errorf("plain read: %d rows, want %d", got, want)
	}
	return d, nil
}

// verify runs rekey's verify of every cohort and checks its counts.
func verify(ctx context.Context, cfg *config.Config, runner, dir string, n, extra int) (time.Duration, error) {
	start := time.Now()
	report, _, _, err := operator.Verify(ctx, cfg, operator.VerifyOptions{Migration: "bench", Cohorts: []cohort.Range{{First: 0, Last: buckets - 1}}, ReportPath: filepath.Join(dir, "verify.jsonl")}, pipeline.Runner{Runner: runner})
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("verify: %w", err)
	}
	t := operator.TotalOf(report)
	if t.Matching != n || t.Extra != extra || t.Missing+t.Mismatched+t.Settled != 0 {
		return d, fmt.Errorf("verify: %+v, want %d matching and %d extra in new", t, n, extra)
	}
	return d, nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
