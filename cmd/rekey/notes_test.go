package main

import (
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/migration"
)

// Every note the library hands over reads as a line of the command's
// own, not as the fallback that shows the note's fields.
func TestEveryNoteHasItsLine(t *testing.T) {
	at := time.Date(2026, 12, 4, 10, 0, 0, 5, time.UTC)
	cases := []struct {
		n    migration.Note
		want string
	}{
		{migration.TargetUnread{Err: errString("denied")}, "rekey: the target database could not be read (denied); its tables are taken to be missing"},
		{migration.TargetDDL{Text: "-- target DDL\nCREATE TABLE T;\n"}, "-- target DDL\nCREATE TABLE T;"},
		{migration.Redriving{From: "dead.jsonl"}, "rekey: redriving dead.jsonl"},
		{migration.Starting{What: "jsonl Logs -> jsonl out.jsonl with shard", Runner: "prism"}, "rekey: jsonl Logs -> jsonl out.jsonl with shard on prism"},
		{migration.ReadingAt{At: at}, "rekey: reading the source as it was at 2026-12-04T10:00:00.000000005Z (source.read_time; none reads without one)"},
		{migration.DryRunning{DeadLetters: "d.jsonl"}, "rekey: dry run: reading, rewriting and planning every record; writing nothing but the dead letters (d.jsonl)"},
		{migration.DryRunning{DeadLetters: "d.jsonl", Deletes: true}, "rekey: dry run: reading and planning the deletes; deleting nothing but writing the dead letters (d.jsonl)"},
		{migration.WritePlan{Text: "writes as they come"}, "rekey: writes as they come"},
		{migration.CreatingIndexes{N: 2}, "rekey: creating 2 secondary indexes after the load (write.indexes: after)"},
		{migration.IndexesCreated{Took: 1500 * time.Microsecond}, "rekey: indexes created in 2ms"},
		{migration.NoLiveProgress{Runner: "dataflow"}, "rekey: no live progress on the dataflow runner; the counters follow at the end"},
		{migration.CohortJob{Kind: "backfill", Migration: "m", Cohorts: "0-9", N: 10, Buckets: 1000, Version: 3}, "rekey: backfilling cohorts 0-9 of migration m (10 of 1000 cohorts, 1.00% of the users; phase map version 3)"},
		{migration.CohortJob{Kind: "cleanup", Migration: "m", Cohorts: "0-9", N: 10, Buckets: 1000, Version: 3, Phases: "done", SourceType: "spanner", SourceName: "Logs", Runner: "prism"}, "rekey: deleting the old records of cohorts 0-9 of migration m (10 of 1000 cohorts, 1.00% of the users; done; phase map version 3) from spanner Logs on prism"},
		{migration.CohortJob{Kind: "reverse", Migration: "m", Cohorts: "0-9", N: 10, Buckets: 1000}, "rekey: copying cohorts 0-9 of migration m back from new to old"},
		{migration.ReadTimeIgnored{ReadTime: "2026-12-04T10:00:00Z"}, "rekey: source.read_time 2026-12-04T10:00:00Z is not used by a cohort backfill, which reads the source live"},
		{migration.Moved{Cohorts: "0-9", From: "dual_write", To: "backfilled", Version: 4}, "rekey: moved cohorts 0-9 from dual_write to backfilled (version 4)"},
		{migration.CleanupRecorded{Cohorts: "0-9", From: "done", Version: 5}, "rekey: recorded the cleanup of cohorts 0-9 (done) in the audit (version 5)"},
		{migration.WaitingForOld{Wait: 1234567 * time.Microsecond, Hold: 3 * time.Second}, "rekey: waiting 1.235s for every instance to write old too (read_new held 3s)"},
	}
	for _, c := range cases {
		if got := noteLine(c.n); got != c.want {
			t.Errorf("%T:\n got %q\nwant %q", c.n, got, c.want)
		}
	}
	var b strings.Builder
	notesTo(&b)(migration.Redriving{From: "x"})
	if b.String() != "rekey: redriving x\n" {
		t.Errorf("notesTo wrote %q", b.String())
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// A redrive's counters say written=1 rewritten=0 for a record refused
// while writing: a line under them says why.
func TestRedriveCountsNote(t *testing.T) {
	redrive := &migration.Job{RedriveFrom: "dead.jsonl"}
	c := migration.Counters{migration.Read: 1, migration.Written: 1}
	if got := redriveCountsNote(redrive, c); !strings.Contains(got, "those refused while writing had their new keys already") {
		t.Errorf("redrive note %q", got)
	}
	if got := redriveCountsNote(&migration.Job{}, c); got != "" {
		t.Errorf("run note %q", got)
	}
	c[migration.Rewritten] = 1
	if got := redriveCountsNote(redrive, c); got != "" {
		t.Errorf("note %q when every record written was rewritten", got)
	}
}
