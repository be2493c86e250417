package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Class
	}{
		{status.Error(codes.Aborted, "x"), Transient},
		{status.Error(codes.Unavailable, "x"), Transient},
		{status.Error(codes.ResourceExhausted, "x"), Transient},
		{status.Error(codes.DeadlineExceeded, "x"), Transient},
		{fmt.Errorf("commit: %w", status.Error(codes.Unavailable, "x")), Transient},
		{status.Error(codes.InvalidArgument, "x"), Permanent},
		{status.Error(codes.FailedPrecondition, "x"), Permanent},
		{status.Error(codes.PermissionDenied, "x"), Permanent},
		{status.Error(codes.Unauthenticated, "x"), Permanent},
		{&googleapi.Error{Code: 429}, Transient},
		{&googleapi.Error{Code: 408}, Transient},
		{&googleapi.Error{Code: 503}, Transient},
		{&googleapi.Error{Code: 404}, Permanent},
		{&googleapi.Error{Code: 403}, Permanent},
		{context.DeadlineExceeded, Transient},
		{context.Canceled, Permanent},
		{errors.New("plain"), Permanent},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func fakePolicy(slept *[]time.Duration) Policy {
	return Policy{Initial: time.Second, Max: 4 * time.Second, MaxCumulative: 10 * time.Second,
		rnd:   func() float64 { return 1 },
		sleep: func(_ context.Context, d time.Duration) error { *slept = append(*slept, d); return nil }}
}

func TestDoRetriesTransientWithBackoff(t *testing.T) {
	var slept []time.Duration
	calls := 0
	n, err := fakePolicy(&slept).Do(context.Background(), func(context.Context) error {
		calls++
		if calls < 4 {
			return status.Error(codes.Unavailable, "busy")
		}
		return nil
	}, nil)
	if err != nil || n != 4 {
		t.Fatalf("Do = %d, %v", n, err)
	}
	if fmt.Sprint(slept) != "[1s 2s 4s]" {
		t.Errorf("backoff %v, want [1s 2s 4s]", slept)
	}
}

func TestDoStopsOnPermanentAndCumulativeLimit(t *testing.T) {
	var slept []time.Duration
	n, err := fakePolicy(&slept).Do(context.Background(), func(context.Context) error {
		return status.Error(codes.InvalidArgument, "bad row")
	}, nil)
	if n != 1 || status.Code(err) != codes.InvalidArgument || len(slept) != 0 {
		t.Errorf("permanent: %d attempts, %v, slept %v", n, err, slept)
	}
	slept = nil
	retries := 0
	n, err = fakePolicy(&slept).Do(context.Background(), func(context.Context) error {
		return status.Error(codes.Aborted, "again")
	}, func(error) { retries++ })
	// 1 + 2 + 4 = 7 s; the next 4 s would pass the 10 s limit.
	if status.Code(err) != codes.Aborted || n != 4 || retries != 3 {
		t.Errorf("cumulative limit: %d attempts, %d retries, %v, slept %v", n, retries, err, slept)
	}
}

func TestDoGivesEachAttemptADeadline(t *testing.T) {
	p := Policy{Attempt: 20 * time.Millisecond, MaxCumulative: time.Nanosecond}
	_, err := p.Do(context.Background(), func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want the attempt's deadline", err)
	}
}
