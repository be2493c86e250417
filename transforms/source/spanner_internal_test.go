package source

import (
	"context"
	"strings"
	"testing"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms"
)

// TestConvertRowsBatchesAndDeadLetters: rows become batches of at most
// BatchSize records; a row with a column rekey cannot convert becomes a
// dead letter naming the column, with the columns that did convert.
func TestConvertRowsBatchesAndDeadLetters(t *testing.T) {
	const n, bad = 1201, 700
	rows := func(f func(*spanner.Row) error) error {
		for i := range n {
			var r *spanner.Row
			var err error
			if i == bad {
				r, err = spanner.NewRow([]string{"Id", "S"}, []any{int64(i), struct{ A int64 }{1}})
			} else {
				r, err = spanner.NewRow([]string{"Id", "S"}, []any{int64(i), "x"})
			}
			if err != nil {
				return err
			}
			if err := f(r); err != nil {
				return err
			}
		}
		return nil
	}
	var batches []record.Batch
	var dead []string
	err := convertRows(context.Background(), rows, "T", "spanner:db/T", 0, func(b record.Batch) { batches = append(batches, b) }, func(s string) { dead = append(dead, s) })
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, b := range batches {
		recs := b.Recs
		if len(recs) > transforms.BatchSize {
			t.Errorf("batch of %d records", len(recs))
		}
		total += len(recs)
	}
	if total != n-1 || len(batches) != 3 {
		t.Errorf("%d records in %d batches, want %d in 3", total, len(batches), n-1)
	}
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dead))
	}
	d, rec, err := record.ParseDeadLetter([]byte(dead[0]))
	if err != nil {
		t.Fatal(err)
	}
	if d.Stage != record.StageRead || d.Source != "spanner:db/T" || !strings.Contains(d.Reason, "column S: Spanner type STRUCT is not supported") {
		t.Errorf("dead letter %+v", d)
	}
	if id, _ := rec.Get("Id"); rec == nil || id.Int != bad {
		t.Errorf("dead letter record %v, want the row's Id", rec)
	}

	// An error of the read itself fails the partition.
	failing := func(f func(*spanner.Row) error) error { return context.DeadlineExceeded }
	if err := convertRows(context.Background(), failing, "T", "", 0, func(record.Batch) {}, func(string) {}); err == nil {
		t.Error("read error swallowed")
	}
}
