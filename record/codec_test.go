package record

import "testing"

func TestBatch(t *testing.T) {
	recs := []Record{{Table: "T", Fields: []Field{{Name: "A", Value: Int(1)}}}, {Table: "T", Fields: []Field{{Name: "A", Value: String("x")}}}}
	b := EncodeBatch(recs)
	got, err := DecodeBatch(b)
	if err != nil || len(got) != 2 || got[1].Fields[0].Value.Str != "x" {
		t.Errorf("DecodeBatch = %+v, %v", got, err)
	}
	if n := BatchLen(b); n != 2 {
		t.Errorf("BatchLen = %d, want 2", n)
	}
	for _, bad := range [][]byte{nil, {9, 1}, {2, 0, 1, 0}, {batchVersion}} {
		if n := BatchLen(bad); n != -1 {
			t.Errorf("BatchLen(%v) = %d, want -1", bad, n)
		}
		if _, err := DecodeBatch(bad); err == nil {
			t.Errorf("DecodeBatch(%v) succeeded", bad)
		}
	}
}
