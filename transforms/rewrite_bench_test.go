package transforms

import (
	"context"
	"fmt"
	"testing"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
	keyrewrite "github.com/rekeyio/rekey/rewrite"
)

// BenchmarkRewriteBatch is the rewrite stage's work on one batch of 500
// rows of eight fields, shard's rewrite appending ShardId: as the stage
// works on record.Batch values (batch: rewriteBatch, which copies the
// fields with room for ShardId and leaves the input as it is; owned: in
// place, records read with room for ShardId, RewriteOwning), and as it
// worked when batches were []byte between stages (decode, rewrite, encode;
// the records decoded as they come, exact, or with room for the fields the
// rewrite adds, spare). Compare them in one run.
//
//	go test -run XXX -bench RewriteBatch ./transforms/
func BenchmarkRewriteBatch(b *testing.B) {
	var recs []record.Record
	for i := range BatchSize {
		recs = append(recs, record.Record{Table: "Accounts", Fields: []record.Field{
			{Name: "AccountId", Value: record.String(fmt.Sprintf("acct-%08d", i))}, {Name: "Seq", Value: record.Int(int64(i))},
			{Name: "Name", Value: record.String("an account holder")}, {Name: "Balance", Value: record.Int(4200)},
			{Name: "Rate", Value: record.Float(1.5)}, {Name: "Tier", Value: record.String("gold")},
			{Name: "Active", Value: record.Bool(true)}, {Name: "Note", Value: record.String("some more text")}}})
	}
	batch := record.EncodeBatch(recs)
	spec := rekeyer.Spec{Strategy: keyrewrite.StepConfig{Strategy: "shard", Params: map[string]any{"n": 16, "columns": []any{"AccountId"}, "mode": "abs"}},
		SourceStore: record.Spanner, TargetStore: record.Spanner, Table: "Accounts", Key: "AccountId STRING(MAX), Seq INT64"}
	rk, err := spec.Build()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("batch", func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		for b.Loop() {
			out := rewriteBatch(ctx, rk, false, false, rk.Adds(), recs, func(string) { b.Fatal("dead letter") })
			if len(out) != len(recs) {
				b.Fatalf("%d records out of %d", len(out), len(recs))
			}
		}
	})
	b.Run("owned", func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		for b.Loop() {
			b.StopTimer() // the records a source would have made, with room
			own := make([]record.Record, len(recs))
			for i, r := range recs {
				own[i] = r
				own[i].Fields = append(make([]record.Field, 0, len(r.Fields)+rk.Adds()), r.Fields...)
			}
			b.StartTimer()
			out := rewriteBatch(ctx, rk, false, true, rk.Adds(), own, func(string) { b.Fatal("dead letter") })
			if len(out) != len(recs) {
				b.Fatalf("%d records out of %d", len(out), len(recs))
			}
		}
	})
	for _, c := range []struct {
		name  string
		spare int
	}{{"exact", 0}, {"spare", rk.Adds()}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rs, err := record.DecodeBatchSpare(batch, c.spare)
				if err != nil {
					b.Fatal(err)
				}
				for i := range rs {
					if err := rk.Rewrite(&rs[i]); err != nil {
						b.Fatal(err)
					}
				}
				_ = record.EncodeBatch(rs)
			}
		})
	}
}
