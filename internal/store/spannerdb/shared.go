package spannerdb

import (
	"context"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/shared"
)

var sharedClients = shared.New(func(c *spanner.Client) { c.Close() })

// Shared returns this process's client of database db in configuration
// variant, opened with open on first use (with a context of its own: the
// client outlives the caller's bundle), and a release for the caller's
// Teardown. DoFns use it: see package shared for why.
func Shared(db, variant string, open func(ctx context.Context) (*spanner.Client, error)) (*spanner.Client, func(), error) {
	return sharedClients.Get("spanner\x00"+db+"\x00"+variant, func() (*spanner.Client, error) { return open(context.Background()) })
}
