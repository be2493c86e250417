package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rekeyio/rekey/migration"
)

// notesTo words the library's notes (migration.Note) as the lines a
// person reads, on w: the library hands over facts, the command owns the
// sentences.
func notesTo(w io.Writer) migration.Notes {
	return func(n migration.Note) {
		if line := noteLine(n); line != "" {
			fmt.Fprintln(w, line)
		}
	}
}

// noteLine is the line (or lines, for the DDL) a note reads as.
func noteLine(n migration.Note) string {
	switch n := n.(type) {
	case migration.TargetUnread:
		return fmt.Sprintf("rekey: the target database could not be read (%v); its tables are taken to be missing", n.Err)
	case migration.TargetDDL:
		return strings.TrimSuffix(n.Text, "\n")
	case migration.Redriving:
		return "rekey: redriving " + n.From
	case migration.Starting:
		return fmt.Sprintf("rekey: %s on %s", n.What, n.Runner)
	case migration.ReadingAt:
		return fmt.Sprintf("rekey: reading the source as it was at %s (source.read_time; none reads without one)", n.At.Format(time.RFC3339Nano))
	case migration.DryRunning:
		if n.Deletes {
			return fmt.Sprintf("rekey: dry run: reading and planning the deletes; deleting nothing but writing the dead letters (%s)", n.DeadLetters)
		}
		return fmt.Sprintf("rekey: dry run: reading, rewriting and planning every record; writing nothing but the dead letters (%s)", n.DeadLetters)
	case migration.WritePlan:
		return "rekey: " + n.Text
	case migration.CreatingIndexes:
		return fmt.Sprintf("rekey: creating %d secondary indexes after the load (write.indexes: after)", n.N)
	case migration.IndexesCreated:
		return fmt.Sprintf("rekey: indexes created in %s", n.Took.Round(time.Millisecond))
	case migration.NoLiveProgress:
		return fmt.Sprintf("rekey: no live progress on the %s runner; the counters follow at the end", n.Runner)
	case migration.CohortJob:
		return cohortJobLine(n)
	case migration.ReadTimeIgnored:
		return fmt.Sprintf("rekey: source.read_time %s is not used by a cohort backfill, which reads the source live", n.ReadTime)
	case migration.Moved:
		return fmt.Sprintf("rekey: moved cohorts %s from %s to %s (version %d)", n.Cohorts, n.From, n.To, n.Version)
	case migration.CleanupRecorded:
		return fmt.Sprintf("rekey: recorded the cleanup of cohorts %s (%s) in the audit (version %d)", n.Cohorts, n.From, n.Version)
	case migration.WaitingForOld:
		return fmt.Sprintf("rekey: waiting %s for every instance to write old too (read_new held %s)", n.Wait.Round(time.Millisecond), n.Hold)
	}
	return fmt.Sprintf("rekey: %+v", n)
}

// cohortJobLine is the line a cohort job starts with.
func cohortJobLine(n migration.CohortJob) string {
	share := 0.0
	if n.Buckets > 0 {
		share = 100 * float64(n.N) / float64(n.Buckets)
	}
	switch n.Kind {
	case "cleanup":
		return fmt.Sprintf("rekey: deleting the old records of cohorts %s of migration %s (%d of %d cohorts, %.2f%% of the users; %s; phase map version %d) from %s %s on %s",
			n.Cohorts, n.Migration, n.N, n.Buckets, share, n.Phases, n.Version, n.SourceType, n.SourceName, n.Runner)
	case "reverse":
		return fmt.Sprintf("rekey: copying cohorts %s of migration %s back from new to old", n.Cohorts, n.Migration)
	}
	return fmt.Sprintf("rekey: backfilling cohorts %s of migration %s (%d of %d cohorts, %.2f%% of the users; phase map version %d)",
		n.Cohorts, n.Migration, n.N, n.Buckets, share, n.Version)
}
