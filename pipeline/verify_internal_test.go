package pipeline

import (
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/internal/progress"
	"github.com/rekeyio/rekey/migration"
)

// TestVerifyProgressCountsCompared: a verify's progress counts the
// records it compared against its total, not the records it wrote
// (none: it printed "798 read, 0 written, 0 records/s").
func TestVerifyProgressCountsCompared(t *testing.T) {
	c := migration.Counters{migration.Read: 798, operator.VerifyCompared: 400, operator.VerifyMatching: 390}
	line := progress.Line(snapshot(c, 10*time.Second, countsCompared), &progress.Total{N: 800, From: "COUNT(*) of the cohorts"})
	if !strings.HasPrefix(line, "rekey: 50% (400 of ~800 records, from COUNT(*) of the cohorts), 798 read, 400 compared, 0 dead-lettered, 40 records/s") {
		t.Errorf("verify progress %q", line)
	}
	if line := progress.Line(snapshot(migration.Counters{migration.Read: 5, migration.Written: 4}, time.Second, countsWritten), nil); !strings.Contains(line, "4 written") {
		t.Errorf("migration progress %q", line)
	}
	// A dry run or a plan writes nothing: its rate is the read rate (it
	// printed "0 records/s" while reading 60,000 a second).
	c = migration.Counters{migration.Read: 600000, migration.Rewritten: 600000, migration.DeadLettered: 2}
	if line := progress.Line(snapshot(c, 10*time.Second, countsRead), &progress.Total{N: 1200000, From: "file sizes"}); !strings.HasPrefix(line, "rekey: 50% (600000 of ~1200000 records, from file sizes), 600000 read, 2 dead-lettered, nothing written (a dry run), 60000 records read/s, ETA 10s") {
		t.Errorf("dry-run progress %q", line)
	}
}

// A plan's progress says it is a plan, and its pipeline ends with what
// it read, at least the keys it recorded: a plan of 50,000 records
// ended with "0 read, 0 dead-lettered, nothing written (a dry run)", the
// one line printed a second in.
func TestPlanProgressSaysWhatItRead(t *testing.T) {
	c := migration.Counters{migration.Read: 0}
	if line := progress.Line(snapshot(c, time.Second, countsPlan), nil); !strings.Contains(line, "nothing written (a plan)") {
		t.Errorf("plan progress %q", line)
	}
	for _, tc := range []struct {
		run     PlanRun
		sampled int
		want    string
	}{
		{PlanRun{Read: 50000, Sampled: 50000, Elapsed: 14200 * time.Millisecond}, 50000, "rekey: plan: 50,000 records read, 0 dead-lettered, in 14s; nothing written to the target"},
		{PlanRun{}, 50000, "rekey: plan: 50,000 records read, 0 dead-lettered; nothing written"}, // counts lost: the keys say
		{PlanRun{Read: 2000, Sampled: 1000, DeadLettered: 3}, 997, "rekey: plan: 2,000 records read, 997 sampled, 3 dead-lettered"},
	} {
		if got := tc.run.readLine(tc.sampled); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%+v, %d sampled: %q, want it to start %q", tc.run, tc.sampled, got, tc.want)
		}
	}
}
