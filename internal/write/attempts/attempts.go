// Package attempts counts the commit RPC attempts a Google Cloud client
// library makes for one call of rekey's, so that the library's own
// retries (the Spanner client re-running a transaction aborted by the
// store, gax retrying a Commit, gRPC's retry policy re-sending one that
// met Unavailable, as the Datastore client's service config asks) can be
// told from rekey's retries (its write.retry policy) and counted apart.
//
// The count rides on the call's context: Watch puts a counter in it, and
// a gRPC stats handler installed on the client's connection (DialOption)
// adds one for every attempt of a Commit RPC made under that context or
// one derived from it. gRPC reports each attempt to its stats handlers,
// retries by its own policy included, which an interceptor (called once
// per RPC) would not see; the client libraries pass the caller's context
// down to every RPC they make. An RPC under a context without a counter
// is not counted.
package attempts

import (
	"context"
	"strings"
	"sync/atomic"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

type counterKey struct{}

type commitKey struct{}

// Watch returns ctx carrying a fresh counter and a function that reports
// the Commit attempts made under it so far.
func Watch(ctx context.Context) (context.Context, func() int64) {
	var n atomic.Int64
	return context.WithValue(ctx, counterKey{}, &n), n.Load
}

// Handler is the stats handler DialOption installs.
type Handler struct{}

// TagRPC marks a Commit RPC made under a watched context.
func (Handler) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	if !strings.HasSuffix(info.FullMethodName, "/Commit") {
		return ctx
	}
	if n, ok := ctx.Value(counterKey{}).(*atomic.Int64); ok {
		return context.WithValue(ctx, commitKey{}, n)
	}
	return ctx
}

// HandleRPC counts each attempt of a marked RPC.
func (Handler) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, begin := s.(*stats.Begin); !begin {
		return
	}
	if n, ok := ctx.Value(commitKey{}).(*atomic.Int64); ok {
		n.Add(1)
	}
}

// TagConn and HandleConn do nothing.
func (Handler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (Handler) HandleConn(context.Context, stats.ConnStats)                       {}

// DialOption installs Handler on a client's connection.
func DialOption() option.ClientOption {
	return option.WithGRPCDialOption(grpc.WithStatsHandler(Handler{}))
}
