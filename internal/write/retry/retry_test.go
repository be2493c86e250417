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
	}, Hooks{})
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
	}, Hooks{})
	if n != 1 || status.Code(err) != codes.InvalidArgument || len(slept) != 0 {
		t.Errorf("permanent: %d attempts, %v, slept %v", n, err, slept)
	}
	slept = nil
	retries := 0
	n, err = fakePolicy(&slept).Do(context.Background(), func(context.Context) error {
		return status.Error(codes.Aborted, "again")
	}, Hooks{OnRetry: func(error, time.Duration) { retries++ }})
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
	}, Hooks{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want the attempt's deadline", err)
	}
}

// fakeThrottle rejects the first reject calls of Allow and records what it
// is told.
type fakeThrottle struct {
	reject            int
	accepted, refused int
}

func (f *fakeThrottle) Allow() bool {
	if f.reject > 0 {
		f.reject--
		return false
	}
	return true
}

func (f *fakeThrottle) Record(ok bool) {
	if ok {
		f.accepted++
	} else {
		f.refused++
	}
}

func TestDoConsultsAndFeedsTheThrottle(t *testing.T) {
	var slept []time.Duration
	th := &fakeThrottle{reject: 2}
	calls, throttled := 0, 0
	n, err := fakePolicy(&slept).Do(context.Background(), func(context.Context) error {
		calls++
		switch calls {
		case 1:
			return status.Error(codes.ResourceExhausted, "overloaded")
		case 2:
			return status.Error(codes.InvalidArgument, "bad row")
		}
		return nil
	}, Hooks{Throttle: th, OnThrottled: func(time.Duration) { throttled++ }})
	// Two local rejections (1.5 s each with rnd 1), then an overloaded
	// attempt (refused, 1 s backoff), then a permanent error: the store
	// accepted the request, so the throttle counts it accepted.
	if n != 2 || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Do = %d, %v; want 2 attempts ending in InvalidArgument", n, err)
	}
	if throttled != 2 || th.refused != 1 || th.accepted != 1 {
		t.Errorf("throttled %d, refused %d, accepted %d; want 2, 1, 1", throttled, th.refused, th.accepted)
	}
	if fmt.Sprint(slept) != "[1.5s 1.5s 1s]" {
		t.Errorf("slept %v, want [1.5s 1.5s 1s]", slept)
	}
}

func TestDoTransientOverride(t *testing.T) {
	var slept []time.Duration
	calls := 0
	_, err := fakePolicy(&slept).Do(context.Background(), func(context.Context) error {
		calls++
		if calls == 1 {
			return errors.New("flaky, says the caller")
		}
		return nil
	}, Hooks{Transient: func(err error) bool { return err.Error() == "flaky, says the caller" }})
	if err != nil || calls != 2 {
		t.Errorf("Do: %v after %d calls; want success on the second", err, calls)
	}
}
