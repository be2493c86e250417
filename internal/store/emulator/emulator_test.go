package emulator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
)

func TestUniqueDatabaseID(t *testing.T) {
	seen := map[string]bool{}
	for _, hint := range []string{"", "TestX", "TestEqualityShard/composite_abs_7", strings.Repeat("Z9", 40), "日本語", "-_"} {
		for range 20 {
			id := UniqueDatabaseID(hint)
			if err := checkDatabaseID(id); err != nil {
				t.Errorf("UniqueDatabaseID(%q) = %q: %v", hint, id, err)
			}
			if seen[id] {
				t.Errorf("UniqueDatabaseID(%q) repeated %q", hint, id)
			}
			seen[id] = true
		}
	}
}

func TestCheckDatabaseID(t *testing.T) {
	for _, id := range []string{"ab", "a1", "a-b_c", strings.Repeat("a", 30)} {
		if err := checkDatabaseID(id); err != nil {
			t.Errorf("checkDatabaseID(%q) = %v, want nil", id, err)
		}
	}
	for _, id := range []string{"", "a", "1a", "Ab", "a-", "a_", "a.b", strings.Repeat("a", 31)} {
		if err := checkDatabaseID(id); err == nil {
			t.Errorf("checkDatabaseID(%q) = nil, want an error", id)
		}
	}
}

func TestUniqueNamespace(t *testing.T) {
	ns := UniqueNamespace("TestSomething/sub")
	if len(ns) > 100 {
		t.Fatalf("namespace %q longer than 100 bytes", ns)
	}
	for _, r := range ns {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' || r == '_' || r == '-') {
			t.Fatalf("namespace %q has %q", ns, r)
		}
	}
}

func TestHostErrorsSayHowToRun(t *testing.T) {
	t.Setenv(EnvSpannerHost, "")
	t.Setenv(EnvDatastoreHost, "")
	for name, f := range map[string]func() (string, error){"spanner": SpannerHost, "datastore": DatastoreHost} {
		_, err := f()
		if !errors.Is(err, ErrNoEmulator) || !strings.Contains(err.Error(), "scripts/test.sh") {
			t.Errorf("%s: error %v: want ErrNoEmulator mentioning scripts/test.sh", name, err)
		}
	}
	if _, err := NewSpannerDatabase(context.Background(), "p", "ii", "dd", nil); !errors.Is(err, ErrNoEmulator) {
		t.Errorf("NewSpannerDatabase without emulator: %v, want ErrNoEmulator", err)
	}
	if _, err := DatastoreClient(context.Background(), "p"); !errors.Is(err, ErrNoEmulator) {
		t.Errorf("DatastoreClient without emulator: %v, want ErrNoEmulator", err)
	}
}

// fakeTB records how a Require helper stopped the test.
type fakeTB struct {
	testing.TB
	fatal, skip bool
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Fatal(args ...any)     { f.fatal = true }
func (f *fakeTB) Skipf(string, ...any)  { f.skip = true }
func (f *fakeTB) Fatalf(string, ...any) { f.fatal = true }

func TestRequireFailsOrSkips(t *testing.T) {
	t.Setenv(EnvSpannerHost, "")
	t.Setenv(EnvDatastoreHost, "")
	for _, skip := range []string{"", "1"} {
		t.Setenv(EnvSkip, skip)
		for name, req := range map[string]func(testing.TB){"spanner": RequireSpanner, "datastore": RequireDatastore} {
			f := &fakeTB{TB: t}
			req(f)
			if skip == "1" && (!f.skip || f.fatal) || skip == "" && (!f.fatal || f.skip) {
				t.Errorf("%s with %s=%q: fatal=%v skip=%v", name, EnvSkip, skip, f.fatal, f.skip)
			}
		}
	}
	t.Setenv(EnvSpannerHost, "127.0.0.1:1")
	t.Setenv(EnvSkip, "")
	f := &fakeTB{TB: t}
	RequireSpanner(f)
	if f.fatal || f.skip {
		t.Errorf("RequireSpanner with the host set: fatal=%v skip=%v", f.fatal, f.skip)
	}
}

func TestEmulatorSpanner(t *testing.T) {
	c, path := TestDBPath(t, `CREATE TABLE T (K INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (K)`)
	if !strings.HasPrefix(path, spannerdb.DatabasePath(SpannerProject(), SpannerInstance(), "t")) {
		t.Errorf("database path %q", path)
	}
	ctx := t.Context()
	if _, err := c.Apply(ctx, []*spanner.Mutation{
		spanner.Insert("T", []string{"K", "V"}, []any{int64(1), "one"}),
		spanner.Insert("T", []string{"K", "V"}, []any{int64(2), "two"}),
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := c.Single().Query(ctx, spanner.Statement{SQL: `SELECT V FROM T ORDER BY K`}).Do(func(r *spanner.Row) error {
		var v string
		if err := r.Columns(&v); err != nil {
			return err
		}
		got = append(got, v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "one,two" {
		t.Fatalf("read %q, want one,two", got)
	}

	// A second database is separate; creating the instance again is fine.
	c2 := TestDB(t, `CREATE TABLE T (K INT64 NOT NULL) PRIMARY KEY (K)`)
	var n int64
	if err := c2.Single().Query(ctx, spanner.Statement{SQL: `SELECT COUNT(*) FROM T`}).Do(func(r *spanner.Row) error {
		return r.Columns(&n)
	}); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("fresh database has %d rows", n)
	}
}

func TestEmulatorSpannerBadDDL(t *testing.T) {
	RequireSpanner(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := NewSpannerDatabase(ctx, SpannerProject(), SpannerInstance(), UniqueDatabaseID(t.Name()), []string{"CREATE TABLE nonsense"})
	if err == nil {
		t.Fatal("invalid DDL accepted")
	}
	if _, err := NewSpannerDatabase(ctx, SpannerProject(), SpannerInstance(), "Bad_Name", nil); err == nil {
		t.Fatal("invalid database id accepted")
	}
}

type bigEntity struct {
	Payload string `datastore:",noindex"`
}

// TestEmulatorDatastore checks the client reaches the emulator and that a
// query answered in one response larger than gRPC's default 4 MiB limit
// comes back whole.
func TestEmulatorDatastore(t *testing.T) {
	c := TestDatastore(t)
	ctx := t.Context()
	ns := UniqueNamespace(t.Name())
	const n, size = 1200, 8 << 10 // ~9.6 MB in total
	payload := strings.Repeat("x", size)
	keys := make([]*datastore.Key, 0, n)
	ents := make([]bigEntity, 0, n)
	for i := range n {
		k := datastore.NameKey("Big", fmt.Sprintf("e%05d", i), nil)
		k.Namespace = ns
		keys = append(keys, k)
		ents = append(ents, bigEntity{Payload: payload})
	}
	for i := 0; i < n; i += 500 {
		j := min(i+500, n)
		if _, err := c.PutMulti(ctx, keys[i:j], ents[i:j]); err != nil {
			t.Fatal(err)
		}
	}
	var got []bigEntity
	if _, err := c.GetAll(ctx, datastore.NewQuery("Big").Namespace(ns), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("query returned %d entities, want %d", len(got), n)
	}
}
