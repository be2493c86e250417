package integration

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// The target of TestMigrateJSONLToSpanner, created before the run with the
// rewritten key: shard on UserId puts ShardId first.
const j2sDDL = `CREATE TABLE Events (
  ShardId INT64 NOT NULL,
  EventTime TIMESTAMP NOT NULL,
  UserId STRING(36) NOT NULL,
  Day DATE,
  Payload BYTES(MAX),
  Score FLOAT64,
  Ratio FLOAT64,
  Code STRING(10),
  Hits INT64,
  Price NUMERIC,
  Active BOOL,
  Meta JSON,
  Tags ARRAY<STRING(MAX)>,
  Weights ARRAY<FLOAT64>,
  Seen ARRAY<TIMESTAMP>,
  Note STRING(MAX)
) PRIMARY KEY (ShardId, EventTime, UserId)`

// TestMigrateJSONLToSpanner loads 1,000 JSON Lines rows whose TIMESTAMP,
// DATE, BYTES and NUMERIC values are plain JSON strings and whose FLOAT64
// values are JSON integers into an existing Spanner table keyed by the
// shard rewrite (ShardId, EventTime, UserId), in insert mode, plus two
// lines the table refuses (a string too long for STRING(10), a column the
// table lacks), on every local runner. Every good row arrives exactly once
// under its independently computed key with every value converted to its
// column's type; the two bad ones are dead letters of stage write; a
// re-run (insert finds its own rows) converges.
func TestMigrateJSONLToSpanner(t *testing.T) {
	const n = 1000
	base := time.Date(2024, 1, 31, 12, 0, 0, 0, time.UTC)
	zone := time.FixedZone("+01:30", 90*60)
	sr := spannerRewriter(t, rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 16, "mode": "abs", "columns": []any{"UserId"}}},
		"EventTime TIMESTAMP, UserId STRING(36)")
	outKey := sr.Out()
	if got := "(" + outKey.Text() + ")"; got != "(ShardId INT64, EventTime TIMESTAMP, UserId STRING(36))" {
		t.Fatalf("rewritten key %s does not match the table", got)
	}

	var lines []string
	want := map[string]record.Record{}
	for i := range n {
		at := base.Add(time.Duration(i)*time.Second + time.Duration(i*1001)*time.Nanosecond)
		user := fmt.Sprintf("user-%04d", i%250)
		payload := []byte{byte(i), byte(i >> 8), 0, 0xfe, '"'}
		tsText := at.In(zone).Format(time.RFC3339Nano) // a non-UTC offset, stored in UTC
		seen := base.Add(-time.Duration(i) * time.Hour)
		meta := fmt.Sprintf(`{"i": %d, "tags": ["x", "y"], "nested": {"ok": true}}`, i)
		fields := []string{
			fmt.Sprintf(`"EventTime": %q`, tsText),
			fmt.Sprintf(`"UserId": %q`, user),
			fmt.Sprintf(`"Day": "2024-%02d-%02d"`, 1+i%12, 1+i%28),
			fmt.Sprintf(`"Payload": %q`, base64.StdEncoding.EncodeToString(payload)),
			fmt.Sprintf(`"Score": %d`, i*3-1000), // an integer into FLOAT64
			fmt.Sprintf(`"Ratio": %d.25`, i),
			fmt.Sprintf(`"Code": "C%d"`, i),
			fmt.Sprintf(`"Hits": %d`, int64(i)*1_000_000_007),
			fmt.Sprintf(`"Price": "%d.125"`, i),
			fmt.Sprintf(`"Active": %t`, i%2 == 0),
			`"Meta": ` + meta,
			fmt.Sprintf(`"Tags": ["t%d", null, ""]`, i),
			fmt.Sprintf(`"Weights": [%d, 2, -3]`, i), // integers into ARRAY<FLOAT64>
			fmt.Sprintf(`"Seen": [%q]`, seen.Format(time.RFC3339)),
		}
		if i%3 == 0 {
			fields = append(fields, `"Note": "note with \"quotes\" and ünïcode"`)
		}
		lines = append(lines, "{"+strings.Join(fields, ", ")+"}")

		old := []rewrite.Value{rewrite.Timestamp(at), rewrite.String(user)}
		nk, err := sr.Rewrite(nil, old)
		if err != nil {
			t.Fatal(err)
		}
		w := record.Record{Table: "Events", Fields: []record.Field{
			{Name: "ShardId", Value: record.Int(nk[0].Int)},
			{Name: "EventTime", Value: record.Time(at)},
			{Name: "UserId", Value: record.String(user)},
			{Name: "Day", Value: record.Value{Kind: record.KindDate, Int: rewrite.Date(2024, time.Month(1+i%12), 1+i%28).Int}},
			{Name: "Payload", Value: record.Bytes(payload)},
			{Name: "Score", Value: record.Float(float64(i*3 - 1000))},
			{Name: "Ratio", Value: record.Float(float64(i) + 0.25)},
			{Name: "Code", Value: record.String(fmt.Sprintf("C%d", i))},
			{Name: "Hits", Value: record.Int(int64(i) * 1_000_000_007)},
			{Name: "Price", Value: record.Value{Kind: record.KindNumeric, Str: fmt.Sprintf("%d.125", i)}},
			{Name: "Active", Value: record.Bool(i%2 == 0)},
			{Name: "Meta", Value: record.Value{Kind: record.KindJSON, Str: meta}},
			{Name: "Tags", Value: arr(record.String(fmt.Sprintf("t%d", i)), record.Value{}, record.String(""))},
			{Name: "Weights", Value: arr(record.Float(float64(i)), record.Float(2), record.Float(-3))},
			{Name: "Seen", Value: arr(record.Time(seen))},
			{Name: "Note", Value: record.Value{}},
		}}
		if i%3 == 0 {
			w.Set("Note", record.String(`note with "quotes" and ünïcode`))
		}
		want[keyText(nk)] = w
	}
	if len(want) != n {
		t.Fatalf("keys collide: %d for %d rows", len(want), n)
	}
	// Two rows the table refuses.
	lines = append(lines,
		`{"EventTime": "2025-01-01T00:00:00Z", "UserId": "too-long", "Code": "ABCDEFGHIJK"}`,
		`{"EventTime": "2025-01-01T00:00:01Z", "UserId": "unknown-column", "Colour": "red"}`,
	)
	in := writeLines(t, "events.jsonl", lines)

	for _, runner := range runners {
		t.Run(runner, func(t *testing.T) {
			dstID, dst := newSpannerTarget(t, "j2s-"+runner, j2sDDL)
			dir := t.TempDir()
			for run := 1; run <= 2; run++ {
				cfg := loadYAML(t, fmt.Sprintf(`
source: {type: jsonl, path: %q, key: "EventTime TIMESTAMP, UserId STRING(36)"}
target: {type: spanner, project: %s, instance: %s, database: %s, table: Events}
rewrite: {strategy: shard, params: {n: 16, mode: abs, columns: [UserId]}}
write: {mode: insert}
dead_letter: %q
`, in, emulator.SpannerProject(), emulator.SpannerInstance(), dstID, filepath.Join(dir, fmt.Sprintf("dead%d.jsonl", run))))
				start := time.Now()
				res := migrate(t, cfg, runner)
				t.Logf("run %d: %s in %s", run, res.Counters.String(), time.Since(start).Round(time.Millisecond))
				wantCounters(t, res, n+2, n+2, n, 2)

				dead := readDeadLetters(t, cfg.DeadLetter)
				if len(dead) != 2 {
					t.Fatalf("run %d: %d dead letters, want 2: %+v", run, len(dead), dead)
				}
				for _, d := range dead {
					_, rec, err := record.ParseDeadLetter([]byte(d.Line()))
					if err != nil || rec == nil {
						t.Errorf("run %d: dead letter without its record: %+v (%v)", run, d, err)
						continue
					}
					user, _ := rec.Get("UserId")
					if d.Stage != record.StageWrite {
						t.Errorf("run %d: dead letter %s at stage %q, want %q: %s", run, user.Str, d.Stage, record.StageWrite, d.Reason)
					}
					switch user.Str {
					case "too-long":
						if !strings.Contains(d.Reason, "STRING(10)") {
							t.Errorf("run %d: reason %q does not name STRING(10)", run, d.Reason)
						}
					case "unknown-column":
						if !strings.Contains(d.Reason, "Colour") {
							t.Errorf("run %d: reason %q does not name the column", run, d.Reason)
						}
					default:
						t.Errorf("run %d: unexpected dead letter %+v", run, d)
					}
				}
				checkSpannerRows(t, fmt.Sprintf("run %d", run), readRows(t, dst, "Events"), outKey, want)
			}
		})
	}
}
