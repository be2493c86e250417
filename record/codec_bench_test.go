package record

import (
	"fmt"
	"testing"
)

// BenchmarkEncodeBatch encodes a batch of 500 records of seven fields
// (about 200 bytes each encoded), as the stages' batches are; B/op is
// the bytes the encoding allocates against the batch's encoded size
// (the "encoded-B" metric).
func BenchmarkEncodeBatch(b *testing.B) {
	recs := make([]Record, 500)
	for i := range recs {
		recs[i] = Record{Table: "Accounts", Fields: []Field{
			{Name: "Shard", Value: Int(int64(i % 16))},
			{Name: "AccountId", Value: String(fmt.Sprintf("acct-%08d", i/4))},
			{Name: "Seq", Value: Int(int64(i % 4))},
			{Name: "Name", Value: String(fmt.Sprintf("Customer %d of region %d", i/4, i%17))},
			{Name: "Email", Value: String(fmt.Sprintf("customer%08d@example.com", i/4))},
			{Name: "Amount", Value: Int(int64(i*7919) % 1_000_000)},
			{Name: "Note", Value: String("Preferred contact by email; invoices monthly; net 30 terms agreed with the account team."[:60+i%16])},
		}}
	}
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(EncodeBatch(recs))
	}
	b.ReportMetric(float64(n), "encoded-B")
}
