package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"

	"github.com/rekeyio/rekey/internal/emulator"
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
			wantCounters(t, res, n, n, n-long, long+1)
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
			wantCounters(t, res, long, 0, long, 1)
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
