package datastoredb

import (
	"context"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/internal/store/shared"
)

var sharedClients = shared.New(func(c *datastore.Client) { c.Close() })

// Shared returns this process's client of project and database in
// configuration variant (Client's options; a variant name for each other
// set, such as a read time), opened with open on first use (with a
// context of its own: the client outlives the caller's bundle), and a
// release for the caller's Teardown. DoFns use it: see package shared for
// why. open nil opens Client(ctx, project, database).
func Shared(project, database, variant string, open func(ctx context.Context) (*datastore.Client, error)) (*datastore.Client, func(), error) {
	if open == nil {
		open = func(ctx context.Context) (*datastore.Client, error) { return Client(ctx, project, database) }
	}
	return sharedClients.Get("datastore\x00"+project+"\x00"+database+"\x00"+variant, func() (*datastore.Client, error) { return open(context.Background()) })
}
