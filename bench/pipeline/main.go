// Command pipeline measures rekey's migration pipeline against a plain Go
// program doing the same work: N JSON Lines records read, their keys
// rewritten (shard), written as JSON Lines. Each side runs in its own child
// process so that peak RSS is measured per side; the report gives
// throughput and peak RSS for both, and the ratio, from one run.
//
//	go run ./bench/pipeline [-n 1000000] [-runner prism]
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
	"github.com/rekeyio/rekey/rewrite"
)

const keySchema = "LastAccess TIMESTAMP, UserId STRING(36)"

var strategy = rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 16, "mode": "abs"}}

func main() {
	n := flag.Int("n", 1_000_000, "records")
	runner := flag.String("runner", "prism", "Beam runner for the rekey side")
	mode := flag.String("mode", "", "internal: baseline or rekey (run one side in this process)")
	in := flag.String("in", "", "internal: input file")
	out := flag.String("out", "", "internal: output file")
	flag.Parse()
	beam.Init()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	var err error
	switch *mode {
	case "baseline":
		err = baseline(*in, *out)
	case "rekey":
		err = runRekey(*in, *out, *runner)
	default:
		err = compare(*n, *runner)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// compare writes the input, runs both sides as child processes and prints
// the report.
func compare(n int, runner string) error {
	dir, err := os.MkdirTemp("", "rekey-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	in := filepath.Join(dir, "in.jsonl")
	if err := writeInput(in, n); err != nil {
		return err
	}
	fmt.Printf("input: %d records, %s\n", n, fileSize(in))
	type side struct {
		name    string
		elapsed time.Duration
		rssKB   int64
		lines   int
	}
	var sides []side
	for _, name := range []string{"baseline", "rekey"} {
		out := filepath.Join(dir, name+".jsonl")
		cmd := exec.Command(os.Args[0], "-mode", name, "-in", in, "-out", out, "-runner", runner)
		cmd.Stderr = os.Stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		el := time.Since(start)
		rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
		lines, err := countLines(out)
		if err != nil {
			return err
		}
		if lines != n {
			return fmt.Errorf("%s wrote %d records, want %d", name, lines, n)
		}
		sides = append(sides, side{name, el, rss, lines})
	}
	b, r := sides[0], sides[1]
	fmt.Printf("| side | records | time | records/s | peak RSS |\n|---|---|---|---|---|\n")
	for _, s := range sides {
		label := s.name
		if s.name == "rekey" {
			label = "rekey run (" + runner + ")"
		} else {
			label = "plain Go, one goroutine"
		}
		fmt.Printf("| %s | %d | %.2f s | %.0f | %d MB |\n", label, s.lines, s.elapsed.Seconds(), float64(s.lines)/s.elapsed.Seconds(), s.rssKB/1024)
	}
	fmt.Printf("\nthroughput ratio rekey/baseline: %.2fx; rekey peak RSS %d MB\n", b.elapsed.Seconds()/r.elapsed.Seconds(), r.rssKB/1024)
	return nil
}

func writeInput(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	base := time.Date(2024, 1, 31, 12, 0, 0, 0, time.UTC)
	var buf []byte
	for i := range n {
		r := record.Record{Fields: []record.Field{
			{Name: "LastAccess", Value: record.Time(base.Add(time.Duration(i) * time.Millisecond))},
			{Name: "UserId", Value: record.String("u" + strconv.Itoa(i%100000))},
			{Name: "Page", Value: record.String("/catalog/item/" + strconv.Itoa(i%5000))},
			{Name: "Bytes", Value: record.Int(int64(i % 90000))},
		}}
		buf = append(record.AppendJSON(buf[:0], &r, false), '\n')
		w.Write(buf)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// baseline does the same work as the pipeline in one goroutine: parse,
// rewrite with the same rekeyer, encode, write.
func baseline(in, out string) error {
	spec := rekeyer.Spec{Strategy: strategy, SourceStore: "spanner", TargetStore: "spanner", Table: "UserAccessLogs", Key: keySchema}
	rk, err := spec.Build()
	if err != nil {
		return err
	}
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	o, err := os.Create(out)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(o, 1<<20)
	sc := bufio.NewScanner(bufio.NewReaderSize(f, 1<<20))
	sc.Buffer(nil, 64<<20)
	var buf []byte
	for sc.Scan() {
		rec, err := record.ParseJSON(sc.Bytes())
		if err != nil {
			return err
		}
		rec.Table = "UserAccessLogs"
		if err := rk.Rewrite(&rec); err != nil {
			return err
		}
		buf = append(record.AppendJSON(buf[:0], &rec, true), '\n')
		w.Write(buf)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return o.Close()
}

func runRekey(in, out, runner string) error {
	yaml := fmt.Sprintf("source: {type: jsonl, path: %q, table: UserAccessLogs, key: %q}\ntarget: {type: jsonl, path: %q}\nrewrite: {strategy: shard, params: {n: 16, mode: abs}}\ndead_letter: %q\n",
		in, keySchema, out, out+".dead")
	cfgPath := out + ".yaml"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		return err
	}
	cfg, err := config.LoadFile(cfgPath)
	if err != nil {
		return err
	}
	ctx := context.Background()
	_, res, err := migration.Run(ctx, cfg, migration.Options{}, pipeline.Runner{Runner: runner})
	if err != nil {
		return err
	}
	if res.Counters["dead_lettered"] != 0 {
		return fmt.Errorf("dead letters: %v", res.Counters)
	}
	return nil
}

func countLines(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strings.Count(string(data), "\n"), nil
}

func fileSize(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%d MB", st.Size()>>20)
}
