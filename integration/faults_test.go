package integration

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
)

// Fault tests: the pipeline writes through committap, which fails a share
// of the Commit calls (retries included) with one retryable code each run,
// either before the commit reaches the emulator or after the emulator
// applied it ("applied, but the response was lost"). The migration must
// complete with every record written exactly once, values intact, nothing
// dead-lettered.
//
// Who retries depends on the code: the Spanner client retries Aborted,
// Unavailable and ResourceExhausted commits itself, the Datastore client
// Unavailable ones (gRPC retry policy); rekey's policy (the retried
// counter) retries what reaches it. Either way every fault is recovered
// from, and a replayed commit finds its own rows.

const (
	faultRows      = 2_000
	faultBatchRows = 20 // 100 commits a run
	faultRate      = 0.10
)

// faultKinds are the retryable failures injected, one kind per run.
var faultKinds = []committap.Fault{
	{Code: codes.Aborted},
	{Code: codes.Unavailable},
	{Code: codes.ResourceExhausted},
	{Code: codes.DeadlineExceeded},
	{Code: codes.Unavailable, Lost: true},
	{Code: codes.DeadlineExceeded, Lost: true},
}

// faultRetry is a quick retry policy, so that the runs take seconds.
const faultRetry = `retry: {initial_backoff: 10ms, max_backoff: 200ms, commit_deadline: 10s, max_cumulative_backoff: 1m}`

// checkFaultRun checks that faults were injected and retried, and that the
// run's counters show every record written once.
func checkFaultRun(t *testing.T, tap *committap.Tap, res *migration.Result, deadPath string, rows int64) {
	t.Helper()
	injected := 0
	for _, c := range tap.Commits() {
		if c.Fault != nil {
			injected++
		}
	}
	t.Logf("%d commit calls, %d faults injected; %s", len(tap.Commits()), injected, res.Counters.String())
	if injected < 3 {
		t.Fatalf("only %d faults injected: the test proves nothing", injected)
	}
	wantCounters(t, res, rows, rows, rows, 0)
	// Every data commit whose fault reached the client was sent again,
	// by the client library (client_retried) or by rekey (retried): the
	// two counters together account for them (the emulator's own aborts
	// of concurrent transactions may add client retries). A lost-response
	// fault on a commit the backend refused (a re-sent insert meeting the
	// rows its first attempt applied) reaches the client as the backend's
	// answer, not as the fault, and needs no re-send.
	resent := 0
	cs := tap.Commits()
	for i, c := range cs {
		if c.Fault == nil || len(c.Mutations) == 0 || c.Mutations[0].Table != "Items" {
			continue
		}
		if c.Fault.Lost && status.Code(c.Err) != c.Fault.Code {
			continue
		}
		sent := false
		for _, d := range cs[i+1:] {
			if len(d.Mutations) > 0 && d.Mutations[0].Text == c.Mutations[0].Text {
				sent = true
				break
			}
		}
		if !sent {
			t.Errorf("commit %d (%s, first %s) failed with %v and was never sent again", c.Seq, c.Fault, c.Mutations[0].Text, c.Err)
		}
		resent++
	}
	if got := res.Counters[migration.ClientRetried] + res.Counters[migration.Retried]; got < int64(resent) || resent == 0 {
		t.Errorf("client_retried %d + retried %d, want at least the %d faulted data commits sent again", res.Counters[migration.ClientRetried], res.Counters[migration.Retried], resent)
	}
	if dead := readDeadLetters(t, deadPath); len(dead) != 0 {
		t.Errorf("%d dead letters, want none: %+v", len(dead), dead[0])
	}
}

// faultLines are the input: rows with an Id column, or entities of kind
// Items named by the id.
func faultLines(entities bool, n int) []string {
	lines := make([]string, n)
	for i := range lines {
		key := fmt.Sprintf(`"Id": "id-%05d"`, i)
		if entities {
			key = fmt.Sprintf(`"__key__": {"path": ["Items", "id-%05d"]}`, i)
		}
		lines[i] = fmt.Sprintf(`{%s, "N": %d, "Payload": "payload of %d: %s"}`, key, i*7, i, "✓ ünïcödé")
	}
	return lines
}

// TestFaultsSpanner migrates 2,000 rows into Spanner through a tap that
// fails 10% of commits with each retryable code in turn, in upsert mode
// (the default) and, for lost responses, in insert mode, whose replays
// meet their own rows.
func TestFaultsSpanner(t *testing.T) {
	in := writeLines(t, "rows.jsonl", faultLines(false, faultRows))
	for _, tc := range faultCases() {
		t.Run(tc.name, func(t *testing.T) {
			dstID, dst := newSpannerTarget(t, "faults", `CREATE TABLE Items (Id STRING(20) NOT NULL, N INT64, Payload STRING(MAX)) PRIMARY KEY (Id)`)
			tap := startTap(t, emulator.EnvSpannerHost)
			tap.SetFaults(committap.Faults{Rate: faultRate, Kinds: []committap.Fault{tc.fault}, Seed: 1})
			deadPath := filepath.Join(t.TempDir(), "dead.jsonl")
			cfg := loadYAML(t, fmt.Sprintf(`
source: {type: jsonl, path: %q, key: "Id STRING(20)"}
target: {type: spanner, project: %s, instance: %s, database: %s, table: Items}
rewrite: {strategy: none}
write: {mode: %s, batch_rows: %d, shards: 4, %s}
dead_letter: %q
`, in, emulator.SpannerProject(), emulator.SpannerInstance(), dstID, tc.mode, faultBatchRows, faultRetry, deadPath))
			start := time.Now()
			res := migrate(t, cfg, "prism")
			t.Logf("%s", time.Since(start).Round(time.Millisecond))
			tap.SetFaults(committap.Faults{})
			checkFaultRun(t, tap, res, deadPath, faultRows)
			rows := readRows(t, dst, "Items")
			got := map[string]record.Record{}
			for _, r := range rows {
				id, _ := r.Get("Id")
				got[id.Str] = r
			}
			checkFaultValues(t, len(rows), func(id string) (record.Record, bool) { r, ok := got[id]; return r, ok })
		})
	}
}

// TestFaultsDatastore is TestFaultsSpanner for a Datastore target.
func TestFaultsDatastore(t *testing.T) {
	in := writeLines(t, "rows.jsonl", faultLines(true, faultRows))
	c := emulator.TestDatastore(t)
	for _, tc := range faultCases() {
		t.Run(tc.name, func(t *testing.T) {
			ns := emulator.UniqueNamespace("faults")
			tap := startTap(t, emulator.EnvDatastoreHost)
			tap.SetFaults(committap.Faults{Rate: faultRate, Kinds: []committap.Fault{tc.fault}, Seed: 2})
			deadPath := filepath.Join(t.TempDir(), "dead.jsonl")
			cfg := loadYAML(t, fmt.Sprintf(`
source: {type: jsonl, path: %q}
target: {type: datastore, project: %s, namespace: %s, kind: Items}
rewrite: {strategy: none}
write: {mode: %s, batch_rows: %d, shards: 4, %s}
dead_letter: %q
`, in, emulator.DatastoreProject(), ns, tc.mode, faultBatchRows, faultRetry, deadPath))
			start := time.Now()
			res := migrate(t, cfg, "prism")
			t.Logf("%s", time.Since(start).Round(time.Millisecond))
			tap.SetFaults(committap.Faults{})
			checkFaultRun(t, tap, res, deadPath, faultRows)
			ents := readEntities(t, c, ns, "Items")
			byName := map[string]record.Record{}
			for _, e := range ents {
				byName[e.Key.Path[0].Name] = e
			}
			checkFaultValues(t, len(ents), func(id string) (record.Record, bool) { r, ok := byName[id]; return r, ok })
		})
	}
}

type faultCase struct {
	name  string
	fault committap.Fault
	mode  string
}

func faultCases() []faultCase {
	var out []faultCase
	for _, f := range faultKinds {
		out = append(out, faultCase{f.String(), f, "upsert"})
	}
	out = append(out, faultCase{"insert/applied-then-Unavailable", committap.Fault{Code: codes.Unavailable, Lost: true}, "insert"})
	return out
}

// checkFaultValues checks that the target holds exactly the input's
// records, each with its values.
func checkFaultValues(t *testing.T, stored int, get func(id string) (record.Record, bool)) {
	t.Helper()
	if stored != faultRows {
		t.Errorf("%d rows stored, want %d", stored, faultRows)
	}
	bad := 0
	for i := range faultRows {
		id := fmt.Sprintf("id-%05d", i)
		r, ok := get(id)
		if !ok {
			t.Errorf("%s missing", id)
			bad++
		} else {
			n, _ := r.Get("N")
			p, _ := r.Get("Payload")
			if n.Int != int64(i*7) || p.Str != fmt.Sprintf("payload of %d: %s", i, "✓ ünïcödé") {
				t.Errorf("%s: N=%v Payload=%v", id, n, p)
				bad++
			}
		}
		if bad > 5 {
			t.Fatal("more mismatches not shown")
		}
	}
}

// TestAdaptiveThrottleUnderOverload: while Datastore refuses half of the
// commits with ResourceExhausted (which its client does not retry), the
// adaptive throttle holds commits back locally, so fewer reach the store
// than without it; the migration still completes exactly once.
//
// A store that refuses a fixed share s of requests whatever the load is
// the throttle's worst case: with K·s < 1 (here 1.25 × 0.5) the rejection
// probability climbs towards requests/(requests+1), since rejected
// requests count as requests; a commit then mostly waits, and gets through
// now and then. A real store recovers as the load drops, and the
// throttle lets the load back up.
func TestAdaptiveThrottleUnderOverload(t *testing.T) {
	const rows = 500 // 25 commits: the throttled run waits long
	in := writeLines(t, "rows.jsonl", faultLines(true, rows))
	c := emulator.TestDatastore(t)
	tap := startTap(t, emulator.EnvDatastoreHost)
	sent := map[bool]float64{}
	for _, off := range []bool{true, false} {
		t.Run(fmt.Sprintf("adaptive_off=%v", off), func(t *testing.T) {
			ns := emulator.UniqueNamespace("overload")
			tap.Reset()
			tap.SetFaults(committap.Faults{Rate: 0.5, Kinds: []committap.Fault{{Code: codes.ResourceExhausted}}, Seed: 3})
			deadPath := filepath.Join(t.TempDir(), "dead.jsonl")
			// A window of its own: a fresh throttle, not the one earlier
			// tests of this process fed.
			cfg := loadYAML(t, fmt.Sprintf(`
source: {type: jsonl, path: %q}
target: {type: datastore, project: %s, namespace: %s, kind: Items}
rewrite: {strategy: none}
write: {batch_rows: %d, shards: 4, %s, adaptive_throttle: {disabled: %v, window: 97s}}
dead_letter: %q
`, in, emulator.DatastoreProject(), ns, faultBatchRows, faultRetry, off, deadPath))
			start := time.Now()
			res := migrate(t, cfg, "prism")
			el := time.Since(start)
			tap.SetFaults(committap.Faults{})
			calls := len(tap.Commits())
			rejected := res.Counters["throttle_rejected"]
			sent[off] = float64(calls) / el.Seconds()
			t.Logf("%s: %d commits sent (%.0f/s), %d held back locally; %s", el.Round(time.Millisecond), calls, sent[off], rejected, res.Counters.String())
			checkFaultRun(t, tap, res, deadPath, rows)
			if got := countEntities(t, c, ns, "Items"); got != rows {
				t.Errorf("%d entities, want %d", got, rows)
			}
			if off && rejected != 0 {
				t.Errorf("%d commits held back with the throttle off", rejected)
			}
			if !off && rejected < int64(calls)/4 {
				t.Errorf("%d commits held back for %d sent while half fail: the throttle did not shed", rejected, calls)
			}
		})
	}
	t.Logf("commits sent per second: %.0f without the throttle, %.0f with it", sent[true], sent[false])
}
