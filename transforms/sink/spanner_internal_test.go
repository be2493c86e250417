package sink

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/beamtest"
	"github.com/rekeyio/rekey/internal/retry"
	"github.com/rekeyio/rekey/internal/spannerdb"
	"github.com/rekeyio/rekey/internal/spannerdb/spannerdbtest"
	"github.com/rekeyio/rekey/internal/throttle"
	"github.com/rekeyio/rekey/record"
)

// fakeSink is a spannerWriteFn whose commits go to a function: a commit
// fails with the error fail returns for the first row it refuses.
func fakeSink(cfg SpannerSinkConfig, fail func(id int64) error) (*spannerWriteFn, *[][]int64) {
	if cfg.Guard.Retry.Initial == 0 {
		cfg.Guard.Retry = retry.Policy{Initial: time.Millisecond, Max: 2 * time.Millisecond, MaxCumulative: 20 * time.Millisecond}
	}
	cfg.Guard.AdaptiveOff = true
	f := &spannerWriteFn{Cfg: cfg.WithDefaults(), ahead: make(chan struct{}, spannerAhead)}
	commit, commits := spannerdbtest.FakeCommit(fail) // commits run on goroutines
	f.newW = func(context.Context) (*spannerdb.Writer, error) {
		return &spannerdb.Writer{Table: spannerdbtest.IDTable(), Commit: commit}, nil
	}
	return f, commits
}

func batchOf(n int) []byte {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Table: "T", Fields: []record.Field{{Name: "Id", Value: record.Int(int64(i))}}}
	}
	return record.EncodeBatch(recs)
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
