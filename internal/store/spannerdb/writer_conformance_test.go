package spannerdb_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/write/retry"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/internal/write/storewrite/writertest"
	"github.com/rekeyio/rekey/record"
)

// TestWriterConformance runs the writer conformance suite against the
// Spanner emulator: rows of C, interleaved in P, whose parent P(1) exists;
// a poisoned row names a parent that does not.
func TestWriterConformance(t *testing.T) {
	writertest.Run(t, writertest.Harness{New: func(t *testing.T) writertest.Store {
		c := emulator.TestDB(t,
			`CREATE TABLE P (Pid INT64 NOT NULL) PRIMARY KEY (Pid)`,
			`CREATE TABLE C (Pid INT64 NOT NULL, Id INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (Pid, Id), INTERLEAVE IN PARENT P ON DELETE CASCADE`)
		if _, err := c.Apply(t.Context(), []*spanner.Mutation{spanner.Insert("P", []string{"Pid"}, []any{int64(1)})}); err != nil {
			t.Fatal(err)
		}
		return &spannerStore{c: c}
	}})
}

type spannerStore struct{ c *spanner.Client }

func (s *spannerStore) Records(from, n, variant int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		id := int64(from + i)
		recs[i] = record.Record{Table: "C", Fields: []record.Field{
			{Name: "Pid", Value: record.Int(1)},
			{Name: "Id", Value: record.Int(id)},
			{Name: "V", Value: record.String(fmt.Sprintf("v%d-%d", id, variant))},
		}}
	}
	return recs
}

func (s *spannerStore) Poison(rec record.Record) (record.Record, string) {
	rec.Fields = append([]record.Field(nil), rec.Fields...)
	rec.Fields[0].Value = record.Int(1_000_000) // no such parent
	return rec, "NotFound"
}

func (s *spannerStore) Write(ctx context.Context, o writertest.Options, recs []record.Record) (storewrite.Outcome, error) {
	w, err := spannerdb.NewWriter(ctx, s.c, "C")
	if err != nil {
		return storewrite.Outcome{}, err
	}
	w.Source = "spanner:test/C"
	w.Mode = storewrite.ModeUpsert
	if o.Insert {
		w.Mode = storewrite.ModeInsert
	}
	if o.Delete {
		w.Mode = storewrite.ModeDelete
	}
	w.MaxRows = o.Batch
	w.Retry = retry.Policy{Initial: time.Millisecond, Max: 2 * time.Millisecond, MaxCumulative: 30 * time.Millisecond}
	commit, calls := w.Commit, &writertest.Counter{}
	w.Commit = func(ctx context.Context, insert bool, rows []spannerdb.Row) error {
		return calls.Call(o.Fault, func() error { return commit(ctx, insert, rows) })
	}
	return w.Write(ctx, recs)
}

func (s *spannerStore) Contents(ctx context.Context) ([]record.Record, error) {
	t, err := spannerdb.ReadTable(ctx, s.c, "C")
	if err != nil {
		return nil, err
	}
	var out []record.Record
	err = s.c.Single().Query(ctx, spanner.Statement{SQL: "SELECT Pid, Id, V FROM C"}).Do(func(r *spanner.Row) error {
		rec, err := spannerdb.RowToRecord(r, t)
		out = append(out, rec)
		return err
	})
	return out, err
}
