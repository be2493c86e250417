package datastoredb

import (
	"context"
	"fmt"

	"cloud.google.com/go/datastore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"

	"github.com/rekeyio/rekey/internal/write/attempts"
)

// MaxRecvMsgSize is the gRPC receive limit Client sets. The Firestore
// emulator answers a whole query in one response (the service pages at
// about 1 MiB), which passes the client's default 4 MiB for a few tens of
// thousands of small entities; readers also page with limits.
const MaxRecvMsgSize = 256 << 20

// Client opens a Datastore client on project (empty: the
// DATASTORE_PROJECT_ID variable) and database (empty: the default
// database), with the gRPC receive limit raised to MaxRecvMsgSize. When
// DATASTORE_EMULATOR_HOST is set the client library connects to that
// emulator without credentials. Extra options are appended.
func Client(ctx context.Context, project, database string, opts ...option.ClientOption) (*datastore.Client, error) {
	o := append([]option.ClientOption{
		option.WithGRPCDialOption(grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxRecvMsgSize))),
		attempts.DialOption(), // the client's own commit retries, counted apart
	}, opts...)
	var (
		c   *datastore.Client
		err error
	)
	if database != "" {
		c, err = datastore.NewClientWithDatabase(ctx, project, database, o...)
	} else {
		c, err = datastore.NewClient(ctx, project, o...)
	}
	if err != nil {
		return nil, fmt.Errorf("datastore client for project %q database %q: %w", project, database, err)
	}
	return c, nil
}
