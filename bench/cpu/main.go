// Command cpu measures the CPU time `rekey run` spends per million records
// against a plain Go program doing the same work (bench/cpu/plain), on five
// paths:
//
//   - files-files: JSON Lines rows → shard → JSON Lines;
//   - files-spanner: JSON Lines rows → shard → Spanner (emulator);
//   - files-datastore: JSON Lines entities → hashprefix → Datastore
//     (emulator);
//   - spanner-spanner: a Spanner table → shard → a table of another
//     database;
//   - datastore-datastore: a Datastore kind → hashprefix → another
//     namespace.
//
// The rekey side is the real CLI, built from ./cmd/rekey and run as users
// run it (`rekey run -c CONFIG --runner prism`: prism in the rekey process,
// its SDK workers in loopback); the plain side reads the same records,
// rewrites each key with rekey's rewrite package (same strategy, same
// parameters) and writes with the official clients. Each run is a child
// process writing into an empty target (a new file, database or
// namespace); its CPU time (user + system, getrusage of the child), wall
// time and peak RSS (VmHWM of /proc/PID/status) come from the OS. The
// emulators' CPU time during the run is read from /proc and reported
// apart. Every run of a path must write the same records (a fingerprint
// of the target: its lines, rows' values or entities' keys). The sides
// alternate which goes first, -reps times per path; the report gives the
// medians, the ratios of the medians and whether the goals were met.
//
// Then one more run of each side on each path of -profile-paths (by
// default files-files) writes a CPU profile: the plain program's with
// -cpuprofile, rekey's from a child of this command that runs the same
// config through migration.Run, as `rekey run` does, under runtime/pprof
// (the CLI has no profiling flag). The report splits both profiles into
// kinds of work and lists rekey's busiest functions. The emulators run in
// processes of their own, so their CPU is in neither profile. -reps 0
// measures nothing and only profiles.
//
//	go run ./bench/cpu [-files-n 1000000] [-store-n 100000] [-datastore-n 20000] [-reps 3] [-paths files-files,...] [-profile-paths files-files,...] [-profile DIR] [-write YAML] [-v]
//
// datastore-datastore moves fewer records by default, each run on a new
// Firestore emulator (freshDatastore): rekey's Datastore source reads a
// kind in paged key-range queries at a read time, and the emulator's time
// for them grows faster than the kind (20,000 entities took it about 25 s
// of CPU, 50,000 about 117 s) and with every version it keeps.
//
// It starts its own emulators on free ports and stops them at the end;
// everything else it writes is under one temporary folder, removed at
// the end (the profiles too, unless -profile names a folder to keep them).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/bench/cpu/internal/workload"
	"github.com/rekeyio/rekey/bench/internal/migrate"
	"github.com/rekeyio/rekey/internal/gctune"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
)

// Goals of issue 24, item 1.
const (
	goalCPU       = 1.3 // rekey's CPU per record at most this × the plain program's, every path
	moonshotCPU   = 1.1
	goalFilesWall = 0.9 // files-files: rekey's speed at least this × the plain program's
)

// allPaths are the paths in the order they run.
var allPaths = []string{"files-files", "files-spanner", "files-datastore", "spanner-spanner", "datastore-datastore"}

// options are the command's flags.
type options struct {
	filesN, storeN, dsN, reps int
	paths, profilePaths       []string
	profile, write            string
	verbose                   bool
}

func main() {
	var o options
	flag.IntVar(&o.filesN, "files-n", 1_000_000, "records of the files-files path (a million: rekey starts prism and a job, about 0.15 s of CPU, which 200,000 records would count as 0.75 s a million)")
	flag.IntVar(&o.storeN, "store-n", 100_000, "records of files-spanner, files-datastore and spanner-spanner")
	flag.IntVar(&o.dsN, "datastore-n", 20_000, "records of datastore-datastore (rekey's Datastore source costs the emulator time that grows faster than the kind's size)")
	flag.IntVar(&o.reps, "reps", 3, "runs of each side per path (the report gives medians)")
	paths := flag.String("paths", strings.Join(allPaths, ","), "the paths to measure, comma-separated")
	flag.BoolVar(&o.verbose, "v", false, "copy every run's output to standard error")
	flag.StringVar(&o.write, "write", "", "rekey's write settings as YAML, e.g. '{shuffle: never}' (empty: the defaults); for investigating, the plain program does not change")
	profilePaths := flag.String("profile-paths", "files-files", "the paths to profile after the measurements, comma-separated (empty: none)")
	flag.StringVar(&o.profile, "profile", "", "keep the CPU profiles in this folder (PATH.rekey.pprof, PATH.plain.pprof)")
	mode := flag.String("mode", "", "internal: profile (run -config through migration.Run under a CPU profile)")
	cfgPath := flag.String("config", "", "internal: the config of -mode profile")
	cpuProfile := flag.String("cpuprofile", "", "internal: the CPU profile of -mode profile")
	flag.Parse()
	beam.Init()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err error
	if *mode == "profile" {
		gctune.Tune() // as the rekey CLI does
		err = profileRekey(ctx, *cfgPath, *cpuProfile)
	} else {
		o.paths, err = pathList("-paths", *paths)
		if err == nil {
			o.profilePaths, err = pathList("-profile-paths", *profilePaths)
		}
		if err == nil && (o.filesN < 1 || o.storeN < 1 || o.dsN < 1 || o.reps < 0) {
			err = errors.New("-files-n, -store-n and -datastore-n must be at least 1, -reps at least 0")
		}
		if err == nil {
			err = run(ctx, o)
		}
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpu:", err)
		os.Exit(1)
	}
}

// pathList parses the comma-separated paths of flag.
func pathList(flag, list string) ([]string, error) {
	var paths []string
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !slices.Contains(allPaths, p) {
			return nil, fmt.Errorf("%s: %q is not one of %s", flag, p, strings.Join(allPaths, ", "))
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// bench is one run of the benchmark: its folder, binaries, emulators and
// sources.
type bench struct {
	o               options
	dir             string // everything the run writes
	rekeyBin, plain string
	scratch         string // the children's TMPDIR
	emulators       []*emulatorProc
	project         string
	instance        string
	rowsFiles       string // JSON Lines rows, o.filesN of them
	rowsStore       string // JSON Lines rows, o.storeN of them
	entities        string // JSON Lines entities, o.storeN of them
	sourceDB        string // Spanner source database (spanner-spanner), o.storeN rows
	sourceNS        string // Datastore source namespace (datastore-datastore), o.dsN entities
	ds              *datastore.Client
}

// sample is one side's run.
type sample struct {
	wall, user, sys time.Duration
	rssKB           int64
	emulators       time.Duration // the emulators' CPU time during the run
}

// cpu is the run's user and system CPU time.
func (s sample) cpu() time.Duration { return s.user + s.sys }

// result is a path's runs.
type result struct {
	path         string
	n            int
	rekey, plain []sample
	fingerprint  string
}

// run builds both sides, starts the emulators, fills the sources,
// measures every path of o, prints the report and profiles the paths of
// o.profilePaths.
func run(ctx context.Context, o options) (err error) {
	b := &bench{o: o, project: emulator.DefaultProject, instance: emulator.DefaultInstance}
	if b.dir, err = os.MkdirTemp("", "rekey-bench-cpu-"); err != nil {
		return err
	}
	defer os.RemoveAll(b.dir)
	if err := b.build(ctx); err != nil {
		return err
	}
	needs := func(s string) bool {
		return slices.ContainsFunc(slices.Concat(o.paths, o.profilePaths), func(p string) bool { return strings.Contains(p, s) })
	}
	if needs("spanner") || needs("datastore") {
		if b.emulators, err = startEmulators(ctx, b.dir); err != nil {
			return err
		}
		defer func() { stopEmulators(b.emulators) }()
		os.Setenv(emulator.EnvSpannerProject, b.project)
		os.Setenv(emulator.EnvSpannerInstance, b.instance)
		os.Setenv(emulator.EnvDatastoreProject, b.project)
		if err := emulator.EnsureInstance(ctx, b.project, b.instance); err != nil {
			return err
		}
		if b.ds, err = emulator.DatastoreClient(ctx, b.project); err != nil {
			return err
		}
		defer func() { b.ds.Close() }()
	}
	scratch := filepath.Join(b.dir, "tmp")
	if err := os.Mkdir(scratch, 0o755); err != nil {
		return err
	}
	b.scratch = scratch
	if err := b.prepareSources(ctx, needs); err != nil {
		return err
	}
	host, _ := os.Hostname()
	fmt.Printf("%s, %d CPUs, host %s; rekey run --runner prism (prism and its SDK workers in the rekey process) against bench/cpu/plain; %d reps per side, alternating which goes first\n\n",
		runtime.Version(), runtime.NumCPU(), host, o.reps)
	fmt.Println("| path | rep | side | records | CPU (user + sys) | CPU s / M records | wall | peak RSS | emulators' CPU |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	var results []*result
	for _, p := range o.paths {
		if o.reps == 0 {
			break
		}
		r, err := b.measure(ctx, p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		results = append(results, r)
	}
	report(results)
	for _, p := range o.profilePaths {
		if err := b.profilePath(ctx, p); err != nil {
			return fmt.Errorf("profile of %s: %w", p, err)
		}
	}
	return nil
}

// build builds the rekey CLI and the plain program into b.dir.
func (b *bench) build(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	b.rekeyBin, b.plain = filepath.Join(b.dir, "rekey"), filepath.Join(b.dir, "plain")
	for bin, pkg := range map[string]string{b.rekeyBin: "./cmd/rekey", b.plain: "./bench/cpu/plain"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build %s: %w", pkg, err)
		}
	}
	return nil
}

// prepareSources writes the input files and fills the Spanner source;
// the Datastore source is filled before files-datastore, to warm the
// Firestore emulator's JVM up, and anew before each datastore-datastore
// run.
func (b *bench) prepareSources(ctx context.Context, needs func(string) bool) error {
	b.rowsFiles = filepath.Join(b.dir, "rows-files.jsonl")
	b.rowsStore = filepath.Join(b.dir, "rows-store.jsonl")
	b.entities = filepath.Join(b.dir, "entities.jsonl")
	for _, f := range []struct {
		path     string
		n        int
		entities bool
		need     bool
	}{
		{b.rowsFiles, b.o.filesN, false, needs("files-files")},
		{b.rowsStore, b.o.storeN, false, needs("files-spanner")},
		{b.entities, b.o.storeN, true, needs("files-datastore")},
	} {
		if !f.need {
			continue
		}
		size, err := workload.WriteJSONL(f.path, f.n, f.entities)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %s: %d records, %.1f MB\n", filepath.Base(f.path), f.n, float64(size)/(1<<20))
	}
	if needs("spanner-spanner") {
		var err error
		if b.sourceDB, err = migrate.NewDatabase(ctx, "cpusrc", workload.SourceDDL); err != nil {
			return err
		}
		if err := b.fillSpanner(ctx); err != nil {
			return err
		}
	}
	if needs("datastore") {
		b.sourceNS = emulator.UniqueNamespace("cpusrc")
	}
	if needs("files-datastore") {
		// Warms the Firestore emulator's JVM up; datastore-datastore
		// fills the source anew before each run (freshDatastore).
		if err := b.fillDatastore(ctx); err != nil {
			return err
		}
	}
	return nil
}

// fillSpanner writes o.storeN rows into the source table.
func (b *bench) fillSpanner(ctx context.Context) error {
	start := time.Now()
	c, err := spanner.NewClient(ctx, spannerdb.DatabasePath(b.project, b.instance, b.sourceDB))
	if err != nil {
		return err
	}
	defer c.Close()
	var ms []*spanner.Mutation
	for i := range b.o.storeN {
		a := workload.Row(i)
		ms = append(ms, spanner.Insert(workload.Table, workload.Columns, a.Values()))
		if len(ms) == 500 || i == b.o.storeN-1 {
			if _, err := c.Apply(ctx, ms, spanner.ApplyAtLeastOnce()); err != nil {
				return err
			}
			ms = ms[:0]
		}
	}
	fmt.Fprintf(os.Stderr, "filled Spanner source %s with %d rows in %s\n", b.sourceDB, b.o.storeN, time.Since(start).Round(time.Millisecond))
	return nil
}

// fillDatastore writes o.dsN entities into the source namespace, 500
// at a time from 8 goroutines.
func (b *bench) fillDatastore(ctx context.Context) error {
	start := time.Now()
	err := b.putOrDelete(ctx, b.o.dsN, func(from, to int) error {
		var keys []*datastore.Key
		var props []datastore.PropertyList
		for i := from; i < to; i++ {
			a := workload.Row(i)
			k := datastore.NameKey(workload.Kind, a.EntityName(), nil)
			k.Namespace = b.sourceNS
			keys = append(keys, k)
			var pl datastore.PropertyList
			for j, v := range a.Values() {
				pl = append(pl, datastore.Property{Name: workload.Columns[j], Value: v})
			}
			props = append(props, pl)
		}
		_, err := b.ds.PutMulti(ctx, keys, props)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "filled Datastore source namespace %s with %d entities in %s\n", b.sourceNS, b.o.dsN, time.Since(start).Round(time.Millisecond))
	return nil
}

// freshDatastore replaces the Firestore emulator with a new one holding
// only the source namespace, refilled. The emulator keeps every version of
// every entity, deleted ones too, to answer reads at a read time, as
// rekey's Datastore source makes them, and its time for rekey's paged
// range queries grows with them: after the files-datastore runs (600,000
// entities written and deleted), rekey's read of 20,000 entities took it
// 86–92 s of CPU, against 22–24 s on a new emulator. Each
// datastore-datastore run therefore starts from the same emulator.
func (b *bench) freshDatastore(ctx context.Context) error {
	i := slices.IndexFunc(b.emulators, func(e *emulatorProc) bool { return e.Kind == emulator.Datastore })
	if i < 0 {
		return errors.New("the Firestore emulator is not running")
	}
	if _, err := b.emulators[i].Stop(5 * time.Second); err != nil {
		return err
	}
	l, err := emulator.Launch(ctx, emulator.Datastore, 0, b.emulators[i].Log)
	if err != nil {
		return err
	}
	b.emulators[i] = &emulatorProc{l}
	os.Setenv(emulator.EnvDatastoreHost, l.Host)
	b.ds.Close()
	if b.ds, err = emulator.DatastoreClient(ctx, b.project); err != nil {
		return err
	}
	return b.fillDatastore(ctx)
}

// target is where one run writes: a file, a Spanner database or a
// Datastore namespace, each new.
type target struct {
	out, db, ns string
}

// records is the number of records path moves.
func (b *bench) records(path string) int {
	switch path {
	case "files-files":
		return b.o.filesN
	case "datastore-datastore":
		return b.o.dsN
	}
	return b.o.storeN
}

// newTarget makes an empty target for a run of path in dir.
func (b *bench) newTarget(ctx context.Context, path, dir string) (target, error) {
	var t target
	var err error
	switch {
	case strings.HasSuffix(path, "-files"):
		t.out = filepath.Join(dir, "out.jsonl")
	case strings.HasSuffix(path, "-spanner"):
		t.db, err = migrate.NewDatabase(ctx, "cpu", workload.TargetDDL)
	case strings.HasSuffix(path, "-datastore"):
		t.ns = emulator.UniqueNamespace("cpu")
	}
	return t, err
}

// dropTarget removes what a run wrote: the file, the Spanner database or
// the Datastore namespace's entities, so that every run finds the
// emulators holding the same data. (The emulators keep everything in
// memory, and the Firestore emulator's time for rekey's range queries
// grows with the entities it holds in all namespaces.)
func (b *bench) dropTarget(ctx context.Context, t target) error {
	switch {
	case t.out != "":
		return os.Remove(t.out)
	case t.db != "":
		return emulator.DropSpannerDatabase(ctx, spannerdb.DatabasePath(b.project, b.instance, t.db))
	case t.ns != "":
		keys, err := b.ds.GetAll(ctx, datastore.NewQuery(workload.Kind).Namespace(t.ns).KeysOnly(), nil)
		if err != nil {
			return err
		}
		return b.putOrDelete(ctx, len(keys), func(from, to int) error { return b.ds.DeleteMulti(ctx, keys[from:to]) })
	}
	return nil
}

// putOrDelete calls commit for the ranges [from, to) of n items, 500 at a
// time, from 8 goroutines.
func (b *bench) putOrDelete(ctx context.Context, n int, commit func(from, to int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, 8)
	next := make(chan int)
	for g := range errs {
		wg.Go(func() {
			for from := range next {
				if err := commit(from, min(from+500, n)); err != nil {
					errs[g] = err
				}
			}
		})
	}
	for from := 0; from < n; from += 500 {
		next <- from
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// rekeyConfig is the config of a rekey run of path into t.
func (b *bench) rekeyConfig(path string, t target, dead string) string {
	var src, dst, rw string
	switch {
	case strings.HasPrefix(path, "files-") && strings.HasSuffix(path, "-datastore"):
		src, rw = fmt.Sprintf("{type: jsonl, path: %q}", b.entities), workload.HashPrefixYAML
	case path == "files-files":
		src, rw = fmt.Sprintf("{type: jsonl, path: %q, table: %s, key: %q}", b.rowsFiles, workload.Table, workload.SourceKey), workload.ShardYAML
	case path == "files-spanner":
		src, rw = fmt.Sprintf("{type: jsonl, path: %q, table: %s, key: %q}", b.rowsStore, workload.Table, workload.SourceKey), workload.ShardYAML
	case path == "spanner-spanner":
		src, rw = fmt.Sprintf("{type: spanner, project: %s, instance: %s, database: %s, table: %s}", b.project, b.instance, b.sourceDB, workload.Table), workload.ShardYAML
	case path == "datastore-datastore":
		src, rw = fmt.Sprintf("{type: datastore, project: %s, namespace: %s, kind: %s}", b.project, b.sourceNS, workload.Kind), workload.HashPrefixYAML
	}
	switch {
	case t.out != "":
		dst = fmt.Sprintf("{type: jsonl, path: %q}", t.out)
	case t.db != "":
		dst = fmt.Sprintf("{type: spanner, project: %s, instance: %s, database: %s, table: %s}", b.project, b.instance, t.db, workload.Table)
	default:
		dst = fmt.Sprintf("{type: datastore, project: %s, namespace: %s, kind: %s}", b.project, t.ns, workload.Kind)
	}
	cfg := fmt.Sprintf("source: %s\ntarget: %s\nrewrite: %s\nramp: {profile: none}\ndead_letter: %q\n", src, dst, rw, dead)
	if b.o.write != "" {
		cfg += "write: " + b.o.write + "\n"
	}
	return cfg
}

// plainArgs are the plain program's arguments for a run of path into t.
func (b *bench) plainArgs(path string, t target) []string {
	args := []string{"-path", path, "-project", b.project, "-instance", b.instance}
	switch path {
	case "files-files":
		args = append(args, "-in", b.rowsFiles, "-out", t.out)
	case "files-spanner":
		args = append(args, "-in", b.rowsStore, "-target-db", t.db)
	case "files-datastore":
		args = append(args, "-in", b.entities, "-target-ns", t.ns)
	case "spanner-spanner":
		args = append(args, "-source-db", b.sourceDB, "-target-db", t.db)
	case "datastore-datastore":
		args = append(args, "-source-ns", b.sourceNS, "-target-ns", t.ns)
	}
	return args
}

// measure runs both sides of path o.reps times, alternating which goes
// first, and checks that every run wrote the same records.
func (b *bench) measure(ctx context.Context, path string) (*result, error) {
	r := &result{path: path, n: b.records(path)}
	for rep := range b.o.reps {
		sides := []bool{true, false} // rekey first
		if rep%2 == 1 {
			sides = []bool{false, true}
		}
		for _, rekey := range sides {
			if path == "datastore-datastore" {
				if err := b.freshDatastore(ctx); err != nil {
					return nil, err
				}
			}
			s, fp, err := b.runSide(ctx, path, rep, rekey)
			name := sideName(rekey)
			if err != nil {
				return nil, fmt.Errorf("%s, rep %d: %w", name, rep+1, err)
			}
			if r.fingerprint == "" {
				r.fingerprint = fp
			} else if fp != r.fingerprint {
				return nil, fmt.Errorf("%s, rep %d wrote %s, an earlier run %s: the sides do not do the same work", name, rep+1, fp, r.fingerprint)
			}
			if rekey {
				r.rekey = append(r.rekey, s)
			} else {
				r.plain = append(r.plain, s)
			}
			emu := "–"
			if len(b.emulators) > 0 && path != "files-files" {
				emu = fmt.Sprintf("%.2f s", s.emulators.Seconds())
			}
			fmt.Printf("| %s | %d | %s | %d | %.2f s (%.2f + %.2f) | %.2f | %.2f s | %d MB | %s |\n", path, rep+1, name, r.n,
				s.cpu().Seconds(), s.user.Seconds(), s.sys.Seconds(), perMillion(s.cpu(), r.n), s.wall.Seconds(), s.rssKB>>10, emu)
		}
	}
	return r, nil
}

// sideName names a side in the report.
func sideName(rekey bool) string {
	if rekey {
		return "rekey run"
	}
	return "plain Go"
}

// runSide runs one side of path once into a new target and returns its
// measurements and a fingerprint of what it wrote.
func (b *bench) runSide(ctx context.Context, path string, rep int, rekey bool) (sample, string, error) {
	dir := filepath.Join(b.dir, fmt.Sprintf("%s-%d-%s", path, rep+1, map[bool]string{true: "rekey", false: "plain"}[rekey]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return sample{}, "", err
	}
	defer os.RemoveAll(dir)
	return b.intoNewTarget(ctx, path, dir, func(t target) (sample, string, error) { return b.runSideInto(ctx, path, dir, t, rekey) })
}

// intoNewTarget calls run with a new empty target of path in dir and
// drops the target after it.
func (b *bench) intoNewTarget(ctx context.Context, path, dir string, run func(t target) (sample, string, error)) (sample, string, error) {
	t, err := b.newTarget(ctx, path, dir)
	if err != nil {
		return sample{}, "", err
	}
	defer func() {
		if err := b.dropTarget(ctx, t); err != nil {
			fmt.Fprintln(os.Stderr, "cpu: removing a run's target:", err)
		}
	}()
	return run(t)
}

// runSideInto runs one side of path once into t (in dir) and returns its
// measurements and a fingerprint of what it wrote.
func (b *bench) runSideInto(ctx context.Context, path, dir string, t target, rekey bool) (sample, string, error) {
	var bin string
	var args []string
	summary := filepath.Join(dir, "summary.json")
	if rekey {
		cfg := filepath.Join(dir, "rekey.yaml")
		if err := os.WriteFile(cfg, []byte(b.rekeyConfig(path, t, filepath.Join(dir, "dead.jsonl"))), 0o644); err != nil {
			return sample{}, "", err
		}
		bin, args = b.rekeyBin, []string{"run", "-c", cfg, "--runner", "prism", "--summary", summary}
	} else {
		bin, args = b.plain, b.plainArgs(path, t)
	}
	s, stdout, err := b.child(ctx, dir, bin, args...)
	if err != nil {
		return s, "", err
	}
	var written int64
	if rekey {
		written, err = summaryWritten(summary)
	} else {
		var r childReport
		r, err = lastLine(stdout)
		written = r.Written
	}
	if err != nil {
		return s, "", err
	}
	n := b.records(path)
	fp, err := b.fingerprint(ctx, t)
	if err != nil {
		return s, "", err
	}
	if written != int64(n) {
		if !rekey || !strings.HasPrefix(fp, fmt.Sprintf("%d ", n)) {
			return s, "", fmt.Errorf("wrote %d records, want %d (the target: %s)", written, n, fp)
		}
		// prism can drop the counts of bundles that finish at once
		// (docs/limits.md); the target, whose fingerprint every run must
		// match, holds them all.
		fmt.Fprintf(os.Stderr, "cpu: %s: rekey's summary counted %d records written, the target holds %d (prism's counts, docs/limits.md)\n", path, written, n)
	}
	return s, fp, nil
}

// child runs bin with args in dir and measures it; the emulators' CPU
// time is read just before it starts and just after it ends.
func (b *bench) child(ctx context.Context, dir, bin string, args ...string) (sample, string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "TMPDIR="+b.scratch)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	emu := emulatorCPU(b.emulators)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return sample{}, "", err
	}
	hwm := watchHWM(cmd.Process.Pid)
	err := cmd.Wait()
	wall := time.Since(start)
	emu = emulatorCPU(b.emulators) - emu
	peakKB := <-hwm
	if err != nil {
		return sample{}, "", fmt.Errorf("%s %s: %w; its output ends:\n%s%s", filepath.Base(bin), strings.Join(args, " "), err,
			lastBytes([]byte(stdout.String()), 1500), lastBytes([]byte(stderr.String()), 1500))
	}
	if b.o.verbose {
		fmt.Fprintf(os.Stderr, "== %s %s\n%s%s", filepath.Base(bin), strings.Join(args, " "), stdout.String(), stderr.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return sample{
		wall:      wall,
		user:      time.Duration(ru.Utime.Nano()),
		sys:       time.Duration(ru.Stime.Nano()),
		rssKB:     peakKB,
		emulators: emu,
	}, stdout.String(), nil
}

// watchHWM reads the peak resident set of process pid (VmHWM of
// /proc/PID/status) every 20 ms until the process has exited, and sends
// the last value read. (getrusage's ru_maxrss of a child is no use here:
// Linux counts in it the parent's resident set at the fork, since the
// child starts in the parent's memory until its exec.)
func watchHWM(pid int) <-chan int64 {
	ch := make(chan int64, 1)
	go func() {
		var peak int64
		path := fmt.Sprintf("/proc/%d/status", pid)
		for {
			data, err := os.ReadFile(path)
			if err != nil {
				break
			}
			kb, ok := statusKB(string(data), "VmHWM:")
			if !ok {
				break // a zombie: it has exited
			}
			peak = max(peak, kb)
			time.Sleep(20 * time.Millisecond)
		}
		ch <- peak
	}()
	return ch
}

// statusKB reads a "Name:   N kB" line of /proc/PID/status.
func statusKB(status, name string) (int64, bool) {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// summaryWritten reads the written counter of a rekey run's summary.
func summaryWritten(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var s struct {
		Status   string           `json:"status"`
		Counters map[string]int64 `json:"counters"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if s.Status != "ok" {
		return 0, fmt.Errorf("rekey run's status is %q: %s", s.Status, data)
	}
	return s.Counters["written"], nil
}

// childReport is the last line of the plain program's output, and of
// this command's in -mode profile.
type childReport struct {
	Written   int64 `json:"written"`
	Allocated int64 `json:"allocated_bytes"`
}

// lastLine reads a child's report from its output.
func lastLine(stdout string) (childReport, error) {
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var out childReport
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &out); err != nil {
		return out, fmt.Errorf("the report %q: %w", stdout, err)
	}
	return out, nil
}

// fingerprint describes what a run wrote into t, the same for the same
// records in any order: how many, and a sum of a hash of each (its JSON
// line; its row's values; its entity's key).
func (b *bench) fingerprint(ctx context.Context, t target) (string, error) {
	switch {
	case t.out != "":
		f, err := os.Open(t.out)
		if err != nil {
			return "", err
		}
		defer f.Close()
		sc := bufio.NewScanner(bufio.NewReaderSize(f, 1<<20))
		sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
		var n, sum uint64
		for sc.Scan() {
			h := fnv.New64a()
			h.Write(sc.Bytes())
			n, sum = n+1, sum+h.Sum64()
		}
		return fmt.Sprintf("%d lines, sum of hashes %016x", n, sum), sc.Err()
	case t.db != "":
		c, err := spanner.NewClient(ctx, spannerdb.DatabasePath(b.project, b.instance, t.db))
		if err != nil {
			return "", err
		}
		defer c.Close()
		var n, shards, sum int64
		err = c.Single().Query(ctx, spanner.Statement{SQL: `SELECT COUNT(*), SUM(ShardId),
			BIT_XOR(FARM_FINGERPRINT(CONCAT(CAST(ShardId AS STRING), '|', AccountId, '|', CAST(Seq AS STRING), '|', Name, '|', Email, '|', CAST(Amount AS STRING), '|', Note)))
			FROM Accounts`}).Do(func(r *spanner.Row) error { return r.Columns(&n, &shards, &sum) })
		return fmt.Sprintf("%d rows, sum of ShardId %d, xor of row hashes %016x", n, shards, uint64(sum)), err
	default:
		keys, err := b.ds.GetAll(ctx, datastore.NewQuery(workload.Kind).Namespace(t.ns).KeysOnly(), nil)
		if err != nil {
			return "", err
		}
		var sum uint64
		for _, k := range keys {
			h := fnv.New64a()
			h.Write([]byte(k.String())) // the path, without the namespace
			sum += h.Sum64()
		}
		return fmt.Sprintf("%d entities, sum of key hashes %016x", len(keys), sum), nil
	}
}

// perMillion is CPU seconds per million of n records.
func perMillion(d time.Duration, n int) float64 { return d.Seconds() * 1e6 / float64(n) }

// median of the values f takes over ss.
func median(ss []sample, f func(sample) float64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// report prints the medians, their ratios and the goals.
func report(results []*result) {
	fmt.Println()
	fmt.Println("| path | records | rekey CPU s / M records | plain CPU s / M records | CPU rekey / plain | rekey wall | plain wall | speed rekey / plain (plain wall / rekey wall) | peak RSS rekey / plain | emulators' CPU s / M records, rekey / plain |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	cpuS := func(s sample) float64 { return s.cpu().Seconds() }
	wallS := func(s sample) float64 { return s.wall.Seconds() }
	rssMB := func(s sample) float64 { return float64(s.rssKB) / 1024 }
	emuS := func(s sample) float64 { return s.emulators.Seconds() }
	type verdict struct {
		path      string
		cpu, wall float64
	}
	var vs []verdict
	for _, r := range results {
		rc, pc := median(r.rekey, cpuS), median(r.plain, cpuS)
		rw, pw := median(r.rekey, wallS), median(r.plain, wallS)
		emu := "–"
		if r.path != "files-files" {
			emu = fmt.Sprintf("%.2f / %.2f", median(r.rekey, emuS)*1e6/float64(r.n), median(r.plain, emuS)*1e6/float64(r.n))
		}
		fmt.Printf("| %s | %d | %.2f | %.2f | **%.2f×** | %.2f s | %.2f s | %.2f× | %.0f / %.0f MB | %s |\n", r.path, r.n,
			rc*1e6/float64(r.n), pc*1e6/float64(r.n), rc/pc, rw, pw, pw/rw, median(r.rekey, rssMB), median(r.plain, rssMB), emu)
		vs = append(vs, verdict{r.path, rc / pc, pw / rw})
	}
	fmt.Println()
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "not met"
	}
	for _, v := range vs {
		fmt.Printf("- %s: CPU %.2f× the plain program's: goal ≤ %.1f× %s, moonshot ≤ %.1f× %s", v.path, v.cpu, goalCPU, met(v.cpu <= goalCPU), moonshotCPU, met(v.cpu <= moonshotCPU))
		if v.path == "files-files" {
			fmt.Printf("; speed %.2f× the plain program's: goal ≥ %.1f× %s", v.wall, goalFilesWall, met(v.wall >= goalFilesWall))
		}
		fmt.Println()
	}
}

// profilePath runs each side of path once more under a CPU profile and
// prints where each spends its time.
func (b *bench) profilePath(ctx context.Context, path string) error {
	dir := b.o.profile
	if dir == "" {
		dir = filepath.Join(b.dir, "profiles")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	runDir := filepath.Join(b.dir, path+"-profile")
	if err := os.Mkdir(runDir, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(runDir)
	rekeyProf, plainProf := filepath.Join(dir, path+".rekey.pprof"), filepath.Join(dir, path+".plain.pprof")
	// side runs one side into a new target, dropped after it.
	side := func(run func(t target) (sample, string, error)) (sample, string, error) {
		if path == "datastore-datastore" {
			if err := b.freshDatastore(ctx); err != nil {
				return sample{}, "", err
			}
		}
		return b.intoNewTarget(ctx, path, runDir, run)
	}
	rs, rout, err := side(func(t target) (sample, string, error) {
		cfg := filepath.Join(runDir, "rekey.yaml")
		if err := os.WriteFile(cfg, []byte(b.rekeyConfig(path, t, filepath.Join(runDir, "dead.jsonl"))), 0o644); err != nil {
			return sample{}, "", err
		}
		return b.child(ctx, runDir, self, "-mode", "profile", "-config", cfg, "-cpuprofile", rekeyProf)
	})
	if err != nil {
		return err
	}
	ps, pout, err := side(func(t target) (sample, string, error) {
		return b.child(ctx, runDir, b.plain, append(b.plainArgs(path, t), "-cpuprofile", plainProf)...)
	})
	if err != nil {
		return err
	}
	rr, err := lastLine(rout)
	if err != nil {
		return err
	}
	pr, err := lastLine(pout)
	if err != nil {
		return err
	}
	rp, err := readProfile(rekeyProf)
	if err != nil {
		return err
	}
	pp, err := readProfile(plainProf)
	if err != nil {
		return err
	}
	if rp.total == 0 || pp.total == 0 {
		return errNoProfile
	}
	n := b.records(path)
	fmt.Printf("\nCPU profiles of %s, %d records, one more run of each side: rekey's pipeline (migration.Run on prism, as `rekey run` runs it) used %.2f s of CPU (%.2f s sampled) and allocated %.0f bytes per record on its heap, the plain program %.2f s (%.2f s sampled) and %.0f bytes per record.\n\n",
		path, n, rs.cpu().Seconds(), rp.total.Seconds(), float64(rr.Allocated)/float64(n), ps.cpu().Seconds(), pp.total.Seconds(), float64(pr.Allocated)/float64(n))
	if path != "files-files" {
		fmt.Printf("The emulators, in processes of their own and in neither profile, used %.2f s of CPU during rekey's run and %.2f s during the plain program's.\n\n", rs.emulators.Seconds(), ps.emulators.Seconds())
	}
	fmt.Println("| kind of work (a sample goes to the innermost owner on its stack) | rekey s | rekey share | plain s | plain share | rekey − plain, s / M records |")
	fmt.Println("|---|---|---|---|---|---|")
	rc, pc := byCategory(rp), byCategory(pp)
	for i := range rc {
		name := "other"
		if i < len(categories) {
			name = categories[i].name
		}
		if rc[i] == 0 && pc[i] == 0 {
			continue
		}
		fmt.Printf("| %s | %.2f | %.0f%% | %.2f | %.0f%% | %+.2f |\n", name, rc[i].Seconds(), 100*rc[i].Seconds()/rp.total.Seconds(),
			pc[i].Seconds(), 100*pc[i].Seconds()/pp.total.Seconds(), perMillion(rc[i]-pc[i], n))
	}
	fmt.Printf("| total sampled | %.2f | 100%% | %.2f | 100%% | %+.2f |\n", rp.total.Seconds(), pp.total.Seconds(), perMillion(rp.total-pp.total, n))
	fmt.Println()
	fmt.Println("rekey's busiest functions (CPU of their own):")
	fmt.Println()
	fmt.Println("| function | s | share |")
	fmt.Println("|---|---|---|")
	for _, e := range topFlat(rp, 20) {
		fmt.Printf("| `%s` | %.2f | %.1f%% |\n", e.name, e.cpu.Seconds(), 100*e.cpu.Seconds()/rp.total.Seconds())
	}
	if b.o.profile != "" {
		fmt.Printf("\nprofiles kept: %s, %s (go tool pprof -top FILE), and rekey's heap profile %s (go tool pprof -sample_index=alloc_space -top FILE)\n",
			rekeyProf, plainProf, strings.TrimSuffix(rekeyProf, ".pprof")+".allocs.pprof")
	}
	return nil
}

// profileRekey runs the migration of the config at cfgPath as `rekey run`
// does (migration.Run on prism, a progress line every second), with a CPU
// profile of the whole run written to prof, and prints {"written": N,
// "allocated_bytes": B}, B being the bytes the process allocated on its
// heap (prism's and the SDK workers' included).
func profileRekey(ctx context.Context, cfgPath, prof string) error {
	cfg, err := config.LoadFile(cfgPath)
	if err != nil {
		return err
	}
	f, err := os.Create(prof)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	_, res, err := migration.Run(ctx, cfg, migration.Options{}, pipeline.Runner{Runner: "prism", Progress: io.Discard})
	pprof.StopCPUProfile()
	if err != nil {
		return err
	}
	// The heap profile beside it: where the bytes allocated came from
	// (go tool pprof -sample_index=alloc_space -top FILE).
	a, err := os.Create(strings.TrimSuffix(prof, ".pprof") + ".allocs.pprof")
	if err != nil {
		return err
	}
	defer a.Close()
	if err := pprof.Lookup("allocs").WriteTo(a, 0); err != nil {
		return err
	}
	if d := res.Counters[migration.DeadLettered]; d > 0 {
		return fmt.Errorf("%d records dead-lettered", d)
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return json.NewEncoder(os.Stdout).Encode(map[string]uint64{"written": uint64(res.Counters[migration.Written]), "allocated_bytes": m.TotalAlloc})
}

// lastBytes is the end of b, at most n bytes of it.
func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
