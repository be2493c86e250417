package record

import "testing"

func TestPacedBatch(t *testing.T) {
	recs := []Record{{Table: "T", Fields: []Field{{Name: "A", Value: Int(1)}}}, {Table: "T", Fields: []Field{{Name: "A", Value: String("x")}}}}
	plain, paced := EncodeBatch(recs), EncodePacedBatch(recs, 3, 13)
	for name, b := range map[string][]byte{"plain": plain, "paced": paced} {
		got, err := DecodeBatch(b)
		if err != nil || len(got) != 2 || got[1].Fields[0].Value.Str != "x" {
			t.Errorf("%s: DecodeBatch = %+v, %v", name, got, err)
		}
		if n := BatchLen(b); n != 2 {
			t.Errorf("%s: BatchLen = %d, want 2", name, n)
		}
	}
	if k, n, ok := BatchPacing(paced); !ok || k != 3 || n != 13 {
		t.Errorf("BatchPacing(paced) = %d, %d, %v; want 3, 13, true", k, n, ok)
	}
	if _, _, ok := BatchPacing(plain); ok {
		t.Error("BatchPacing(plain) ok")
	}
	// A key outside its count is no tag.
	if _, _, ok := BatchPacing([]byte{pacedVersion, 5, 2, 0}); ok {
		t.Error("BatchPacing of key 5 of 2 ok")
	}
	for _, bad := range [][]byte{nil, {9, 1}, {pacedVersion}, {batchVersion}} {
		if n := BatchLen(bad); n != -1 {
			t.Errorf("BatchLen(%v) = %d, want -1", bad, n)
		}
		if _, err := DecodeBatch(bad); err == nil {
			t.Errorf("DecodeBatch(%v) succeeded", bad)
		}
	}
}
