package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/pipeline"
)

// TestSpannerReadTime reads a table and its interleaved child at one read
// time: rows are written, the commit timestamp T of the last is kept,
// then one row is updated, one deleted, one created and a child added; a
// migration with source.read_time: T migrates both tables exactly as they
// were at T; source.read_time: none and the default (the moment the job
// is resolved, which the run prints) migrate them as they are; a read
// time older than the database keeps fails and says how to read instead.
func TestSpannerReadTime(t *testing.T) {
	emulator.RequireSpanner(t)
	ctx := context.Background()
	src := emulator.TestDB(t,
		`CREATE TABLE Account (Id INT64 NOT NULL, V STRING(16)) PRIMARY KEY (Id)`,
		`CREATE TABLE Entry (Id INT64 NOT NULL, EntryId INT64 NOT NULL, V STRING(16)) PRIMARY KEY (Id, EntryId), INTERLEAVE IN PARENT Account ON DELETE CASCADE`)
	apply := func(ms ...*spanner.Mutation) time.Time {
		t.Helper()
		ts, err := src.Apply(ctx, ms)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	account := func(id int64, v string) *spanner.Mutation {
		return spanner.InsertOrUpdate("Account", []string{"Id", "V"}, []any{id, v})
	}
	entry := func(id, e int64, v string) *spanner.Mutation {
		return spanner.InsertOrUpdate("Entry", []string{"Id", "EntryId", "V"}, []any{id, e, v})
	}
	var before []*spanner.Mutation
	for i := range int64(20) {
		before = append(before, account(i, "before"))
	}
	apply(before...)
	at := apply(entry(0, 1, "before"))
	time.Sleep(20 * time.Millisecond)
	apply(account(1, "after"))
	apply(spanner.Delete("Account", spanner.Key{int64(2)}))
	apply(account(99, "after"), entry(0, 2, "after"))

	run := func(readTime string) (*runNotes, []string, error) {
		t.Helper()
		dstID, dst := newSpannerTarget(t, "readtime")
		yaml := fmt.Sprintf(`
source: {type: spanner, project: %s, instance: %s, database: %s, table: Account%s}
target: {type: spanner, project: %s, instance: %s, database: %s, table: Account}
interleaved: [Entry]
rewrite: {strategy: shard, params: {n: 8, mode: abs}}
dead_letter: %q
`, emulator.SpannerProject(), emulator.SpannerInstance(), dbID(src), readTime,
			emulator.SpannerProject(), emulator.SpannerInstance(), dstID, filepath.Join(t.TempDir(), "dead.jsonl"))
		printed := &runNotes{}
		if _, _, err := migration.Run(ctx, loadYAML(t, yaml), migration.Options{Notes: printed.Say, CreateTarget: true}, pipeline.Runner{Runner: "prism"}); err != nil {
			return printed, nil, err
		}
		var got []string
		for _, table := range []string{"Account", "Entry"} {
			for _, r := range readRows(t, dst, table) {
				id, _ := r.Get("Id")
				v, _ := r.Get("V")
				row := fmt.Sprintf("%s:%d", table, id.Int)
				if e, ok := r.Get("EntryId"); ok {
					row += fmt.Sprintf("/%d", e.Int)
				}
				if _, ok := r.Get("ShardId"); !ok {
					t.Errorf("%s row %s has no ShardId: the rewrite did not run", table, row)
				}
				got = append(got, row+"="+v.Str)
			}
		}
		sort.Strings(got)
		return printed, got, nil
	}
	want := func(changed bool) []string {
		var w []string
		for i := range 20 {
			switch {
			case changed && i == 1:
				w = append(w, "Account:1=after")
			case changed && i == 2:
			default:
				w = append(w, fmt.Sprintf("Account:%d=before", i))
			}
		}
		w = append(w, "Entry:0/1=before")
		if changed {
			w = append(w, "Account:99=after", "Entry:0/2=after")
		}
		sort.Strings(w)
		return w
	}
	at = at.UTC()
	printed, got, err := run(fmt.Sprintf(", read_time: %q", at.Format(time.RFC3339Nano)))
	if err != nil {
		t.Fatalf("read_time %s: %v", at.Format(time.RFC3339Nano), err)
	}
	if strings.Join(got, " ") != strings.Join(want(false), " ") {
		t.Errorf("at read time %s:\n got %v\nwant %v", at.Format(time.RFC3339Nano), got, want(false))
	}
	if ats := printed.readingAt(); len(ats) != 1 || !ats[0].Equal(at) {
		t.Errorf("the run does not say its read time %s:\n%s", at.Format(time.RFC3339Nano), printed)
	}
	printed, got, err = run(", read_time: none")
	if err != nil {
		t.Fatalf("read_time none: %v", err)
	}
	if strings.Join(got, " ") != strings.Join(want(true), " ") || len(printed.readingAt()) != 0 {
		t.Errorf("read_time none:\n got %v\nwant %v\n%s", got, want(true), printed)
	}
	printed, got, err = run("")
	if err != nil {
		t.Fatalf("default read time: %v", err)
	}
	if strings.Join(got, " ") != strings.Join(want(true), " ") || len(printed.readingAt()) != 1 {
		t.Errorf("default read time:\n got %v\nwant %v\n%s", got, want(true), printed)
	}
	old := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Second)
	_, _, err = run(fmt.Sprintf(", read_time: %q", old.Format(time.RFC3339)))
	t.Logf("read_time 3 h ago: %v", err)
	if err == nil || !strings.Contains(err.Error(), "version_retention_period") || !strings.Contains(err.Error(), "source.read_time: none") {
		t.Errorf("read_time 3 h ago: %v; want an error naming version_retention_period and source.read_time: none", err)
	}
}
