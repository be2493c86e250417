// Command memory measures the peak memory of `rekey run`'s pipeline: N
// JSON Lines rows (89 bytes each, as the 200 MB of 2.26 M rows of issue
// 10, item 8), sorted by key, into a Spanner emulator table with
// `rewrite: {strategy: none}`, a rewrite that does not scatter the keys,
// once with each -shuffle setting (write.shuffle): `always`, the global
// shuffle, and `auto`, rekey's default. Each run is a child process (prism in
// loopback mode, so the runner, its shuffle and the SDK worker are all in
// it); the report gives its peak RSS (getrusage of the child), how much
// of it was anonymous memory and how much the binary's file pages, when
// it peaked, the input's size on disk and their ratio.
//
//	go run ./bench/memory [-n 500000,1000000,2000000] [-shuffle always,auto] [-runner prism]
//
// For investigating: -heap DIR writes a heap profile of the child each
// time its live heap has grown by a tenth since the last one
// (DIR/SHUFFLE-N/heap-MB.pprof), -write adds rekey's write settings
// (YAML keys, e.g. 'buffer: 20000'), -env adds variables to the child's
// environment (e.g. GOGC=50).
//
// It uses the Spanner emulator named by SPANNER_EMULATOR_HOST, or starts
// the installed one.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/bench/internal/migrate"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/record"
)

const (
	table     = "UserAccessLogs"
	sourceKey = "LastAccess TIMESTAMP, UserId STRING(36)"
	tableDDL  = `CREATE TABLE UserAccessLogs (
	LastAccess TIMESTAMP NOT NULL,
	UserId STRING(36) NOT NULL,
	Bytes INT64,
) PRIMARY KEY (LastAccess, UserId)`
)

func main() {
	sizes := flag.String("n", "500000,1000000,2000000", "rows, a comma-separated list (one run each)")
	shuffles := flag.String("shuffle", "always,auto", "write.shuffle settings, a comma-separated list (one run of each size each)")
	runner := flag.String("runner", "prism", "Beam runner")
	write := flag.String("write", "", "more of rekey's write settings as YAML keys, e.g. 'buffer: 20000'")
	heap := flag.String("heap", "", "write heap profiles of the rekey process into this directory")
	env := flag.String("env", "", "extra environment of the rekey process, comma-separated NAME=VALUE")
	mode := flag.String("mode", "", "internal: rekey (run the migration in this process)")
	in := flag.String("in", "", "internal: input file")
	db := flag.String("db", "", "internal: target database")
	flag.Parse()
	beam.Init()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err error
	if *mode == "rekey" {
		err = child(ctx, *runner, *in, *db, *write, *heap)
	} else {
		err = run(ctx, *sizes, *shuffles, *runner, *write, *heap, *env)
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "memory:", err)
		os.Exit(1)
	}
}

// outcome is what the child reports on its last stdout line.
type outcome struct {
	Written int64   `json:"written"`
	Seconds float64 `json:"seconds"`
}

type result struct {
	shuffle   string
	rows      int
	inBytes   int64
	peakKB    int64
	peak      peak
	wall      time.Duration
	pipelineS float64
}

func run(ctx context.Context, sizes, shuffles, runner, write, heap, env string) error {
	stop, err := migrate.UseSpanner(ctx)
	defer stop()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "rekey-memory-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var ns []int
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-n: %q is not a number of rows", s)
		}
		ns = append(ns, n)
	}
	host, _ := os.Hostname()
	settings := "the default write settings"
	if write != "" {
		settings = "`write: {" + write + "}`"
	}
	fmt.Printf("rows sorted by key → Spanner emulator, `rewrite: {strategy: none}`, %s, %s runner; %s, %d CPUs, host %s",
		settings, runner, runtime.Version(), runtime.NumCPU(), host)
	if env != "" {
		fmt.Printf("; child env %s", env)
	}
	fmt.Printf("\n\n")
	var results []result
	for _, n := range ns {
		in := filepath.Join(dir, "in.jsonl")
		size, err := writeInput(in, n)
		if err != nil {
			return err
		}
		for _, sh := range strings.Split(shuffles, ",") {
			w := "shuffle: " + strings.TrimSpace(sh)
			if write != "" {
				w += ", " + write
			}
			r, err := measure(ctx, in, n, runner, w, heap, env)
			if err != nil {
				return fmt.Errorf("%d rows, %s: %w", n, w, err)
			}
			r.shuffle, r.inBytes = strings.TrimSpace(sh), size
			results = append(results, r)
		}
		os.Remove(in)
	}
	fmt.Println("| write.shuffle | rows | input on disk | peak RSS | peak / input | at the peak: anonymous / file pages | peak after | pipeline time | rows/s |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		mb := func(b int64) float64 { return float64(b) / (1 << 20) }
		fmt.Printf("| `%s` | %d | %.0f MB | %.0f MB | **%.2f×** | %.0f / %.0f MB | %.1f s | %.1f s | %.0f |\n", r.shuffle, r.rows, mb(r.inBytes), mb(r.peakKB<<10),
			float64(r.peakKB<<10)/float64(r.inBytes), mb(r.peak.anonKB<<10), mb(r.peak.fileKB<<10), r.peak.at.Seconds(), r.pipelineS, float64(r.rows)/r.pipelineS)
	}
	return nil
}

// measure runs the migration of the n rows of in, with the write
// settings write (YAML keys), in a child process and returns its peak
// RSS.
func measure(ctx context.Context, in string, n int, runner, write, heap, env string) (result, error) {
	db, err := migrate.NewDatabase(ctx, "mem", tableDDL)
	if err != nil {
		return result{}, err
	}
	args := []string{"-mode", "rekey", "-in", in, "-db", db, "-runner", runner, "-write", write}
	if heap != "" {
		hd := filepath.Join(heap, strings.NewReplacer(" ", "", ":", "-", ",", "-").Replace(write)+"-"+strconv.Itoa(n))
		if err := os.MkdirAll(hd, 0o755); err != nil {
			return result{}, err
		}
		args = append(args, "-heap", hd)
	}
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = os.Environ()
	if env != "" {
		cmd.Env = append(cmd.Env, strings.Split(env, ",")...)
	}
	cmd.Stderr = os.Stderr
	var out strings.Builder
	cmd.Stdout = &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	sampled := sampleRSS(cmd.Process.Pid, start)
	err = cmd.Wait()
	wall := time.Since(start)
	if err != nil {
		return result{}, fmt.Errorf("rekey: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var o outcome
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &o); err != nil {
		return result{}, fmt.Errorf("rekey's report %q: %w", out.String(), err)
	}
	if o.Written != int64(n) {
		return result{}, fmt.Errorf("rekey wrote %d rows, want %d", o.Written, n)
	}
	if err := migrate.CheckRows(ctx, db, table, n); err != nil {
		return result{}, err
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return result{rows: n, peakKB: ru.Maxrss, peak: <-sampled, wall: wall, pipelineS: o.Seconds}, nil
}

// peak is the largest resident set seen by sampleRSS: when (since the
// start), and how much of it was anonymous memory (the heap, stacks) and
// file pages (the binary's code and data).
type peak struct {
	at             time.Duration
	anonKB, fileKB int64
}

// sampleRSS polls the process's resident set every 100 ms until it exits
// and sends its peak.
func sampleRSS(pid int, start time.Time) <-chan peak {
	ch := make(chan peak, 1)
	go func() {
		var max int64
		var p peak
		path := fmt.Sprintf("/proc/%d/status", pid)
		for {
			data, err := os.ReadFile(path)
			if err != nil {
				break
			}
			kb := statusKB(string(data), "VmRSS:")
			if kb < 0 {
				break // a zombie: it has exited
			}
			if kb > max {
				max = kb
				p = peak{at: time.Since(start), anonKB: statusKB(string(data), "RssAnon:"), fileKB: statusKB(string(data), "RssFile:")}
			}
			time.Sleep(100 * time.Millisecond)
		}
		ch <- p
	}()
	return ch
}

// statusKB reads a "Name: N kB" line of /proc/PID/status (-1 if absent).
func statusKB(status, name string) int64 {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// writeInput writes n rows sorted by (LastAccess, UserId), 80 to 89
// bytes a line, and returns the file's size.
func writeInput(path string, n int) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	base := time.Date(2024, 1, 31, 12, 0, 0, 0, time.UTC)
	var buf []byte
	for i := range n {
		r := record.Record{Fields: []record.Field{
			{Name: "LastAccess", Value: record.Time(base.Add(time.Duration(i) * time.Millisecond))},
			{Name: "UserId", Value: record.String("u" + strconv.Itoa(i%100000))},
			{Name: "Bytes", Value: record.Int(int64(i % 90000))},
		}}
		buf = append(record.AppendJSON(buf[:0], &r, false), '\n')
		w.Write(buf)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// child runs the migration as `rekey run` does and prints its outcome
// as one JSON line.
func child(ctx context.Context, runner, in, db, write, heap string) error {
	dir, err := os.MkdirTemp("", "rekey-memory-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if heap != "" {
		stop := profileHeap(heap)
		defer stop()
	}
	yaml := fmt.Sprintf(`
source: {type: jsonl, path: %q, table: %s, key: %q}
target: {type: spanner, project: %s, instance: %s, database: %s, table: %s}
rewrite: {strategy: none}
ramp: {profile: none}
`, in, table, sourceKey, emulator.SpannerProject(), emulator.SpannerInstance(), db, table)
	if write != "" {
		yaml += "write: {" + write + "}\n"
	}
	res, err := migrate.Run(ctx, runner, dir, yaml, nil)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(outcome{Written: res.Counters["written"], Seconds: res.Elapsed.Seconds()})
}

// profileHeap writes a heap profile into dir each time the live heap has
// grown by a tenth since the last one, until stop is called.
func profileHeap(dir string) (stop func()) {
	runtime.MemProfileRate = 64 << 10
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		var last uint64
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			metrics.Read(s)
			live := s[0].Value.Uint64()
			if live < last+last/10 || live < 32<<20 {
				continue
			}
			last = live
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("heap-%04d-MB.pprof", live>>20)))
			if err != nil {
				continue
			}
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}()
	return func() { close(done); <-finished }
}
