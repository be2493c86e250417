package attempts

import (
	"context"
	"testing"

	"google.golang.org/grpc/stats"
)

// rpc runs one RPC's stats callbacks as gRPC does: TagRPC, then a Begin
// for each attempt.
func rpc(ctx context.Context, method string, tries int) {
	var h Handler
	ctx = h.TagRPC(ctx, &stats.RPCTagInfo{FullMethodName: method})
	for range tries {
		h.HandleRPC(ctx, &stats.Begin{})
		h.HandleRPC(ctx, &stats.End{})
	}
}

func TestWatchCountsCommitAttempts(t *testing.T) {
	ctx, sent := Watch(context.Background())
	rpc(ctx, "/google.datastore.v1.Datastore/Commit", 3)                               // retried twice by gRPC
	rpc(context.WithValue(ctx, struct{}{}, 1), "/google.spanner.v1.Spanner/Commit", 1) // a derived context
	rpc(ctx, "/google.datastore.v1.Datastore/Lookup", 2)                               // not a commit
	if n := sent(); n != 4 {
		t.Errorf("%d commit attempts, want 4", n)
	}
	rpc(context.Background(), "/google.spanner.v1.Spanner/Commit", 2) // not watched
	if n := sent(); n != 4 {
		t.Errorf("an unwatched commit was counted: %d", n)
	}
	other, sent2 := Watch(ctx) // a nested watch counts on its own
	rpc(other, "/google.spanner.v1.Spanner/Commit", 2)
	if sent2() != 2 || sent() != 4 {
		t.Errorf("nested watch: %d and %d, want 2 and 4", sent2(), sent())
	}
}
