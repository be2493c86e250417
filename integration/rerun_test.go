package integration

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// buildRekey builds cmd/rekey into a directory removed when the test
// ends.
func buildRekey(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rekey")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/rekey")
	cmd.Dir = ".." // the module root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/rekey: %v\n%s", err, out)
	}
	return bin
}

// rekeyProcess is `rekey run -c CONFIG` running as a subprocess.
type rekeyProcess struct {
	cmd      *exec.Cmd
	out      bytes.Buffer // stdout and stderr
	done     chan struct{}
	exitCode int
}

// startRekey starts `bin run -c config [args]` (the emulator hosts come
// from the environment); the process is killed if the test ends first.
func startRekey(t *testing.T, bin, config string, args ...string) *rekeyProcess {
	t.Helper()
	p := &rekeyProcess{done: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"run", "-c", config}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.exitCode = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			p.kill()
		}
		<-p.done
	})
	return p
}

// kill sends SIGKILL to the process's group (the process and anything it
// started).
func (p *rekeyProcess) kill() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

// exited reports whether the process has ended.
func (p *rekeyProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to end and fails the test unless it exits 0.
func (p *rekeyProcess) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.kill()
		<-p.done
		t.Fatalf("rekey run did not finish in %s:\n%s", timeout, p.output())
	}
	if p.exitCode != 0 {
		t.Fatalf("rekey run exited %d:\n%s", p.exitCode, p.output())
	}
}

// output is what the process printed, the progress line's redraws
// collapsed.
func (p *rekeyProcess) output() string {
	<-p.done
	var lines []string
	for _, l := range strings.Split(p.out.String(), "\n") {
		if i := strings.LastIndex(l, "\r"); i >= 0 {
			l = l[i+1:]
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// counters returns the counters line rekey prints at the end.
func (p *rekeyProcess) counters(t *testing.T) string {
	t.Helper()
	for _, l := range strings.Split(p.output(), "\n") {
		if _, c, ok := strings.Cut(l, "rekey: read="); ok {
			return "read=" + c
		}
	}
	t.Fatalf("no counters in the output:\n%s", p.output())
	return ""
}

// killHalfway starts `rekey run -c config`, polls count until about half
// of total has landed (at least 40%: a count on the Datastore emulator
// takes a second or two while it is being written to), kills the process
// with SIGKILL and returns how many had landed once it was gone. It fails
// the test unless that is strictly between 0 and total.
func killHalfway(t *testing.T, bin, config string, total int, count func() int) int {
	t.Helper()
	start := time.Now()
	p := startRekey(t, bin, config)
	deadline := time.After(60 * time.Second)
	for n := 0; n < total*2/5; n = count() {
		if p.exited() {
			t.Fatalf("rekey run ended (exit %d) before 40%% of the records were written (%d of %d):\n%s", p.exitCode, n, total, p.output())
		}
		select {
		case <-deadline:
			p.kill()
			t.Fatalf("only %d of %d written after 60s:\n%s", n, total, p.output())
		case <-time.After(50 * time.Millisecond):
		}
	}
	p.kill()
	<-p.done
	if p.exitCode != -1 || !p.cmd.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("rekey run was not killed (exit %d):\n%s", p.exitCode, p.output())
	}
	n := count()
	t.Logf("killed after %s with %d of %d written", time.Since(start).Round(time.Millisecond), n, total)
	if n <= 0 || n >= total {
		t.Fatalf("%d of %d written when rekey run was killed: the kill was not halfway", n, total)
	}
	return n
}

// rerun runs `rekey run -c config` to completion, checks that it read,
// rewrote and wrote all n records and dead-lettered none, and returns its
// counters.
func rerun(t *testing.T, bin, config string, n int) string {
	t.Helper()
	p := startRekey(t, bin, config)
	p.wait(t, 2*time.Minute)
	counters := p.counters(t)
	t.Logf("re-run: %s", counters)
	if want := fmt.Sprintf("read=%d rewritten=%d written=%d dead_lettered=0 ", n, n, n); !strings.HasPrefix(counters, want) {
		t.Errorf("re-run counters %s; want %s...", counters, want)
	}
	return counters
}

// countRows counts a table's rows.
func countRows(t *testing.T, c *spanner.Client, table string) int {
	t.Helper()
	var n int64
	err := c.Single().Query(context.Background(), spanner.NewStatement("SELECT COUNT(*) FROM "+table)).Do(func(r *spanner.Row) error {
		return r.Column(0, &n)
	})
	if err != nil {
		t.Fatalf("counting %s: %v", table, err)
	}
	return int(n)
}

// TestKillHalfwayAndRerun kills `rekey run` (the built binary, prism
// runner) with SIGKILL once about half the records are in the target, runs
// the same config again to completion, and checks that the target then
// holds exactly what an uninterrupted run writes (computed independently
// with the strategy): every record once, values equal, nothing else; and
// that whatever the killed run had written was already correct. The ramp
// (a constant budget) keeps the run long enough to kill it halfway.
// Spanner in upsert mode (the default) and in insert mode (existing rows
// are read back and count as written when equal), and Datastore (upsert).
func TestKillHalfwayAndRerun(t *testing.T) {
	bin := buildRekey(t)
	// The three run at once: each has its own database or namespace, and
	// each kill depends only on its own count.
	t.Run("spanner/upsert", func(t *testing.T) {
		t.Parallel()
		testKillHalfwaySpanner(t, bin, "upsert", 12000, 2000)
	})
	// Insert mode isolates every existing row by halving its commit and
	// reads it back: keep it small.
	t.Run("spanner/insert", func(t *testing.T) {
		t.Parallel()
		testKillHalfwaySpanner(t, bin, "insert", 600, 100)
	})
	t.Run("datastore", func(t *testing.T) {
		t.Parallel()
		testKillHalfwayDatastore(t, bin)
	})
}

func testKillHalfwaySpanner(t *testing.T, bin, mode string, n, rate int) {
	emulator.RequireSpanner(t)
	sr := spannerRewriter(t, rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 8, "mode": "abs", "columns": []any{"UserId"}}},
		"UserId STRING(36), Seq INT64")
	var lines []string
	want := map[string]record.Record{}
	base := time.Date(2024, 2, 29, 23, 0, 0, 0, time.UTC)
	for i := range n {
		user := fmt.Sprintf("user-%05d", i%997)
		at := base.Add(time.Duration(i) * time.Millisecond)
		payload := fmt.Sprintf("payload %d %s", i, strings.Repeat("p", i%50))
		lines = append(lines, fmt.Sprintf(`{"UserId": %q, "Seq": %d, "EventAt": %q, "Payload": %q, "Score": %d.5}`, user, i, at.Format(time.RFC3339Nano), payload, i))
		nk, err := sr.Rewrite(nil, []rewrite.Value{rewrite.String(user), rewrite.Int64(int64(i))})
		if err != nil {
			t.Fatal(err)
		}
		want[keyText(nk)] = record.Record{Table: "Events", Fields: []record.Field{
			{Name: "ShardId", Value: record.Int(nk[0].Int)},
			{Name: "UserId", Value: record.String(user)},
			{Name: "Seq", Value: record.Int(int64(i))},
			{Name: "EventAt", Value: record.Time(at)},
			{Name: "Payload", Value: record.String(payload)},
			{Name: "Score", Value: record.Float(float64(i) + 0.5)},
		}}
	}
	in := writeLines(t, "events.jsonl", lines)
	dstID, dst := newSpannerTarget(t, "rerun-"+mode, `CREATE TABLE Events (
  ShardId INT64 NOT NULL,
  UserId STRING(36) NOT NULL,
  Seq INT64 NOT NULL,
  EventAt TIMESTAMP,
  Payload STRING(MAX),
  Score FLOAT64
) PRIMARY KEY (ShardId, UserId, Seq)`)
	config := writeConfig(t, fmt.Sprintf(`
source: {type: jsonl, path: %q, key: "UserId STRING(36), Seq INT64"}
target: {type: spanner, project: %s, instance: %s, database: %s, table: Events}
rewrite: {strategy: shard, params: {n: 8, mode: abs, columns: [UserId]}}
write: {mode: %s}
ramp: {profile: custom, base: %d, growth: 1, interval_seconds: 60}
dead_letter: %q
`, in, emulator.SpannerProject(), emulator.SpannerInstance(), dstID, mode, rate, filepath.Join(t.TempDir(), "dead.jsonl")))

	killed := killHalfway(t, bin, config, n, func() int { return countRows(t, dst, "Events") })
	// What the killed run wrote is correct as far as it got.
	for _, r := range readRows(t, dst, "Events") {
		k := keyText(rowKey(t, &r, sr.Out()))
		w, ok := want[k]
		if !ok {
			t.Fatalf("after the kill: unexpected row %s", k)
		}
		if d := record.FieldsDiff(r.Fields, w.Fields); d != "" {
			t.Fatalf("after the kill: row %s: %s", k, d)
		}
	}

	counters := rerun(t, bin, config, n)
	// Insert mode found each row the killed run wrote, equal.
	if already := fmt.Sprintf(" spanner_already_written=%d ", killed); mode == "insert" && !strings.Contains(counters, already) {
		t.Errorf("re-run counters %s; want%s", counters, already)
	}
	checkSpannerRows(t, "after the re-run", readRows(t, dst, "Events"), sr.Out(), want)
}

func testKillHalfwayDatastore(t *testing.T, bin string) {
	c := emulator.TestDatastore(t)
	const n, rate = 6000, 600
	rw := datastoreRewriter(t, rewrite.StepConfig{Strategy: "hashprefix"})
	dstNS := emulator.UniqueNamespace("rerun")
	var lines []string
	want := map[string]record.Record{}
	base := time.Date(2023, 7, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		path := []rewrite.PathElement{{Kind: "Customer", Name: fmt.Sprintf("Customer%d", i)}}
		if i%2 == 1 {
			path = []rewrite.PathElement{{Kind: "Customer", ID: int64(i)}}
		}
		at := base.Add(time.Duration(i) * time.Second)
		lines = append(lines, fmt.Sprintf(`{"__key__": %s, "Name": "Kunde %d", "Since": {"$timestamp": %q}, "Visits": %d, "Note": {"$noindex": "note %d"}}`,
			j2dKeyJSON(path), i, at.Format(time.RFC3339), i*3, i))
		nk, err := rw.Rewrite(rewrite.DatastoreKey{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		nk.Namespace = dstNS
		want[nk.String()] = record.Record{Key: &nk, Fields: []record.Field{
			{Name: "Name", Value: record.String(fmt.Sprintf("Kunde %d", i))},
			{Name: "Since", Value: record.Time(at)},
			{Name: "Visits", Value: record.Int(int64(i * 3))},
			{Name: "Note", Value: record.String(fmt.Sprintf("note %d", i)), NoIndex: true},
		}}
	}
	in := writeLines(t, "customers.jsonl", lines)
	config := writeConfig(t, fmt.Sprintf(`
source: {type: jsonl, path: %q}
target: {type: datastore, project: %s, namespace: %s, kind: Customer}
rewrite: {strategy: hashprefix}
ramp: {profile: custom, base: %d, growth: 1, interval_seconds: 60}
dead_letter: %q
`, in, emulator.DatastoreProject(), dstNS, rate, filepath.Join(t.TempDir(), "dead.jsonl")))

	count := func() int {
		res, err := c.RunAggregationQuery(context.Background(), datastore.NewQuery("Customer").Namespace(dstNS).KeysOnly().NewAggregationQuery().WithCount("n"))
		if err != nil {
			t.Fatalf("counting: %v", err)
		}
		v, ok := res["n"].(interface{ GetIntegerValue() int64 })
		if !ok {
			t.Fatalf("count is %T", res["n"])
		}
		return int(v.GetIntegerValue())
	}
	killHalfway(t, bin, config, n, count)
	for k, r := range readEntities(t, c, dstNS, "Customer") {
		w, ok := want[k]
		if !ok {
			t.Fatalf("after the kill: unexpected entity %s", k)
		}
		if d := record.FieldsDiff(r.Fields, w.Fields); d != "" {
			t.Fatalf("after the kill: entity %s: %s", k, d)
		}
	}

	rerun(t, bin, config, n)
	checkEntities(t, "after the re-run", readEntities(t, c, dstNS, "Customer"), want)
}
