package emulator

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
)

// SpannerClient opens a data client on a database of the Spanner emulator.
func SpannerClient(ctx context.Context, dbPath string) (*spanner.Client, error) {
	if _, err := SpannerHost(); err != nil {
		return nil, err
	}
	c, err := spanner.NewClientWithConfig(ctx, dbPath, spanner.ClientConfig{DisableNativeMetrics: true})
	if err != nil {
		return nil, fmt.Errorf("spanner client for %s: %w", dbPath, err)
	}
	return c, nil
}

// RequireSpanner stops the test unless the Spanner emulator is configured
// (SPANNER_EMULATOR_HOST): it fails the test, saying to run scripts/test.sh,
// or skips it when REKEY_SKIP_EMULATOR=1.
func RequireSpanner(t testing.TB) {
	t.Helper()
	require(t, SpannerHost)
}

// RequireDatastore is RequireSpanner for the Datastore emulator
// (DATASTORE_EMULATOR_HOST).
func RequireDatastore(t testing.TB) {
	t.Helper()
	require(t, DatastoreHost)
}

func require(t testing.TB, host func() (string, error)) {
	t.Helper()
	if _, err := host(); err != nil {
		if os.Getenv(EnvSkip) == "1" {
			t.Skipf("%s=1: %v", EnvSkip, err)
			return
		}
		t.Fatal(err)
	}
}

// TestDB creates a fresh, uniquely named database on the Spanner emulator
// with the given DDL, and returns a client on it. The client is closed and
// the database dropped when the test ends. It calls RequireSpanner first.
func TestDB(t testing.TB, ddl ...string) *spanner.Client {
	t.Helper()
	c, _ := TestDBPath(t, ddl...)
	return c
}

// TestDBPath is TestDB that also returns the database path.
func TestDBPath(t testing.TB, ddl ...string) (*spanner.Client, string) {
	t.Helper()
	RequireSpanner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path, err := NewSpannerDatabase(ctx, SpannerProject(), SpannerInstance(), UniqueDatabaseID(t.Name()), ddl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := DropSpannerDatabase(ctx, path); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
	c, err := SpannerClient(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	// Registered after the drop, so it runs before it.
	t.Cleanup(c.Close)
	return c, path
}

// TestDatastore returns a Datastore client on the emulator (project from
// DATASTORE_PROJECT_ID, else DefaultProject), closed when the test ends. It
// calls RequireDatastore first. Tests sharing the emulator should keep
// their entities apart with UniqueNamespace.
func TestDatastore(t testing.TB) *datastore.Client {
	t.Helper()
	RequireDatastore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := DatastoreClient(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// UniqueNamespace returns a fresh Datastore namespace made from hint (e.g.
// a test name): only [0-9A-Za-z._-], at most 100 bytes.
func UniqueNamespace(hint string) string {
	id := UniqueDatabaseID(hint) // [a-z0-9-], at most 30 bytes
	return "ns-" + id
}
