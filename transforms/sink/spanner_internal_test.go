package sink

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/beamtest"
	"github.com/rekeyio/rekey/internal/retry"
	"github.com/rekeyio/rekey/internal/spannerdb"
	"github.com/rekeyio/rekey/internal/throttle"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// fakeSink is a spannerWriteFn whose commits go to a function: a commit
// fails with the error fail returns for the first row it refuses.
func fakeSink(cfg SpannerSinkConfig, fail func(id int64) error) (*spannerWriteFn, *[][]int64) {
	var commits [][]int64
	t := &spannerdb.Table{Name: "T", Columns: []spannerdb.Column{{Name: "Id", Type: "INT64", NotNull: true}}}
	t.Key, _ = rewrite.ParseKeySchema("T", "Id INT64")
	if cfg.Guard.Retry.Initial == 0 {
		cfg.Guard.Retry = retry.Policy{Initial: time.Millisecond, Max: 2 * time.Millisecond, MaxCumulative: 20 * time.Millisecond}
	}
	cfg.Guard.AdaptiveOff = true
	f := &spannerWriteFn{Cfg: cfg.WithDefaults(), table: t, source: "spanner:test/T", ahead: make(chan struct{}, spannerAhead)}
	var mu sync.Mutex // commits run on goroutines
	f.apply = func(_ context.Context, rows []pendingRow, ms []*spanner.Mutation) error {
		mu.Lock()
		defer mu.Unlock()
		ids := map[*spanner.Mutation]int64{} // which row each mutation is
		for _, row := range rows {
			id, _ := row.rec.Get("Id")
			ids[row.m] = id.Int
		}
		var got []int64
		for _, m := range ms {
			if err := fail(ids[m]); err != nil {
				return err
			}
			got = append(got, ids[m])
		}
		commits = append(commits, got)
		return nil
	}
	return f, &commits
}

func batchOf(n int) []byte {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Table: "T", Fields: []record.Field{{Name: "Id", Value: record.Int(int64(i))}}}
	}
	return record.EncodeBatch(recs)
}

// TestIsolatesRowsAtFault: a commit refused because of some rows is
// retried in halves until those rows stand alone; they are dead-lettered
// with the commit error, every other row is committed exactly once.
func TestIsolatesRowsAtFault(t *testing.T) {
	bad := map[int64]bool{3: true, 4: true, 97: true}
	f, commits := fakeSink(SpannerSinkConfig{Table: "T"}, func(id int64) error {
		if bad[id] {
			return status.Error(codes.FailedPrecondition, "row refused")
		}
		return nil
	})
	var dead []string
	emit := func(s string) { dead = append(dead, s) }
	ctx := context.Background()
	if err := f.ProcessElement(ctx, batchOf(100), emit); err != nil {
		t.Fatal(err)
	}
	if err := f.FinishBundle(ctx, emit); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, c := range *commits {
		for _, id := range c {
			seen[id]++
		}
	}
	for id := range int64(100) {
		if want := map[bool]int{true: 0, false: 1}[bad[id]]; seen[id] != want {
			t.Errorf("row %d committed %d times, want %d", id, seen[id], want)
		}
	}
	if len(dead) != len(bad) {
		t.Fatalf("%d dead letters, want %d", len(dead), len(bad))
	}
	for _, l := range dead {
		d, rec, err := record.ParseDeadLetter([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		id, _ := rec.Get("Id")
		if !bad[id.Int] || d.Stage != record.StageWrite || !strings.Contains(d.Reason, "row refused") {
			t.Errorf("dead letter %s", l)
		}
	}
}

// TestInfrastructureErrorsFailTheBundle: when even a single row's commit
// fails for a reason that is not the row's, the error is returned (the
// runner retries the bundle) and nothing is dead-lettered.
func TestInfrastructureErrorsFailTheBundle(t *testing.T) {
	for _, infra := range []error{
		status.Error(codes.Unavailable, "try again"),
		status.Error(codes.DeadlineExceeded, "slow"),
		status.Error(codes.Internal, "grpc: error while marshaling"),
		status.Error(codes.NotFound, "Database not found: projects/p/instances/i/databases/d"),
		context.Canceled,
		errors.New("something unknown"),
	} {
		f, _ := fakeSink(SpannerSinkConfig{Table: "T"}, func(id int64) error {
			if id == 5 {
				return infra
			}
			return nil
		})
		var dead []string
		emit := func(s string) { dead = append(dead, s) }
		ctx := context.Background()
		err := f.ProcessElement(ctx, batchOf(10), emit)
		if err == nil {
			err = f.FinishBundle(ctx, emit)
		}
		if err == nil || !strings.Contains(err.Error(), "not the row's") || len(dead) != 0 {
			t.Errorf("%v: error %v, %d dead letters; want the error returned and none", infra, err, len(dead))
		}
		if len(f.pending) != 0 {
			t.Errorf("%v: %d rows left pending after the failed flush", infra, len(f.pending))
		}
	}
}

// TestTransientErrorsAreRetried: a commit failing with a transient error
// is committed again, whole, after a backoff, and counted as retried.
func TestTransientErrorsAreRetried(t *testing.T) {
	for _, code := range []codes.Code{codes.Aborted, codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded} {
		failures := 2
		f, commits := fakeSink(SpannerSinkConfig{Table: "T"}, func(int64) error {
			if failures > 0 {
				failures--
				return status.Error(code, "transient")
			}
			return nil
		})
		ctx, counted := beamtest.MetricsContext(context.Background())
		before := counted()["rekey/retried"]
		var dead []string
		if err := f.ProcessElement(ctx, batchOf(10), func(s string) { dead = append(dead, s) }); err != nil {
			t.Fatal(err)
		}
		if err := f.FinishBundle(ctx, func(s string) { dead = append(dead, s) }); err != nil {
			t.Fatalf("%v: %v", code, err)
		}
		if len(*commits) != 1 || len((*commits)[0]) != 10 || len(dead) != 0 {
			t.Errorf("%v: commits %v, %d dead; want all 10 rows in one commit", code, *commits, len(dead))
		}
		if got := counted()["rekey/retried"] - before; got != 2 {
			t.Errorf("%v: %d retries counted, want 2", code, got)
		}
	}
}

// TestNoAccessDeadLettersTheCommit: PermissionDenied and Unauthenticated
// are not retried or split: the commit's rows are dead-lettered at once
// with the reason.
func TestNoAccessDeadLettersTheCommit(t *testing.T) {
	for _, code := range []codes.Code{codes.PermissionDenied, codes.Unauthenticated} {
		calls := 0
		f, _ := fakeSink(SpannerSinkConfig{Table: "T"}, func(int64) error {
			calls++
			return status.Error(code, "caller lacks spanner.databases.write")
		})
		var dead []string
		ctx := context.Background()
		emit := func(s string) { dead = append(dead, s) }
		if err := f.ProcessElement(ctx, batchOf(10), emit); err != nil {
			t.Fatal(err)
		}
		if err := f.FinishBundle(ctx, emit); err != nil {
			t.Fatalf("%v: %v", code, err)
		}
		if calls != 1 || len(dead) != 10 || !strings.Contains(dead[0], "spanner.databases.write") {
			t.Errorf("%v: %d calls, %d dead letters (%v); want 1 call and 10 with the reason", code, calls, len(dead), dead)
		}
	}
}

// TestFlushErrorsMidBundleAreReturned: the error of a commit started in
// ProcessElement by the batch bounds is returned too (by a later
// ProcessElement or by FinishBundle, since commits run ahead), and the
// commits of the rows that follow do not hide it.
func TestFlushErrorsMidBundleAreReturned(t *testing.T) {
	f, _ := fakeSink(SpannerSinkConfig{Table: "T", MaxRows: 10}, func(id int64) error {
		if id < 10 {
			return status.Error(codes.Unavailable, "down")
		}
		return nil
	})
	ctx := context.Background()
	err := f.ProcessElement(ctx, batchOf(25), func(string) {})
	if err == nil {
		err = f.FinishBundle(ctx, func(string) {})
	}
	if err == nil || !strings.Contains(err.Error(), "down") {
		t.Errorf("ProcessElement, FinishBundle = %v, want the first commit's error", err)
	}
}

func TestRowAtFault(t *testing.T) {
	for code, want := range map[codes.Code]bool{
		codes.InvalidArgument: true, codes.FailedPrecondition: true, codes.AlreadyExists: true, codes.OutOfRange: true, codes.NotFound: true,
		codes.Unavailable: false, codes.Aborted: false, codes.Internal: false, codes.Unknown: false, codes.PermissionDenied: false, codes.ResourceExhausted: false,
	} {
		if got := rowAtFault(status.Error(code, "Insert failed because key was not found in parent table")); got != want {
			t.Errorf("rowAtFault(%v) = %v, want %v", code, got, want)
		}
	}
	if rowAtFault(status.Error(codes.NotFound, "Table not found: T")) {
		t.Error("a missing table is the row's fault")
	}
}

// TestPacedBatchesWaitBeforeCommitting: a batch tagged with a pacing key
// waits for that key's budget just before its commit: 4 batches of 50
// rows under 200 rows/s for one key cannot all commit in less than a
// second (the budget starts empty); untagged batches do not wait.
func TestPacedBatchesWaitBeforeCommitting(t *testing.T) {
	ramp := throttle.Ramp{Profile: throttle.ProfileCustom, Base: 200, Growth: 1, IntervalSeconds: 60, StartUnixNano: time.Now().UnixNano()}
	recs, err := record.DecodeBatch(batchOf(50))
	if err != nil {
		t.Fatal(err)
	}
	for _, paced := range []bool{true, false} {
		f, commits := fakeSink(SpannerSinkConfig{Table: "T", CommitPerElement: true, Guard: Guard{Ramp: ramp}}, func(int64) error { return nil })
		ctx := context.Background()
		f.StartBundle(ctx, nil)
		start := time.Now()
		for range 4 {
			b := record.EncodeBatch(recs)
			if paced {
				b = record.EncodePacedBatch(recs, 0, 1)
			}
			if err := f.ProcessElement(ctx, b, func(string) {}); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.FinishBundle(ctx, func(string) {}); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if len(*commits) != 4 {
			t.Fatalf("paced %v: %d commits, want 4", paced, len(*commits))
		}
		if paced && took < 950*time.Millisecond {
			t.Errorf("200 paced rows at 200 rows/s committed in %s, want at least 1s", took)
		}
		if !paced && took > 500*time.Millisecond {
			t.Errorf("200 unpaced rows took %s: they waited", took)
		}
	}
}
