package sink

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/store/spannerdb/spannerdbtest"
	"github.com/rekeyio/rekey/internal/testkit/beamtest"
	"github.com/rekeyio/rekey/internal/write/retry"
	"github.com/rekeyio/rekey/internal/write/throttle"
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

func batchOf(n int) record.Batch {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Table: "T", Fields: []record.Field{{Name: "Id", Value: record.Int(int64(i))}}}
	}
	return record.Batch{Recs: recs}
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

// oneProcess is a ramp-up lease of a run only this process writes.
type oneProcess struct{ start time.Time }

func (l *oneProcess) Beat(_ context.Context, _, _ string, now time.Time, _ time.Duration) (throttle.Beat, error) {
	started := l.start.IsZero()
	if started {
		l.start = now
	}
	return throttle.Beat{Start: l.start, Started: started, WasLive: !started, Live: 1}, nil
}

func (l *oneProcess) Restart(_ context.Context, _ string, from, to time.Time) (time.Time, error) {
	if l.start.Equal(from) {
		l.start = to
	}
	return l.start, nil
}

// TestRampUpPacesCommits: under a ramp-up the sink cuts batches into
// commits of an eighth of a second of the budget, sized as each is sent,
// and each waits for its budget: 4 batches of 50 rows under 200 rows/s
// go as 8 commits of 25 and take at least 0.85 s (the first commit goes
// at once); without a ramp-up they go as they are, at once.
func TestRampUpPacesCommits(t *testing.T) {
	for i, paced := range []bool{true, false} {
		var ramp throttle.Ramp
		if paced {
			ramp = throttle.Ramp{Profile: throttle.ProfileCustom, Base: 200, Growth: 1, IntervalSeconds: 60, Run: fmt.Sprintf("sink-test-%d-%d", i, time.Now().UnixNano())}
		}
		f, commits := fakeSink(SpannerSinkConfig{Table: "T", CommitPerElement: true, Guard: Guard{Ramp: ramp}}, func(int64) error { return nil })
		f.lease = &oneProcess{}
		ctx := context.Background()
		f.StartBundle(ctx, nil)
		start := time.Now()
		for range 4 {
			if err := f.ProcessElement(ctx, batchOf(50), func(string) {}); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.FinishBundle(ctx, func(string) {}); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		want, rows := 4, 50
		if paced {
			want, rows = 8, 25
		}
		if len(*commits) != want {
			t.Fatalf("paced %v: %d commits, want %d", paced, len(*commits), want)
		}
		for _, c := range *commits {
			if len(c) != rows {
				t.Errorf("paced %v: a commit of %d rows, want %d", paced, len(c), rows)
			}
		}
		if paced && took < 850*time.Millisecond {
			t.Errorf("200 paced rows at 200 rows/s committed in %s, want at least 0.85 s", took)
		}
		if !paced && took > 500*time.Millisecond {
			t.Errorf("200 unpaced rows took %s: they waited", took)
		}
	}
}
