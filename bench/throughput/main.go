// Command throughput measures write throughput against the local
// emulators, side by side in one run:
//
//   - Spanner: rekey's pipeline (JSON Lines source → rewrite → write
//     planning → sink.Spanner, what `rekey run` builds) against Beam Go's
//     spannerio.Write, on the same rows and the same runner, and against
//     a plain Go loop of the official client (Apply of 500 mutations at a
//     time);
//   - Datastore: rekey's pipeline into a Datastore target against a plain
//     Go program: G goroutines, each committing 500 entities at a time with
//     PutMulti;
//   - load: `rekey load` through the cutover library (every cohort done,
//     so each record goes to new only) against `rekey run` of the same
//     JSON Lines file into an empty Datastore namespace.
//
// Every side writes the same N rows (entities), sorted by key, into a
// fresh database (namespace), with ramp-up off. The sides take turns at
// going first and run --reps times; the report gives each side's median
// rows/s and the ratio of the medians, plus the write concurrency each
// side reached (measured from the client libraries' commit spans).
//
// "Same parallelism" for the Datastore baseline: G is the number of
// commits rekey's Datastore sink has in flight at once in a worker process,
// write.parallelism (default 8); --goroutines overrides it.
//
//	go run ./bench/throughput [--rows 100000] [--runner prism] [--reps 3] [--only spanner|datastore|load]
//
// For investigating: --goroutines, --spannerio-batch, --strategy, --write
// (rekey's write settings as YAML) and --profile DIR (a CPU profile per
// side and rep).
//
// It uses the emulators named by SPANNER_EMULATOR_HOST and
// DATASTORE_EMULATOR_HOST, or starts the installed ones.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/spannerio"

	"github.com/rekeyio/rekey/bench/internal/migrate"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

const (
	table = "Accounts"
	kind  = "Account"
	// sourceKey is the key of the input rows; hashprefix makes AccountId
	// STRING(41), so both Spanner sides write into this table.
	sourceKey = "AccountId STRING(36), Seq INT64"
	tableDDL  = `CREATE TABLE Accounts (
	AccountId STRING(41) NOT NULL,
	Seq INT64 NOT NULL,
	Name STRING(64),
	Email STRING(128),
	Amount INT64,
	Note STRING(256),
) PRIMARY KEY (AccountId, Seq)`
	// putBatch is the baseline's entities per PutMulti.
	putBatch = 500
)

// Account is one row (entity), about 200 bytes of values. Spanner gets
// it as is (spannerio.Write), Datastore under the name key
// AccountId.Seq.
type Account struct {
	AccountId string `spanner:"AccountId" datastore:"AccountId"`
	Seq       int64  `spanner:"Seq" datastore:"Seq"`
	Name      string `spanner:"Name" datastore:"Name"`
	Email     string `spanner:"Email" datastore:"Email"`
	Amount    int64  `spanner:"Amount" datastore:"Amount"`
	Note      string `spanner:"Note" datastore:"Note"`
}

func init() {
	beam.RegisterType(reflect.TypeFor[Account]())
}

const filler = "Preferred contact by email; invoices monthly; net 30 terms agreed with the account team in the last review."

// account i: four rows per account, accounts in order, so the rows are
// sorted by (AccountId, Seq) and the entities by name.
func account(i int) Account {
	a := i / 4
	return Account{
		AccountId: fmt.Sprintf("acct-%08d", a),
		Seq:       int64(i % 4),
		Name:      fmt.Sprintf("Customer %d of region %d", a, a%17),
		Email:     fmt.Sprintf("customer%08d@example.com", a),
		Amount:    int64(i*7919) % 1_000_000,
		Note:      filler[:90+i%16],
	}
}

func (a *Account) name() string { return fmt.Sprintf("%s.%d", a.AccountId, a.Seq) }

func (a *Account) fields() []record.Field {
	return []record.Field{
		{Name: "AccountId", Value: record.String(a.AccountId)},
		{Name: "Seq", Value: record.Int(a.Seq)},
		{Name: "Name", Value: record.String(a.Name)},
		{Name: "Email", Value: record.String(a.Email)},
		{Name: "Amount", Value: record.Int(a.Amount)},
		{Name: "Note", Value: record.String(a.Note)},
	}
}

type options struct {
	rows, reps, goroutines, spannerioBatch int
	runner, only, strategy, write, profile string
}

func (o options) writeYAML() string {
	if o.write == "" {
		return ""
	}
	return "write: " + o.write + "\n"
}

func (o options) writeText(commit string) string {
	if o.write == "" {
		return "the default write settings (" + commit + " per commit)"
	}
	return "`write: " + o.write + "`"
}

func main() {
	var o options
	flag.IntVar(&o.rows, "rows", 100_000, "rows (entities) each side writes")
	flag.StringVar(&o.runner, "runner", "prism", "Beam runner for both pipelines")
	flag.IntVar(&o.reps, "reps", 3, "repetitions per side (the report gives medians)")
	flag.StringVar(&o.only, "only", "", "spanner, datastore or load: measure one comparison only")
	flag.IntVar(&o.goroutines, "goroutines", 0, "the Datastore baseline's goroutines (0: rekey's write parallelism, see the package doc)")
	flag.IntVar(&o.spannerioBatch, "spannerio-batch", 0, "spannerio.Write's batch size (0: its default, 1,000)")
	flag.StringVar(&o.strategy, "strategy", "hashprefix", "rekey's rewrite strategy (its defaults)")
	flag.StringVar(&o.write, "write", "", "rekey's write settings as YAML, e.g. '{shards: 1, buffer: 200000}' (empty: the defaults)")
	flag.StringVar(&o.profile, "profile", "", "write a CPU profile of each side's every run into this directory (STORE-SIDE-REP.prof)")
	flag.Parse()
	beam.Init()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if o.only != "" && o.only != "spanner" && o.only != "datastore" && o.only != "load" {
		fmt.Fprintln(os.Stderr, "throughput: --only: want spanner, datastore or load")
		os.Exit(2)
	}
	// A signal cancels the run, so that the emulators it started stop.
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "throughput:", err)
		os.Exit(1)
	}
}

// sample is one side's run.
type sample struct {
	elapsed time.Duration
	commits commitStats
	// cpu is this process's CPU time during the run: the Beam workers
	// and prism run in it, the emulators do not.
	cpu time.Duration
}

func (s sample) rate(rows int) float64 { return float64(rows) / s.elapsed.Seconds() }

func run(ctx context.Context, o options) error {
	stop, err := emulator.Ensure(ctx, func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	})
	if err != nil {
		return err
	}
	defer stop()
	dir, err := os.MkdirTemp("", "throughput-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rows := make([]Account, o.rows)
	for i := range rows {
		rows[i] = account(i)
	}
	host, _ := os.Hostname()
	fmt.Printf("%d rows of ~%d bytes sorted by key, %s runner, %d reps; %s, GOMAXPROCS %d, %d CPUs, host %s\n",
		o.rows, rowBytes(rows), o.runner, o.reps, runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), host)
	if o.only == "" || o.only == "spanner" {
		if err := compareSpanner(ctx, o, dir, rows); err != nil {
			return fmt.Errorf("spanner: %w", err)
		}
	}
	if o.only == "" || o.only == "datastore" {
		if err := compareDatastore(ctx, o, dir, rows); err != nil {
			return fmt.Errorf("datastore: %w", err)
		}
	}
	if o.only == "" || o.only == "load" {
		if err := compareLoad(ctx, o, dir, rows); err != nil {
			return fmt.Errorf("load: %w", err)
		}
	}
	return nil
}

// rowBytes is the mean size of a row's values.
func rowBytes(rows []Account) int {
	n := 0
	for _, a := range rows {
		n += len(a.AccountId) + 8 + len(a.Name) + len(a.Email) + 8 + len(a.Note)
	}
	return n / max(len(rows), 1)
}

// writeJSONL writes the rows as rekey's JSON Lines records, with a
// Datastore key when kind is set.
func writeJSONL(path string, rows []Account, kind string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var buf []byte
	for i := range rows {
		r := record.Record{Fields: rows[i].fields()}
		if kind != "" {
			r.Key = &rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: kind, Name: rows[i].name()}}}
		}
		buf = append(record.AppendJSON(buf[:0], &r, false), '\n')
		w.Write(buf)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// rekeyRun prepares the migration described by yaml, then runs its
// pipeline while the commit spans named span are watched; the time is the
// pipeline's run (migration.Result.Elapsed).
func rekeyRun(ctx context.Context, o options, dir, yaml, span string) (sample, error) {
	var s sample
	res, err := migrate.Run(ctx, o.runner, dir, yaml, func(run func() error) error {
		var err error
		s, err = timed(span, func() (time.Duration, error) {
			start := time.Now()
			err := run()
			return time.Since(start), err
		})
		return err
	})
	if err != nil {
		return s, err
	}
	s.elapsed = res.Elapsed // the pipeline's run, as beam.Run timed it
	if w := res.Counters["written"]; w != int64(o.rows) {
		return s, fmt.Errorf("rekey wrote %d records, want %d (counters: %v)", w, o.rows, res.Counters)
	}
	return s, nil
}

// timed runs write while the commit spans named span are watched, and
// measures this process's CPU time.
func timed(span string, write func() (time.Duration, error)) (sample, error) {
	cpu := cpuTime()
	watch.begin(span)
	elapsed, err := write()
	st := watch.end()
	return sample{elapsed: elapsed, commits: st, cpu: cpuTime() - cpu}, err
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func compareSpanner(ctx context.Context, o options, dir string, rows []Account) error {
	if err := emulator.EnsureInstance(ctx, emulator.SpannerProject(), emulator.SpannerInstance()); err != nil {
		return err
	}
	in := filepath.Join(dir, "accounts.jsonl")
	if err := writeJSONL(in, rows, ""); err != nil {
		return err
	}
	sides := []side{
		{name: fmt.Sprintf("rekey run → Spanner (%s)", o.runner), tag: "spanner-rekey", run: func() (sample, error) {
			db, err := migrate.NewDatabase(ctx, "tp-rekey", tableDDL)
			if err != nil {
				return sample{}, err
			}
			s, err := rekeyRun(ctx, o, dir, fmt.Sprintf(`
source: {type: jsonl, path: %q, table: %s, key: %q}
target: {type: spanner, project: %s, instance: %s, database: %s, table: %s}
rewrite: {strategy: %s}
ramp: {profile: none}
%s`, in, table, sourceKey, emulator.SpannerProject(), emulator.SpannerInstance(), db, table, o.strategy, o.writeYAML()), spannerApplySpan)
			if err == nil {
				err = migrate.CheckRows(ctx, db, table, o.rows)
			}
			return s, err
		}},
		{name: fmt.Sprintf("Beam Go `spannerio.Write` (%s)", o.runner), tag: "spanner-spannerio", run: func() (sample, error) {
			db, err := migrate.NewDatabase(ctx, "tp-spannerio", tableDDL)
			if err != nil {
				return sample{}, err
			}
			s, err := timed(spannerApplySpan, func() (time.Duration, error) {
				return spannerioWrite(ctx, o, db, rows)
			})
			if err == nil {
				err = migrate.CheckRows(ctx, db, table, o.rows)
			}
			return s, err
		}},
		{name: fmt.Sprintf("plain Go, `Client.Apply` of %d rows at a time", applyBatch), tag: "spanner-apply", run: func() (sample, error) {
			db, err := migrate.NewDatabase(ctx, "tp-apply", tableDDL)
			if err != nil {
				return sample{}, err
			}
			s, err := timed(spannerApplySpan, func() (time.Duration, error) {
				return applyLoop(ctx, db, rows)
			})
			if err == nil {
				err = migrate.CheckRows(ctx, db, table, o.rows)
			}
			return s, err
		}},
	}
	batch := "its default batch of 1,000 rows per commit"
	if o.spannerioBatch > 0 {
		batch = fmt.Sprintf("`UseBatchSize(%d)`", o.spannerioBatch)
	}
	fmt.Printf("\nSpanner: rekey with `rewrite: {strategy: %s}` and %s, against `spannerio.Write` with %s, and against a plain Go loop of the official client: `Apply` (at least once, as rekey's upserts) of %d `InsertOrUpdate` mutations at a time, one commit in flight, the next batch's mutations built meanwhile\n\n", o.strategy, o.writeText("500 rows"), batch, applyBatch)
	return compare(o, sides)
}

// applyBatch is the plain Spanner loop's rows per commit, rekey's default
// write.batch_rows.
const applyBatch = 500

// applyLoop writes the rows in key order with the official client alone,
// as a plain Go program would: one goroutine builds each batch's
// InsertOrUpdate mutations while another commits the previous batch with
// Apply (at least once). The time includes opening the client, as
// rekey's and spannerio's do.
func applyLoop(ctx context.Context, db string, rows []Account) (time.Duration, error) {
	start := time.Now()
	c, err := emulator.SpannerClient(ctx, spannerdb.DatabasePath(emulator.SpannerProject(), emulator.SpannerInstance(), db))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []*spanner.Mutation, 1)
	var buildErr error
	go func() {
		defer close(batches)
		for i := 0; i < len(rows); i += applyBatch {
			chunk := rows[i:min(i+applyBatch, len(rows))]
			ms := make([]*spanner.Mutation, len(chunk))
			for j := range chunk {
				if ms[j], buildErr = spanner.InsertOrUpdateStruct(table, &chunk[j]); buildErr != nil {
					return
				}
			}
			select {
			case batches <- ms:
			case <-ctx.Done():
				return
			}
		}
	}()
	for ms := range batches {
		if _, err := c.Apply(ctx, ms, spanner.ApplyAtLeastOnce()); err != nil {
			return 0, err
		}
	}
	if buildErr != nil {
		return 0, buildErr
	}
	return time.Since(start), nil
}

// spannerioWrite writes the rows, in order, with Beam Go's
// spannerio.Write, and returns the pipeline's run time (beam.Run, as
// pipeline.Result.Elapsed for rekey).
func spannerioWrite(ctx context.Context, o options, db string, rows []Account) (time.Duration, error) {
	p, s := beam.NewPipelineWithRoot()
	var opts []spannerio.WriteOptionsFn
	if o.spannerioBatch > 0 {
		opts = append(opts, spannerio.UseBatchSize(o.spannerioBatch))
	}
	spannerio.Write(s, spannerdb.DatabasePath(emulator.SpannerProject(), emulator.SpannerInstance(), db), table, beam.CreateList(s, rows), opts...)
	start := time.Now()
	if _, err := beam.Run(ctx, o.runner, p); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func compareDatastore(ctx context.Context, o options, dir string, rows []Account) error {
	in := filepath.Join(dir, "entities.jsonl")
	if err := writeJSONL(in, rows, kind); err != nil {
		return err
	}
	client, err := emulator.DatastoreClient(ctx, emulator.DatastoreProject())
	if err != nil {
		return err
	}
	defer client.Close()
	g, why := o.goroutines, "--goroutines"
	if g == 0 {
		g, why = writeParallelism(o)
	}
	sides := []side{
		{name: fmt.Sprintf("rekey run → Datastore (%s)", o.runner), tag: "datastore-rekey", run: func() (sample, error) {
			return runToDatastore(ctx, o, dir, in, client, "tprekey")
		}},
		{name: fmt.Sprintf("plain Go, %d goroutines × PutMulti(%d)", g, putBatch), tag: "datastore-putmulti", run: func() (sample, error) {
			ns := emulator.UniqueNamespace("tpplain")
			s, err := timed(datastoreCommitSpan, func() (time.Duration, error) {
				return putMulti(ctx, client, ns, rows, g)
			})
			if err == nil {
				err = checkDatastore(ctx, client, ns, o.rows)
			}
			return s, err
		}},
	}
	// The Firestore emulator runs on a JVM, cold at first: one untimed
	// write of the rows warms it before the measured reps.
	if _, err := putMulti(ctx, client, emulator.UniqueNamespace("tpwarm"), rows, g); err != nil {
		return fmt.Errorf("warming the emulator up: %w", err)
	}
	fmt.Printf("\nDatastore: rekey with `rewrite: {strategy: %s}` and %s, against %d goroutines (%s) each committing 500 entities at a time with PutMulti, one shared client\n\n", o.strategy, o.writeText("500 entities"), g, why)
	return compare(o, sides)
}

// runToDatastore runs `rekey run` of the JSON Lines file in into a new
// namespace (named from prefix) and checks that it holds every row.
func runToDatastore(ctx context.Context, o options, dir, in string, client *datastore.Client, prefix string) (sample, error) {
	ns := emulator.UniqueNamespace(prefix)
	s, err := rekeyRun(ctx, o, dir, fmt.Sprintf(`
source: {type: jsonl, path: %q}
target: {type: datastore, project: %s, namespace: %s, kind: %s}
rewrite: {strategy: %s}
ramp: {profile: none}
%s`, in, emulator.DatastoreProject(), ns, kind, o.strategy, o.writeYAML()), datastoreCommitSpan)
	if err == nil {
		err = checkDatastore(ctx, client, ns, o.rows)
	}
	return s, err
}

// writeParallelism is the number of commits rekey's Datastore sink has
// in flight at once in a worker process (write.parallelism, unless --write sets
// it).
func writeParallelism(o options) (int, string) {
	return config.DefaultDatastoreParallelism, fmt.Sprintf("rekey's write.parallelism, %d commits in flight per worker process", config.DefaultDatastoreParallelism)
}

// putMulti writes the rows as entities with g goroutines, each taking the
// next 500 rows in key order and committing them with PutMulti.
func putMulti(ctx context.Context, c *datastore.Client, ns string, rows []Account, g int) (time.Duration, error) {
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, g)
	for w := range g {
		wg.Go(func() {
			keys := make([]*datastore.Key, 0, putBatch)
			for {
				i := int(next.Add(putBatch)) - putBatch
				if i >= len(rows) {
					return
				}
				chunk := rows[i:min(i+putBatch, len(rows))]
				keys = keys[:0]
				for j := range chunk {
					k := datastore.NameKey(kind, chunk[j].name(), nil)
					k.Namespace = ns
					keys = append(keys, k)
				}
				if _, err := c.PutMulti(ctx, keys, chunk); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

func checkDatastore(ctx context.Context, c *datastore.Client, ns string, want int) error {
	res, err := c.RunAggregationQuery(ctx, datastore.NewQuery(kind).Namespace(ns).KeysOnly().NewAggregationQuery().WithCount("n"))
	if err != nil {
		return err
	}
	v, ok := res["n"].(interface{ GetIntegerValue() int64 })
	if !ok {
		return fmt.Errorf("count of namespace %s: got %T", ns, res["n"])
	}
	if n := v.GetIntegerValue(); n != int64(want) {
		return fmt.Errorf("namespace %s holds %d entities, want %d", ns, n, want)
	}
	return nil
}

// side is one writer of a comparison; run writes the rows once. tag
// names its profiles.
type side struct {
	name, tag string
	run       func() (sample, error)
}

// profiled runs run with a CPU profile written to dir/name.prof, if dir
// is set.
func profiled(dir, name string, run func() (sample, error)) (sample, error) {
	if dir == "" {
		return run()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return sample{}, err
	}
	f, err := os.Create(filepath.Join(dir, name+".prof"))
	if err != nil {
		return sample{}, err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return sample{}, err
	}
	defer pprof.StopCPUProfile()
	return run()
}

// compare runs both sides o.reps times, alternating which goes first, and
// prints each run and the medians; the first side is rekey's.
func compare(o options, sides []side) error {
	samples := make([][]sample, len(sides))
	fmt.Println("| rep | side | time | rows/s | commits | in flight (mean / max) | first commit after | writer CPU |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for rep := range o.reps {
		// Each rep starts with the next side (rekey first in the first).
		for k := range sides {
			i := (rep + k) % len(sides)
			s, err := profiled(o.profile, fmt.Sprintf("%s-%d", sides[i].tag, rep+1), sides[i].run)
			if err != nil {
				return fmt.Errorf("%s: %w", sides[i].name, err)
			}
			samples[i] = append(samples[i], s)
			c := s.commits
			fmt.Printf("| %d | %s | %.2f s | %.0f | %d | %.2f / %d | %.2f s | %.1f s |\n", rep+1, sides[i].name, s.elapsed.Seconds(), s.rate(o.rows),
				c.n, c.mean, c.max, c.first.Seconds(), s.cpu.Seconds())
			runtime.GC()
		}
	}
	fmt.Println()
	fmt.Println("| side | median time | median rows/s |")
	fmt.Println("|---|---|---|")
	medians := make([]float64, len(sides))
	for i, ss := range samples {
		rates := make([]float64, len(ss))
		for j, s := range ss {
			rates[j] = s.rate(o.rows)
		}
		slices.Sort(rates)
		medians[i] = rates[len(rates)/2]
		if len(rates)%2 == 0 {
			medians[i] = (rates[len(rates)/2-1] + rates[len(rates)/2]) / 2
		}
		fmt.Printf("| %s | %.2f s | %.0f |\n", sides[i].name, float64(o.rows)/medians[i], medians[i])
	}
	fmt.Println()
	for i := 1; i < len(sides); i++ {
		fmt.Printf("throughput ratio rekey/%s: %.2fx (medians of %d)\n", strings.SplitN(sides[i].name, " (", 2)[0], medians[0]/medians[i], o.reps)
	}
	return nil
}
