// Command plan measures `rekey plan` on a large sample: N JSON Lines rows
// of UserAccessLogs (keyed by time, so the old keys are one hotspot),
// rewritten with a shard column, every row sampled (--sample N). The
// baseline, run on the same input in the same script, is `rekey run
// --dry_run`: the same read, rewrite and write planning, with the
// records counted instead of recorded, and no analysis. Each side runs
// -runs times as a child process (the rekey binary, built first); the
// report gives each run's and the median wall time and peak RSS
// (getrusage) of each side and their ratio, and checks the plan against
// its targets (see target).
//
//	go run ./bench/plan [-n 1000000] [-runs 3] [-runner prism]
//	go run ./bench/plan -n 10000000 -runs 1
//
// For investigating: -heap DIR adds a run of the plan in a child of this
// command (the pipeline and the analysis as `rekey plan --sample N`
// runs them) that writes a heap profile every second (see
// profileHeap); its time and peak RSS are reported but not compared.
//
// It uses the Spanner emulator named by SPANNER_EMULATOR_HOST, or starts
// the installed one (the target table must exist for the dry run; the
// plan writes nothing to it).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/plan/sim"

	"github.com/rekeyio/rekey/bench/internal/migrate"
	"github.com/rekeyio/rekey/internal/store/emulator"
)

const targetDDL = `CREATE TABLE UserAccessLogs (
	ShardId INT64 NOT NULL,
	LastAccess TIMESTAMP NOT NULL,
	UserId STRING(36) NOT NULL,
	Bytes INT64,
) PRIMARY KEY (ShardId, LastAccess, UserId)`

func main() {
	n := flag.Int("n", 1_000_000, "rows (all sampled)")
	runs := flag.Int("runs", 3, "runs of each side")
	runner := flag.String("runner", "prism", "Beam runner")
	heap := flag.String("heap", "", "also run the plan in a child that writes heap profiles into this directory")
	mode := flag.String("mode", "", "internal: plan (run the plan in this process)")
	cfg := flag.String("config", "", "internal: the config")
	out := flag.String("out", "", "internal: the report's directory")
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err error
	if *mode == "plan" {
		err = planChild(ctx, *cfg, *out, *n, *runner, *heap)
	} else {
		err = run(ctx, *n, *runs, *runner, *heap)
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "plan:", err)
		os.Exit(1)
	}
}

type sample struct {
	wall   time.Duration
	peakKB int64
}

func run(ctx context.Context, n, runs int, runner, heap string) error {
	stop, err := migrate.UseSpanner(ctx)
	defer stop()
	if err != nil {
		return err
	}
	db, err := migrate.NewDatabase(ctx, "bench-plan", targetDDL)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "rekey-bench-plan-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "rekey")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/rekey")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building rekey: %w", err)
	}
	in := filepath.Join(dir, "logs.jsonl")
	size, err := writeInput(in, n)
	if err != nil {
		return err
	}
	cfg := filepath.Join(dir, "migration.yaml")
	yaml := fmt.Sprintf(`source: {type: jsonl, path: %q, key: "LastAccess TIMESTAMP, UserId STRING(36)"}
target: {type: spanner, project: %s, instance: %s, database: %s, table: UserAccessLogs}
rewrite: {strategy: shard, params: {n: 16, columns: [UserId], mode: abs}}
dead_letter: %q
`, in, emulator.SpannerProject(), emulator.SpannerInstance(), db, filepath.Join(dir, "dead.jsonl"))
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		return err
	}
	sides := []struct {
		name string
		args []string
	}{
		{"rekey run --dry_run (baseline)", []string{"run", "-c", cfg, "--runner", runner, "--dry_run"}},
		{fmt.Sprintf("rekey plan --sample %d", n), []string{"plan", "-c", cfg, "--runner", runner, "--sample", strconv.Itoa(n), "--out", filepath.Join(dir, "plan")}},
	}
	fmt.Printf("input: %d rows, %d MB, runner %s, %d runs each (medians)\n\n", n, size>>20, runner, runs)
	fmt.Println("| command | wall time | peak RSS |")
	fmt.Println("|---|---|---|")
	var med []sample
	for _, s := range sides {
		if runs < 1 {
			break // -runs 0: only the heap profiles
		}
		var got []sample
		for i := range runs {
			r, err := child(ctx, bin, s.args)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			fmt.Fprintf(os.Stderr, "%s, run %d: %.1f s, %d MB\n", s.name, i+1, r.wall.Seconds(), r.peakKB>>10)
			got = append(got, r)
		}
		m := median(got)
		med = append(med, m)
		fmt.Printf("| %s | %.1f s | %d MB |\n", s.name, m.wall.Seconds(), m.peakKB>>10)
	}
	if heap != "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		if err := os.MkdirAll(heap, 0o755); err != nil {
			return err
		}
		args := []string{"-mode", "plan", "-config", cfg, "-out", filepath.Join(dir, "plan-heap"), "-n", strconv.Itoa(n), "-runner", runner, "-heap", heap}
		r, err := child(ctx, self, args)
		if err != nil {
			return fmt.Errorf("plan with heap profiles: %w", err)
		}
		fmt.Printf("| plan in-process, heap profiles in %s | %.1f s | %d MB |\n", heap, r.wall.Seconds(), r.peakKB>>10)
	}
	if len(med) < 2 {
		return nil
	}
	fmt.Printf("\nplan / dry run: %.2fx the time, %.2fx the peak RSS; plan over %d sampled keys in %.1f s, %d MB peak RSS (%s)\n",
		med[1].wall.Seconds()/med[0].wall.Seconds(), float64(med[1].peakKB)/float64(med[0].peakKB), n, med[1].wall.Seconds(), med[1].peakKB>>10, target(n, med[1]))
	return nil
}

// target says how the plan's run compares with its targets: at most
// 1,000,000 keys within 60 s (issue 13) and 0.6 GB peak RSS, at most
// 10,000,000 within 5 minutes and 4 GB (issue 24).
func target(n int, s sample) string {
	var limit time.Duration
	var mb int64
	switch {
	case n <= 1_000_000:
		limit, mb = time.Minute, 600
	case n <= 10_000_000:
		limit, mb = 5*time.Minute, 4096
	default:
		return "no target set above 10,000,000 keys"
	}
	met := "met"
	if s.wall > limit || s.peakKB>>10 > mb {
		met = "NOT met"
	}
	return fmt.Sprintf("target: within %s and %d MB: %s", limit, mb, met)
}

// planChild runs the plan of the config in this process, writing heap
// profiles into heap.
func planChild(ctx context.Context, cfgPath, out string, n int, runner, heap string) error {
	beam.Init()
	cfg, err := migrate.LoadConfig(cfgPath, filepath.Join(out, "dead.jsonl"))
	if err != nil {
		return err
	}
	stop := profileHeap(heap)
	_, _, err = pipeline.Plan(ctx, cfg, pipeline.PlanRequest{Out: out, Sample: n, Sim: sim.Params{Nodes: 3}}, pipeline.Runner{Runner: runner})
	runtime.GC()
	stop()
	return err
}

// profileHeap writes a heap profile into dir every second, named by the
// seconds since the start and the live heap at the last GC
// (heap-SECONDS-s-LIVE-MB.pprof), and one when stop is called.
func profileHeap(dir string) (stop func()) {
	runtime.MemProfileRate = 64 << 10
	write := func(name string) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return
		}
		_ = pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				write("heap-end.pprof")
				return
			case <-t.C:
			}
			metrics.Read(s)
			write(fmt.Sprintf("heap-%04d-s-%05d-MB.pprof", int(time.Since(start).Seconds()), s[0].Value.Uint64()>>20))
		}
	}()
	return func() { close(done); <-finished }
}

// writeInput writes n rows sorted by LastAccess (3 ms apart) with random
// users and returns the file's size.
func writeInput(path string, n int) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	t := time.Date(2024, 1, 31, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		fmt.Fprintf(w, `{"LastAccess":{"$timestamp":%q},"UserId":"u%05d","Bytes":%d}`+"\n",
			t.Add(time.Duration(i)*3*time.Millisecond).Format(time.RFC3339Nano), rng.IntN(100_000), rng.IntN(100_000))
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), f.Close()
}

// child runs rekey with args and measures it.
func child(ctx context.Context, bin string, args []string) (sample, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = os.Stderr
	cmd.Stdout = nil
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return sample{}, err
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return sample{wall: time.Since(start), peakKB: ru.Maxrss}, nil
}

func median(s []sample) sample {
	sort.Slice(s, func(i, j int) bool { return s[i].wall < s[j].wall })
	m := s[len(s)/2]
	peaks := make([]int64, len(s))
	for i := range s {
		peaks[i] = s[i].peakKB
	}
	sort.Slice(peaks, func(i, j int) bool { return peaks[i] < peaks[j] })
	m.peakKB = peaks[len(peaks)/2]
	return m
}
