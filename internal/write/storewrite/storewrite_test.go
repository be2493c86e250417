package storewrite

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/write/attempts"
	"github.com/rekeyio/rekey/internal/write/retry"
)

type spannerLike struct{ err error }

func (e *spannerLike) Error() string              { return "spanner: " + e.err.Error() }
func (e *spannerLike) GRPCStatus() *status.Status { s, _ := status.FromError(e.err); return s }

func TestClassify(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		err  error
		want Class
	}{
		{status.Error(codes.InvalidArgument, "x"), Content},
		{status.Error(codes.FailedPrecondition, "x"), Content},
		{status.Error(codes.AlreadyExists, "x"), Content},
		{status.Error(codes.OutOfRange, "x"), Content},
		{status.Error(codes.NotFound, "Insert failed because key was not found in parent table"), Content},
		{status.Error(codes.NotFound, "Table not found: T"), Fatal},
		{status.Error(codes.NotFound, "Database not found: projects/p/instances/i/databases/d"), Fatal},
		{status.Error(codes.NotFound, "The database (default) does not exist for project p"), Fatal},
		{status.Error(codes.ResourceExhausted, "gRPC message exceeds maximum size 4194304: 11700854"), Content},
		{status.Error(codes.ResourceExhausted, "quota"), Transient},
		{status.Error(codes.Unavailable, "x"), Transient},
		{status.Error(codes.DeadlineExceeded, "x"), Transient},
		{status.Error(codes.Aborted, "x"), Transient},
		{status.Error(codes.Internal, "x"), Transient},
		{status.Error(codes.Unknown, "x"), Transient},
		{status.Error(codes.PermissionDenied, "x"), NoAccess},
		{status.Error(codes.Unauthenticated, "x"), NoAccess},
		{status.Error(codes.Canceled, "x"), Fatal},
		{context.Canceled, Fatal},
		{fmt.Errorf("attempt: %w", context.DeadlineExceeded), Transient},
		{errors.New("something unknown"), Fatal},
		{fmt.Errorf("commit: %w", status.Error(codes.Unavailable, "x")), Transient},
		{&spannerLike{status.Error(codes.FailedPrecondition, "x")}, Content},
	} {
		if got := Classify(ctx, tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if got := Classify(done, status.Error(codes.InvalidArgument, "x")); got != Fatal {
		t.Errorf("Classify under a done context = %v, want fatal", got)
	}
}

// TestHalvesIsolates: the refused items end alone in Refuse, every other
// item is committed exactly once, and each cut is counted.
func TestHalvesIsolates(t *testing.T) {
	bad := map[int]bool{3: true, 4: true, 97: true}
	committed := map[int]int{}
	refused := map[int]error{}
	splits := 0
	h := Halves[int]{
		Commit: func(_ context.Context, items []int) error {
			for _, it := range items {
				if bad[it] {
					return status.Errorf(codes.InvalidArgument, "item %d refused", it)
				}
			}
			for _, it := range items {
				committed[it]++
			}
			return nil
		},
		Refuse: func(it int, err error) { refused[it] = err },
		Split:  func() { splits++ },
	}
	items := make([]int, 100)
	for i := range items {
		items[i] = i
	}
	if err := h.Write(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if want := map[bool]int{true: 0, false: 1}[bad[it]]; committed[it] != want {
			t.Errorf("item %d committed %d times, want %d", it, committed[it], want)
		}
	}
	if len(refused) != len(bad) {
		t.Errorf("refused %v, want %v", refused, bad)
	}
	for it, err := range refused {
		if !bad[it] || err.Error() != fmt.Sprintf("rpc error: code = InvalidArgument desc = item %d refused", it) {
			t.Errorf("item %d refused with %v", it, err)
		}
	}
	if splits == 0 {
		t.Error("no split counted")
	}
}

// TestHalvesSettlesAndFails: Settle's rest is written again; NoAccess
// refuses all at once; other errors come back through Fail, unrefused.
func TestHalvesSettlesAndFails(t *testing.T) {
	ctx := context.Background()
	var calls [][]int
	var refused []int
	h := Halves[int]{
		Commit: func(_ context.Context, items []int) error {
			calls = append(calls, items)
			if len(items) == 4 {
				return status.Error(codes.AlreadyExists, "exists")
			}
			return nil
		},
		Settle: func(_ context.Context, items []int, err error) ([]int, bool, error) {
			if status.Code(err) != codes.AlreadyExists {
				return items, false, nil
			}
			return items[2:], true, nil
		},
		Refuse: func(it int, _ error) { refused = append(refused, it) },
	}
	if err := h.Write(ctx, []int{1, 2, 3, 4}); err != nil || fmt.Sprint(calls) != "[[1 2 3 4] [3 4]]" || len(refused) != 0 {
		t.Errorf("Write = %v, calls %v, refused %v; want the rest [3 4] committed again", err, calls, refused)
	}

	h = Halves[int]{
		Commit: func(context.Context, []int) error { return status.Error(codes.PermissionDenied, "no") },
		Refuse: func(it int, _ error) { refused = append(refused, it) },
	}
	refused = nil
	if err := h.Write(ctx, []int{1, 2, 3}); err != nil || len(refused) != 3 {
		t.Errorf("no access: Write = %v, refused %v; want all 3 refused", err, refused)
	}

	refused = nil
	h.Commit = func(context.Context, []int) error { return status.Error(codes.Unavailable, "down") }
	h.Fail = func(n int, err error) error { return fmt.Errorf("commit of %d: %w", n, err) }
	if err := h.Write(ctx, []int{1, 2, 3}); err == nil || err.Error() != "commit of 3: rpc error: code = Unavailable desc = down" || len(refused) != 0 {
		t.Errorf("unavailable: Write = %v, refused %v; want the error through Fail and none refused", err, refused)
	}
}

// TestRetryCountsClientRetries: the commit RPC attempts a client makes
// within one of Retry's attempts, beyond the first, are ClientRetries;
// Retry's own repeats are Retries.
func TestRetryCountsClientRetries(t *testing.T) {
	var h attempts.Handler
	send := func(ctx context.Context, tries int) {
		ctx = h.TagRPC(ctx, &stats.RPCTagInfo{FullMethodName: "/google.spanner.v1.Spanner/Commit"})
		for range tries {
			h.HandleRPC(ctx, &stats.Begin{})
		}
	}
	var o Outcome
	calls := 0
	err := Retry(context.Background(), retry.Policy{Initial: time.Millisecond, Max: time.Millisecond, MaxCumulative: time.Second}, nil, &o, func(ctx context.Context) error {
		calls++
		if calls == 1 {
			send(ctx, 3) // the client tried three times, then gave up
			return status.Error(codes.Unavailable, "down")
		}
		send(ctx, 2) // once more, then it went through
		return nil
	})
	if err != nil || calls != 2 || len(o.Retries) != 1 || o.ClientRetries != 3 {
		t.Errorf("err %v, %d calls, %d retries, %d client retries; want nil, 2, 1, 3", err, calls, len(o.Retries), o.ClientRetries)
	}
}
