package spannerdb_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/store/spannerdb/spannerdbtest"
	"github.com/rekeyio/rekey/internal/write/retry"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/record"
)

// fakeWriter is a Writer on table T (Id INT64) whose commits go to a
// function: a commit fails with the error fail returns for the first row
// it refuses; the ids of each successful commit are recorded.
func fakeWriter(fail func(id int64) error) (*spannerdb.Writer, *[][]int64) {
	commit, commits := spannerdbtest.FakeCommit(fail)
	w := &spannerdb.Writer{
		Table:  spannerdbtest.IDTable(),
		Source: "spanner:test/T",
		Retry:  retry.Policy{Initial: time.Millisecond, Max: 2 * time.Millisecond, MaxCumulative: 20 * time.Millisecond},
		Commit: commit,
	}
	return w, commits
}

func recordsOf(n int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Table: "T", Fields: []record.Field{{Name: "Id", Value: record.Int(int64(i))}}}
	}
	return recs
}

// TestWriterIsolatesRowsAtFault: a commit refused because of some rows is
// retried in halves until those rows stand alone; they are dead-lettered
// with the commit error, every other row is committed exactly once.
func TestWriterIsolatesRowsAtFault(t *testing.T) {
	bad := map[int64]bool{3: true, 4: true, 97: true}
	w, commits := fakeWriter(func(id int64) error {
		if bad[id] {
			return status.Error(codes.FailedPrecondition, "row refused")
		}
		return nil
	})
	out, err := w.Write(context.Background(), recordsOf(100))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, c := range *commits {
		for _, id := range c {
			seen[id]++
		}
	}
	for id := range int64(100) {
		if want := map[bool]int{true: 0, false: 1}[bad[id]]; seen[id] != want {
			t.Errorf("row %d committed %d times, want %d", id, seen[id], want)
		}
	}
	if out.Written != 97 || out.Splits == 0 {
		t.Errorf("written %d, %d splits; want 97 and some", out.Written, out.Splits)
	}
	if len(out.DeadLetters) != len(bad) {
		t.Fatalf("%d dead letters, want %d", len(out.DeadLetters), len(bad))
	}
	for _, l := range out.DeadLetters {
		d, rec, err := record.ParseDeadLetter([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		id, _ := rec.Get("Id")
		if !bad[id.Int] || d.Stage != record.StageWrite || !strings.Contains(d.Reason, "row refused") {
			t.Errorf("dead letter %s", l)
		}
	}
}

// TestWriterInfrastructureErrorsAreReturned: when even a single row's
// commit fails for a reason that is not the row's, the error is returned
// (the caller retries the write) and nothing is dead-lettered.
func TestWriterInfrastructureErrorsAreReturned(t *testing.T) {
	for _, infra := range []error{
		status.Error(codes.Unavailable, "try again"),
		status.Error(codes.DeadlineExceeded, "slow"),
		status.Error(codes.Internal, "grpc: error while marshaling"),
		status.Error(codes.NotFound, "Database not found: projects/p/instances/i/databases/d"),
		context.Canceled,
		errors.New("something unknown"),
	} {
		w, _ := fakeWriter(func(id int64) error {
			if id == 5 {
				return infra
			}
			return nil
		})
		out, err := w.Write(context.Background(), recordsOf(10))
		if err == nil || !strings.Contains(err.Error(), "not the row's") || len(out.DeadLetters) != 0 {
			t.Errorf("%v: error %v, %d dead letters; want the error returned and none", infra, err, len(out.DeadLetters))
		}
		if w.Buffered() != 0 {
			t.Errorf("%v: %d rows left buffered after the failed write", infra, w.Buffered())
		}
	}
}

// TestWriterRetriesTransientErrors: a commit failing with a transient
// error is committed again, whole, after a backoff.
func TestWriterRetriesTransientErrors(t *testing.T) {
	for _, code := range []codes.Code{codes.Aborted, codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded} {
		failures := 2
		w, commits := fakeWriter(func(int64) error {
			if failures > 0 {
				failures--
				return status.Error(code, "transient")
			}
			return nil
		})
		out, err := w.Write(context.Background(), recordsOf(10))
		if err != nil {
			t.Fatalf("%v: %v", code, err)
		}
		if len(*commits) != 1 || len((*commits)[0]) != 10 || len(out.DeadLetters) != 0 || len(out.Retries) != 2 {
			t.Errorf("%v: commits %v, %d dead, %d retries; want all 10 rows in one commit after 2 retries", code, *commits, len(out.DeadLetters), len(out.Retries))
		}
	}
}

// TestWriterNoAccessDeadLettersTheCommit: PermissionDenied and
// Unauthenticated are not retried or split: the commit's rows are
// dead-lettered at once with the reason.
func TestWriterNoAccessDeadLettersTheCommit(t *testing.T) {
	for _, code := range []codes.Code{codes.PermissionDenied, codes.Unauthenticated} {
		calls := 0
		w, _ := fakeWriter(func(int64) error {
			calls++
			return status.Error(code, "caller lacks spanner.databases.write")
		})
		out, err := w.Write(context.Background(), recordsOf(10))
		if err != nil {
			t.Fatalf("%v: %v", code, err)
		}
		dead := out.DeadLetters
		if calls != 1 || len(dead) != 10 || !strings.Contains(dead[0], "spanner.databases.write") {
			t.Errorf("%v: %d calls, %d dead letters (%v); want 1 call and 10 with the reason", code, calls, len(dead), dead)
		}
	}
}

// TestWriterBounds: commits hold at most MaxRows rows; a batch is handed
// back by Add when the next row would pass a bound.
func TestWriterBounds(t *testing.T) {
	w, commits := fakeWriter(func(int64) error { return nil })
	w.MaxRows = 7
	if _, err := w.Write(context.Background(), recordsOf(20)); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, c := range *commits {
		sizes = append(sizes, len(c))
	}
	if len(sizes) != 3 || sizes[0] != 7 || sizes[1] != 7 || sizes[2] != 6 {
		t.Errorf("commits of %v rows, want [7 7 6]", sizes)
	}
}

// TestWriterDeleteMode: in delete mode a row counts one mutation however
// many columns the record carries (the commits fill MaxMutations with
// rows, not cells), only the key is read (a value the table would refuse
// does not stop the delete), a record without its key is dead-lettered,
// and the rows are counted deleted, not written.
func TestWriterDeleteMode(t *testing.T) {
	commit, commits := spannerdbtest.FakeCommit(func(int64) error { return nil })
	table := spannerdbtest.IDTable()
	table.Columns = append(table.Columns, spannerdb.Column{Name: "V", Type: "STRING(4)"})
	w := &spannerdb.Writer{Table: table, Source: "spanner:test/T", Mode: storewrite.ModeDelete, MaxMutations: 4, Commit: commit}
	var recs []record.Record
	for i := range 10 {
		recs = append(recs, record.Record{Table: "T", Fields: []record.Field{{Name: "Id", Value: record.Int(int64(i))}, {Name: "V", Value: record.String("longer than 4")}}})
	}
	recs = append(recs, record.Record{Table: "T", Fields: []record.Field{{Name: "V", Value: record.String("x")}}})
	out, err := w.Write(context.Background(), recs)
	if err != nil {
		t.Fatal(err)
	}
	if out.Deleted != 10 || out.Written != 0 {
		t.Errorf("deleted %d, written %d; want 10 and 0", out.Deleted, out.Written)
	}
	if len(out.DeadLetters) != 1 || !strings.Contains(out.DeadLetters[0], "key column Id") {
		t.Errorf("dead letters %v, want the record without its key", out.DeadLetters)
	}
	var sizes []int
	for _, c := range *commits {
		sizes = append(sizes, len(c))
	}
	if len(sizes) != 3 || sizes[0] != 4 || sizes[1] != 4 || sizes[2] != 2 {
		t.Errorf("commits of %v rows, want [4 4 2]: a delete is one mutation", sizes)
	}
	for _, c := range out.Commits {
		if c.Mutations > 4 {
			t.Errorf("a commit of %d mutations, over MaxMutations 4", c.Mutations)
		}
	}
}
