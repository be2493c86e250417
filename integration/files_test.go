package integration

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// TestFilesToFiles migrates 3,000 JSON Lines rows to JSON Lines with the
// shard strategy, plus three lines that cannot be migrated, on every local
// runner: every good row arrives exactly once with its shard id and
// byte-equal values; the bad ones are dead letters with their reasons.
func TestFilesToFiles(t *testing.T) {
	const n = 3000
	base := time.Date(2024, 1, 31, 12, 0, 0, 0, time.UTC)
	var lines []string
	want := map[string]record.Record{}
	for i := range n {
		r := record.Record{Table: "UserAccessLogs", Fields: []record.Field{
			{Name: "LastAccess", Value: record.Time(base.Add(time.Duration(i) * time.Millisecond))},
			{Name: "UserId", Value: record.String(fmt.Sprintf("u%05d", i%700))},
			{Name: "Page", Value: record.String("/p/" + fmt.Sprint(i))},
			{Name: "Bytes", Value: record.Int(int64(i * 37))},
			{Name: "Ratio", Value: record.Float(float64(i) / 7)},
		}}
		lines = append(lines, string(record.AppendJSON(nil, &r, false)))
		want[fmt.Sprint(i)] = r
	}
	lines = append(lines,
		`{"LastAccess": "not a time", "UserId": "u1"}`,
		`{"UserId": "u2"}`,
		`{"LastAccess": {"$timestamp": "2024-01-31T12:00:00Z"}, "UserId": "u3"`,
	)
	in := writeLines(t, "logs.jsonl", lines)
	schema, _ := rewrite.ParseKeySchema("UserAccessLogs", "LastAccess TIMESTAMP, UserId STRING(36)")
	st, _ := rewrite.New(rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 16, "mode": "abs"}})
	sr, err := st.Spanner(schema)
	if err != nil {
		t.Fatal(err)
	}
	for _, runner := range runners {
		t.Run(runner, func(t *testing.T) {
			dir := t.TempDir()
			out, dl := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "dead.jsonl")
			cfg := loadYAML(t, fmt.Sprintf(`
source: {type: jsonl, path: %q, table: UserAccessLogs, key: "LastAccess TIMESTAMP, UserId STRING(36)"}
target: {type: jsonl, path: %q}
rewrite: {strategy: shard, params: {n: 16, mode: abs}}
dead_letter: %q
`, in, out, dl))
			res := migrate(t, cfg, runner)
			// Every line is read: the two that parse but have bad keys are
			// refused by the rewrite, the one that does not parse at read.
			if res.Counters["read"] != n+3 || res.Counters["rewritten"] != n || res.Counters["written"] != n || res.Counters["dead_lettered"] != 3 {
				t.Errorf("counters %v; want read=%d rewritten=written=%d dead_lettered=3", res.Counters, n+3, n)
			}
			got := readJSONL(t, out)
			seen := map[string]int{}
			for _, r := range got {
				page, _ := r.Get("Page")
				id := page.Str[len("/p/"):]
				seen[id]++
				w, ok := want[id]
				if !ok {
					t.Fatalf("unexpected record %s", r.Describe())
				}
				key := make([]rewrite.Value, 2)
				for i, c := range schema.Columns {
					v, _ := w.Get(c.Name)
					key[i], _ = record.KeyValue(v, c.Type)
				}
				nk, err := sr.Rewrite(nil, key)
				if err != nil {
					t.Fatal(err)
				}
				expect := w
				expect.Fields = append(append([]record.Field(nil), w.Fields...), record.Field{Name: "ShardId", Value: record.Int(nk[0].Int)})
				if !r.Equal(&expect) {
					t.Errorf("record %s:\n got %s\nwant %s", id, record.AppendJSON(nil, &r, true), record.AppendJSON(nil, &expect, true))
				}
			}
			for id := range want {
				if seen[id] != 1 {
					t.Errorf("record %s arrived %d times", id, seen[id])
				}
			}
			dead := readDeadLetters(t, dl)
			if len(dead) != 3 {
				t.Fatalf("%d dead letters, want 3: %+v", len(dead), dead)
			}
			stages := map[string]int{}
			for _, d := range dead {
				stages[d.Stage]++
				if d.Reason == "" || (d.Stage == record.StageRead && d.Raw == "") || (d.Stage == record.StageRewrite && len(d.Record) == 0) {
					t.Errorf("dead letter without its reason or record: %+v", d)
				}
			}
			if stages[record.StageRead] != 1 || stages[record.StageRewrite] != 2 {
				t.Errorf("dead letter stages %v, want 1 read (bad JSON) and 2 rewrite (bad and missing key)", stages)
			}
		})
	}
}
