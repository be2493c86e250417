package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
)

// TestAccessLogs runs the service against the Spanner emulator, old and
// new tables in one database: a user in old, then moved to read_new,
// through HTTP only; the tables show where each write went.
func TestAccessLogs(t *testing.T) {
	ctx := context.Background()
	ddl := append([]string{
		`CREATE TABLE AccessLogs (UserId STRING(36) NOT NULL, Seq INT64 NOT NULL, Page STRING(MAX)) PRIMARY KEY (UserId, Seq)`,
		`CREATE TABLE AccessLogsV2 (ShardId INT64 NOT NULL, UserId STRING(36) NOT NULL, Seq INT64 NOT NULL, Page STRING(MAX)) PRIMARY KEY (ShardId, UserId, Seq)`,
	}, phases.SpannerDDL...)
	c := emulator.TestDB(t, ddl...)
	db := c.DatabaseName()[strings.LastIndex(c.DatabaseName(), "/")+1:]
	cfg := filepath.Join(t.TempDir(), "migration.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
source: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: AccessLogs}
target: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: AccessLogsV2}
rewrite: {strategy: shard, params: {n: 16, mode: abs}}
cohort: {user: UserId}
`, emulator.SpannerProject(), emulator.SpannerInstance(), db)), 0o644); err != nil {
		t.Fatal(err)
	}
	lib, err := cutover.OpenSpanner(ctx, c, cfg, cutover.Options{Migration: "logs-v2", CacheTTL: 600 * time.Millisecond, Skew: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	srv := httptest.NewServer(Handler(lib))
	defer srv.Close()
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	count := func(table string) int64 {
		var n int64
		if err := c.Single().Query(ctx, spanner.Statement{SQL: "SELECT COUNT(*) FROM " + table + " WHERE UserId = 'alice'"}).Do(func(r *spanner.Row) error { return r.Columns(&n) }); err != nil {
			t.Fatal(err)
		}
		return n
	}

	if code, _ := call("PUT", "/logs/alice/1", "/home"); code != http.StatusNoContent {
		t.Fatalf("PUT in old: %d", code)
	}
	if code, body := call("GET", "/logs/alice/1", ""); code != 200 || body != "/home" {
		t.Errorf("GET in old: %d %q", code, body)
	}
	if count("AccessLogs") != 1 || count("AccessLogsV2") != 0 {
		t.Errorf("in old: %d old rows, %d new; want 1, 0", count("AccessLogs"), count("AccessLogsV2"))
	}
	k := cohort.Of("alice", cohort.DefaultBuckets)
	if _, _, err := (phases.SpannerStore{Client: c}).Move(ctx, phases.Move{Migration: "logs-v2", Cohorts: []cohort.Range{{First: k, Last: k}}, To: cutover.ReadNew, Force: true, Who: "test"}); err != nil {
		t.Fatal(err)
	}
	for lib.Phases().Phase(k) != cutover.ReadNew {
		time.Sleep(20 * time.Millisecond)
	}
	// The switch of authority takes effect after the cache TTL plus skew.
	time.Sleep(time.Until(lib.Phases().SpanOf(k).Since.Add(800 * time.Millisecond)))
	// Not backfilled: read_new finds nothing in new and falls back to old.
	if code, body := call("GET", "/logs/alice/1", ""); code != 200 || body != "/home" {
		t.Errorf("GET in read_new before a backfill: %d %q", code, body)
	}
	if code, _ := call("PUT", "/logs/alice/2", "/cart"); code != http.StatusNoContent {
		t.Fatalf("PUT in read_new: %d", code)
	}
	if count("AccessLogs") != 2 || count("AccessLogsV2") != 1 {
		t.Errorf("in read_new: %d old rows, %d new; want 2, 1", count("AccessLogs"), count("AccessLogsV2"))
	}
	if code, _ := call("DELETE", "/logs/alice/2", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d", code)
	}
	if code, _ := call("GET", "/logs/alice/2", ""); code != http.StatusNotFound {
		t.Errorf("GET after DELETE: %d, want 404", code)
	}
	// One fallback: the read of the record new never held. The read
	// after the delete finds new's touched mark saying it was deleted,
	// and does not look in old.
	if code, body := call("GET", "/stats", ""); code != 200 || !strings.Contains(body, `"Fallbacks":1,`) {
		t.Errorf("stats: %d %s; want 1 fallback (the read of the record new never held)", code, body)
	}
}
