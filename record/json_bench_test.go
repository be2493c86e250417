package record

import (
	"fmt"
	"testing"
)

// BenchmarkParseJSON parses JSON Lines records shaped like the throughput
// benchmark's: a Datastore key and five properties, about 200 bytes.
func BenchmarkParseJSON(b *testing.B) {
	lines := make([][]byte, 1000)
	for i := range lines {
		lines[i] = fmt.Appendf(nil, `{"__key__": {"path": ["Account", "acct-%06d-%04d"]}, "AccountId": "acct-%06d", "Seq": %d, "Email": "user%d@example.com", "Amount": %d, "Note": "a note of some length for row %d"}`, i/10, i%10, i/10, i%10, i, i*31, i)
	}
	b.SetBytes(int64(len(lines[0])))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := ParseJSON(lines[i%len(lines)]); err != nil {
			b.Fatal(err)
		}
	}
}
