// Command writeorder measures the write order of migrations from outside
// the writer: each writer talks to the local emulator through a commit tap
// (internal/testkit/committap), which records every Commit's keys in arrival
// order, and the figures are computed from those keys alone:
//
//   - busiest: over consecutive windows of 5% of all writes, the busiest of
//     16 key ranges of equal count, as a multiple of its fair share (mean
//     over windows; 1.0 is even, a sorted copy scores about 16);
//   - ranges per commit: how many of the 16 ranges one commit writes to
//     (median).
//
// Every writer gets the same N rows sorted by their target key, the worst
// case: rekey to Spanner (swap (EventTime, UserId) → (UserId, EventTime)),
// rekey to Datastore (ids 1..N, keys unchanged), and Beam Go's
// spannerio.Write (the same rows as a struct PCollection), at its default
// batch size and at rekey's. The report is a markdown table. rekey reads
// the rows from JSON Lines files, so by default (write.shuffle auto) it
// reads them in interleaved ranges and plans without the global shuffle;
// -shuffle always measures the shuffle.
//
//	go run ./bench/writeorder [-n 20000] [-rows 10] [-shards 2] [-shuffle always] [-runner prism]
//
// It uses the emulators named by SPANNER_EMULATOR_HOST and
// DATASTORE_EMULATOR_HOST, or starts the installed ones.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/spannerio"

	"github.com/rekeyio/rekey/bench/internal/migrate"
	"github.com/rekeyio/rekey/internal/hotspot"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/rewrite"
)

const (
	oldKey   = "EventTime TIMESTAMP, UserId STRING(36)"
	newKey   = "UserId STRING(36), EventTime TIMESTAMP"
	tableDDL = `CREATE TABLE Events (UserId STRING(36) NOT NULL, EventTime TIMESTAMP NOT NULL, Bytes INT64) PRIMARY KEY (UserId, EventTime)`
	// hashedKey and hashedDDL: the same rows with hashprefix on UserId
	// (4 hex digits and "-" in front).
	hashedKey = "UserId STRING(41), EventTime TIMESTAMP"
	hashedDDL = `CREATE TABLE Events (UserId STRING(41) NOT NULL, EventTime TIMESTAMP NOT NULL, Bytes INT64) PRIMARY KEY (UserId, EventTime)`
)

// Event is a row as spannerio.Write takes it. EventTime travels as its
// RFC 3339 text, which is how Spanner's wire format carries a TIMESTAMP.
type Event struct {
	UserId    string `spanner:"UserId"`
	EventTime string `spanner:"EventTime"`
	Bytes     int64  `spanner:"Bytes"`
}

func init() {
	beam.RegisterType(reflect.TypeFor[Event]())
}

var base = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// event i: four events per user, users in order, so the rows are sorted by
// (UserId, EventTime).
func event(i int) Event {
	return Event{UserId: fmt.Sprintf("user-%07d", i/4), EventTime: base.Add(time.Duration(i%4) * time.Hour).Format(time.RFC3339), Bytes: int64(i)}
}

type result struct {
	name    string
	fig     committap.Figures
	elapsed time.Duration
	note    string
}

func main() {
	n := flag.Int("n", 20_000, "rows (and entities)")
	rows := flag.Int("rows", 10, "rekey's write.batch_rows (records per commit)")
	shards := flag.Int("shards", 2, "rekey's write.shards")
	buffer := flag.Int("buffer", 0, "rekey's write.buffer (0: the default)")
	shuffle := flag.String("shuffle", "", "rekey's write.shuffle (empty: the default, auto)")
	runner := flag.String("runner", "prism", "Beam runner")
	flag.Parse()
	beam.Init()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := run(*n, *rows, *shards, *buffer, *shuffle, *runner); err != nil {
		fmt.Fprintln(os.Stderr, "writeorder:", err)
		os.Exit(1)
	}
}

func run(n, rows, shards, buffer int, shuffle, runner string) error {
	ctx := context.Background()
	stop, err := emulator.Ensure(ctx, nil)
	if err != nil {
		return err
	}
	defer stop()
	if err := emulator.EnsureInstance(ctx, emulator.SpannerProject(), emulator.SpannerInstance()); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "writeorder-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ks, err := rewrite.ParseKeySchema("Events", newKey)
	if err != nil {
		return err
	}

	// The same rows for every writer, sorted by the target key.
	var events, items []string
	var sortedKeys [][]byte
	for i := range n {
		e := event(i)
		events = append(events, fmt.Sprintf(`{"EventTime": %q, "UserId": %q, "Bytes": %d}`, e.EventTime, e.UserId, e.Bytes))
		items = append(items, fmt.Sprintf(`{"__key__": {"path": ["Item", %d]}, "N": %d}`, i+1, i))
		at, _ := time.Parse(time.RFC3339, e.EventTime)
		sortedKeys = append(sortedKeys, rewrite.AppendSpannerKey(nil, ks, []rewrite.Value{rewrite.String(e.UserId), rewrite.Timestamp(at)}))
	}
	eventsPath, itemsPath := filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "items.jsonl")
	if err := os.WriteFile(eventsPath, []byte(strings.Join(events, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(itemsPath, []byte(strings.Join(items, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	write := fmt.Sprintf("batch_rows: %d, shards: %d", rows, shards)
	if buffer != 0 {
		write += fmt.Sprintf(", buffer: %d", buffer)
	}
	if shuffle != "" {
		write += ", shuffle: " + shuffle
	}
	write = "write: {" + write + "}"

	var results []result
	// The input order itself, committed rows at a time: what a writer
	// that keeps it would score.
	var sorted [][][]byte
	for i := 0; i < n; i += rows {
		sorted = append(sorted, sortedKeys[i:min(i+rows, n)])
	}
	results = append(results, result{name: "input order (sorted), no writer", fig: committap.Measure(sorted, hotspot.Options{}), note: fmt.Sprintf("%d rows per commit", rows)})

	// rekey → Spanner.
	db, err := migrate.NewDatabase(ctx, "wo-rekey", tableDDL)
	if err != nil {
		return err
	}
	r, err := measure(emulator.EnvSpannerHost, "Events", []rewrite.KeySchema{ks}, func() error {
		return rekey(ctx, runner, dir, fmt.Sprintf(`
source: {type: jsonl, path: %q, key: %q}
target: {type: spanner, project: %s, instance: %s, database: %s, table: Events}
rewrite: {strategy: swap, params: {order: [UserId]}}
%s
`, eventsPath, oldKey, emulator.SpannerProject(), emulator.SpannerInstance(), db, write))
	})
	if err != nil {
		return fmt.Errorf("rekey to Spanner: %w", err)
	}
	r.name, r.note = "rekey → Spanner", fmt.Sprintf("`%s`", write)
	results = append(results, r)

	// rekey → Datastore.
	ns := emulator.UniqueNamespace("writeorder")
	r, err = measure(emulator.EnvDatastoreHost, "Item", nil, func() error {
		return rekey(ctx, runner, dir, fmt.Sprintf(`
source: {type: jsonl, path: %q}
target: {type: datastore, project: %s, namespace: %s, kind: Item}
rewrite: {strategy: none}
%s
`, itemsPath, emulator.DatastoreProject(), ns, write))
	})
	if err != nil {
		return fmt.Errorf("rekey to Datastore: %w", err)
	}
	r.name, r.note = "rekey → Datastore", fmt.Sprintf("`%s`", write)
	results = append(results, r)

	// rekey with hashprefix: the new keys are scattered, so write planning
	// skips the global shuffle (unless write.shuffle is always) and plans
	// each worker's records as they come.
	noShuffle := ": no shuffle"
	if shuffle == "always" {
		noShuffle = ""
	}
	hashed, err := rewrite.ParseKeySchema("Events", hashedKey)
	if err != nil {
		return err
	}
	if db, err = migrate.NewDatabase(ctx, "wo-hash", hashedDDL); err != nil {
		return err
	}
	r, err = measure(emulator.EnvSpannerHost, "Events", []rewrite.KeySchema{hashed}, func() error {
		return rekey(ctx, runner, dir, fmt.Sprintf(`
source: {type: jsonl, path: %q, key: %q}
target: {type: spanner, project: %s, instance: %s, database: %s, table: Events}
rewrite: {strategy: hashprefix}
%s
`, eventsPath, newKey, emulator.SpannerProject(), emulator.SpannerInstance(), db, write))
	})
	if err != nil {
		return fmt.Errorf("rekey to Spanner with hashprefix: %w", err)
	}
	r.name, r.note = "rekey → Spanner, `hashprefix`"+noShuffle, fmt.Sprintf("`%s`", write)
	results = append(results, r)
	ns = emulator.UniqueNamespace("writeorder")
	r, err = measure(emulator.EnvDatastoreHost, "Item", nil, func() error {
		return rekey(ctx, runner, dir, fmt.Sprintf(`
source: {type: jsonl, path: %q}
target: {type: datastore, project: %s, namespace: %s, kind: Item}
rewrite: {strategy: hashprefix}
%s
`, itemsPath, emulator.DatastoreProject(), ns, write))
	})
	if err != nil {
		return fmt.Errorf("rekey to Datastore with hashprefix: %w", err)
	}
	r.name, r.note = "rekey → Datastore, `hashprefix`"+noShuffle, fmt.Sprintf("`%s`", write)
	results = append(results, r)

	// Beam Go's spannerio.Write, at its default batch size and at rekey's.
	for _, batch := range []int{0, rows} {
		db, err := migrate.NewDatabase(ctx, "wo-spannerio", tableDDL)
		if err != nil {
			return err
		}
		r, err := measure(emulator.EnvSpannerHost, "Events", []rewrite.KeySchema{ks}, func() error {
			return spannerioWrite(ctx, runner, db, n, batch)
		})
		if err != nil {
			return fmt.Errorf("spannerio.Write: %w", err)
		}
		r.name, r.note = "Beam Go `spannerio.Write` → Spanner", "default batch size (1,000 rows)"
		if batch > 0 {
			r.note = fmt.Sprintf("`UseBatchSize(%d)`", batch)
		}
		results = append(results, r)
	}

	fmt.Printf("%d rows sorted by the target key, %s runner; 16 ranges of equal count, windows of 5%% of all writes\n\n", n, runner)
	fmt.Println("| writer | settings | commits | rows per commit | busiest range per window (× fair share) | worst window | ranges per commit (median / max) | time |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		t := "–"
		if r.elapsed > 0 {
			t = r.elapsed.Round(100 * time.Millisecond).String()
		}
		fmt.Printf("| %s | %s | %d | %.1f | **%.2f** | %.2f | **%.1f** / %d | %s |\n",
			r.name, r.note, r.fig.Commits, r.fig.RowsPerCommit, r.fig.Busiest, r.fig.Worst, r.fig.RangesPerCommit, r.fig.MaxRangesPerCommit, t)
	}
	return nil
}

// measure runs write with a commit tap in front of the emulator named by
// env and returns the figures of the commits to table.
func measure(env, table string, keys []rewrite.KeySchema, write func() error) (result, error) {
	backend := os.Getenv(env)
	tap, err := committap.Start(backend, keys...)
	if err != nil {
		return result{}, err
	}
	defer tap.Close()
	os.Setenv(env, tap.Addr())
	defer os.Setenv(env, backend)
	start := time.Now()
	if err := write(); err != nil {
		return result{}, err
	}
	elapsed := time.Since(start)
	return result{fig: committap.Measure(committap.Keys(tap.Commits(), table), hotspot.Options{}), elapsed: elapsed}, nil
}

// rekey runs a migration as `rekey run --create-target` does.
func rekey(ctx context.Context, runner, dir, yaml string) error {
	_, err := migrate.Run(ctx, runner, dir, yaml, nil)
	return err
}

// spannerioWrite writes the n rows, in order, with Beam Go's
// spannerio.Write (batch 0: its default).
func spannerioWrite(ctx context.Context, runner, db string, n, batch int) error {
	p, s := beam.NewPipelineWithRoot()
	rows := make([]Event, n)
	for i := range rows {
		rows[i] = event(i)
	}
	var opts []spannerio.WriteOptionsFn
	if batch > 0 {
		opts = append(opts, spannerio.UseBatchSize(batch))
	}
	spannerio.Write(s, spannerdb.DatabasePath(emulator.SpannerProject(), emulator.SpannerInstance(), db), "Events", beam.CreateList(s, rows), opts...)
	_, err := beam.Run(ctx, runner, p)
	return err
}
