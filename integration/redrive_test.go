package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
)

// TestRedriveAfterFixingTheTarget migrates rows into a Spanner table whose
// Page column is too short for some of them: those are dead-lettered at the
// write stage. After the column is widened, `redrive` re-submits the dead
// letters, they land, and nothing is written twice.
func TestRedriveAfterFixingTheTarget(t *testing.T) {
	emulator.RequireSpanner(t)
	for _, runner := range runners {
		t.Run(runner, func(t *testing.T) {
			db, c := newSpannerTarget(t, "redrive",
				"CREATE TABLE Logs (ShardId INT64 NOT NULL, Ts TIMESTAMP NOT NULL, UserId STRING(36) NOT NULL, Page STRING(10)) PRIMARY KEY (ShardId, Ts, UserId)")
			const n, long = 500, 50
			var lines []string
			base := time.Date(2024, 1, 31, 12, 0, 0, 0, time.UTC)
			for i := range n {
				page := fmt.Sprintf("/p/%d", i)
				if i%(n/long) == 0 {
					page = "/a/very/long/page/" + fmt.Sprint(i)
				}
				lines = append(lines, fmt.Sprintf(`{"Ts":%q,"UserId":"u%d","Page":%q}`, base.Add(time.Duration(i)*time.Second).Format(time.RFC3339), i, page))
			}
			// One line that is not even a record: it stays dead after redrive.
			lines = append(lines, `{"Ts": "2024-01-31T12:00:00Z", "UserId":`)
			in := writeLines(t, "logs.jsonl", lines)
			dir := t.TempDir()
			dead := filepath.Join(dir, "dead.jsonl")
			cfg := loadYAML(t, fmt.Sprintf(`
source: {type: jsonl, path: %q, key: "Ts TIMESTAMP, UserId STRING(36)"}
target: {type: spanner, project: %s, instance: %s, database: %s, table: Logs}
rewrite: {strategy: shard, params: {n: 4, mode: abs}}
dead_letter: %q
`, in, emulator.SpannerProject(), emulator.SpannerInstance(), db, dead))
			res := migrate(t, cfg, runner)
			// read counts the broken line too: read = written + dead_lettered.
			wantCounters(t, res, n+1, n, n-long, long+1)
			if got := len(readRows(t, c, "Logs")); got != n-long {
				t.Fatalf("%d rows after the first run, want %d", got, n-long)
			}
			if got := stageCounts(readDeadLetters(t, dead)); got[record.StageWrite] != long || got[record.StageRead] != 1 {
				t.Fatalf("dead letters by stage %v, want %d write and 1 read", got, long)
			}

			// Fix the cause: widen the column.
			ctx := context.Background()
			admin, err := database.NewDatabaseAdminClient(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			op, err := admin.UpdateDatabaseDdl(ctx, &databasepb.UpdateDatabaseDdlRequest{Database: c.DatabaseName(), Statements: []string{"ALTER TABLE Logs ALTER COLUMN Page STRING(MAX)"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := op.Wait(ctx); err != nil {
				t.Fatal(err)
			}

			res = redrive(t, cfg, runner, dead)
			// The 50 rewritten records are written again; the broken line is read
			// again, still fails, and is dead-lettered again.
			wantCounters(t, res, long+1, 0, long, 1)
			rows := readRows(t, c, "Logs")
			if len(rows) != n {
				t.Fatalf("%d rows after redrive, want %d", len(rows), n)
			}
			longPages := 0
			for _, r := range rows {
				if p, _ := r.Get("Page"); strings.HasPrefix(p.Str, "/a/very/long/page/") {
					longPages++
				}
			}
			if longPages != long {
				t.Errorf("%d long pages landed, want %d", longPages, long)
			}
			again := readDeadLetters(t, strings.TrimSuffix(dead, ".jsonl")+".redrive.jsonl")
			if len(again) != 1 || again[0].Raw == "" || !strings.Contains(again[0].Reason, "redrive") {
				t.Errorf("dead letters after redrive: %+v", again)
			}
		})
	}
}

// logsDDL is the target of the redrive tests' Logs.
const logsDDL = "CREATE TABLE Logs (ShardId INT64 NOT NULL, Ts TIMESTAMP NOT NULL, UserId STRING(36) NOT NULL, Page STRING(MAX)) PRIMARY KEY (ShardId, Ts, UserId)"

// logsConfig migrates the file in of format into db's Logs (logsDDL).
func logsConfig(t *testing.T, format, in, db, dead string) *config.Config {
	return loadYAML(t, fmt.Sprintf(`
source: {type: %s, path: %q, table: Logs, key: "Ts TIMESTAMP, UserId STRING(36)"}
target: {type: spanner, project: %s, instance: %s, database: %s, table: Logs}
rewrite: {strategy: shard, params: {n: 4, mode: abs}}
dead_letter: %q
`, format, in, emulator.SpannerProject(), emulator.SpannerInstance(), db, dead))
}

// TestRedriveKeepsInvalidUTF8: a JSON line whose key is not valid UTF-8
// is dead-lettered with its bytes exactly (raw_base64, not U+FFFD in
// raw); a redrive of it writes nothing and dead-letters it again, bytes
// and all, saying why, instead of writing the record under a key it
// never had.
func TestRedriveKeepsInvalidUTF8(t *testing.T) {
	emulator.RequireSpanner(t)
	for _, runner := range runners {
		t.Run(runner, func(t *testing.T) {
			db, c := newSpannerTarget(t, "redrive-utf8", logsDDL)
			bad := "{\"Ts\":\"2024-01-31T12:00:09Z\",\"UserId\":\"u\xff\",\"Page\":\"/x\"}"
			in := writeLines(t, "logs.jsonl", []string{
				`{"Ts":"2024-01-31T12:00:00Z","UserId":"u1","Page":"/a"}`,
				bad,
				`{"Ts":"2024-01-31T12:00:01Z","UserId":"u2","Page":"/b"}`,
				`{"Ts":"2024-01-31T12:00:02Z","UserId":"u3","Page":"/c"}`,
			})
			dead := filepath.Join(t.TempDir(), "dead.jsonl")
			cfg := logsConfig(t, "jsonl", in, db, dead)
			wantCounters(t, migrate(t, cfg, runner), 4, 3, 3, 1)
			kept := func(path string, redriven bool) {
				t.Helper()
				ds := readDeadLetters(t, path)
				if len(ds) != 1 || ds[0].Raw != "" || string(ds[0].RawBase64) != bad || ds[0].Source != in+":2" ||
					!strings.Contains(ds[0].Reason, "not valid UTF-8") || strings.Contains(ds[0].Reason, "; redrive: ") != redriven {
					t.Fatalf("dead letters of %s: %+v; want the line's bytes exactly in raw_base64", path, ds)
				}
			}
			kept(dead, false)

			res := redrive(t, cfg, runner, dead)
			wantCounters(t, res, 1, 0, 0, 1)
			rows := readRows(t, c, "Logs")
			for _, r := range rows {
				if u, _ := r.Get("UserId"); !utf8.ValidString(u.Str) || strings.ContainsRune(u.Str, utf8.RuneError) {
					t.Errorf("row written under user %q", u.Str)
				}
			}
			if len(rows) != 3 {
				t.Errorf("%d rows after the redrive, want 3", len(rows))
			}
			kept(strings.TrimSuffix(dead, ".jsonl")+".redrive.jsonl", true)
		})
	}
}

// TestCSVBrokenQuoteRow: a CSV row with an unterminated quote (file line
// 7) followed by valid rows costs only itself: it is dead-lettered with
// its line and its bytes, every valid row after it is written, and read =
// all rows = written + dead_lettered.
func TestCSVBrokenQuoteRow(t *testing.T) {
	emulator.RequireSpanner(t)
	for _, runner := range runners {
		t.Run(runner, func(t *testing.T) {
			db, c := newSpannerTarget(t, "csv-quote", logsDDL)
			lines := []string{"Ts,UserId,Page"}
			for i := range 8 {
				lines = append(lines, fmt.Sprintf(`2024-01-31T12:00:0%dZ,u%d,"/p/%d"`, i, i, i))
			}
			broken := `2024-01-31T12:00:05Z,u5,"/p/5`
			lines[6] = broken // file line 7: the quote is never closed
			in := writeLines(t, "in.csv", lines)
			dead := filepath.Join(t.TempDir(), "dead.jsonl")
			cfg := logsConfig(t, "csv", in, db, dead)
			wantCounters(t, migrate(t, cfg, runner), 8, 7, 7, 1)
			if rows := readRows(t, c, "Logs"); len(rows) != 7 {
				t.Errorf("%d rows, want 7", len(rows))
			}
			ds := readDeadLetters(t, dead)
			if len(ds) != 1 || ds[0].Stage != record.StageRead || ds[0].Source != in+":7" || ds[0].Raw != broken {
				t.Errorf("dead letters %+v; want line 7 with its bytes", ds)
			}
		})
	}
}
