package record

import (
	"testing"
	"unsafe"
)

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

// TestDecodeBatchSpare: the records decode as DecodeBatch gives them,
// each with room for spare more fields (an embedded entity's fields
// with none), and appending that many does not move them.
func TestDecodeBatchSpare(t *testing.T) {
	recs := []Record{
		{Table: "T", Fields: []Field{{Name: "A", Value: Int(1)}, {Name: "E", Value: Value{Kind: KindEntity, Entity: []Field{{Name: "X", Value: Int(2)}}}}}},
		{Table: "T", Fields: []Field{{Name: "A", Value: String("x")}}},
	}
	b := EncodeBatch(recs)
	got, err := DecodeBatchSpare(b, 2)
	if err != nil || len(got) != 2 {
		t.Fatalf("DecodeBatchSpare = %d records, %v", len(got), err)
	}
	for i := range got {
		if d := Diff(&got[i], &recs[i]); d != "" {
			t.Errorf("record %d: %s", i, d)
		}
		if c := cap(got[i].Fields); c != len(recs[i].Fields)+2 {
			t.Errorf("record %d: cap %d, want %d", i, c, len(recs[i].Fields)+2)
		}
		first := &got[i].Fields[0]
		got[i].Set("S1", Int(1))
		got[i].Set("S2", Int(2))
		if &got[i].Fields[0] != first {
			t.Errorf("record %d: appending 2 fields moved them", i)
		}
	}
	if e := got[0].Fields[1].Value.Entity; cap(e) != len(e) {
		t.Errorf("embedded entity: cap %d, len %d; want no room", cap(e), len(e))
	}
}

// TestDecodeBatchNames: a field name the previous record has at the same
// place is that string again (one allocation for a batch's names, not
// one per record); other names, in another order or not there before,
// decode as themselves.
func TestDecodeBatchNames(t *testing.T) {
	recs := []Record{
		{Table: "T", Fields: []Field{{Name: "A", Value: Int(1)}, {Name: "B", Value: Int(2)}}},
		{Table: "T", Fields: []Field{{Name: "A", Value: Int(3)}, {Name: "B", Value: Int(4)}}},
		{Table: "T", Fields: []Field{{Name: "B", Value: Int(5)}, {Name: "A", Value: Int(6)}, {Name: "C", Value: Int(7)}}},
	}
	got, err := DecodeBatch(EncodeBatch(recs))
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if d := Diff(&got[i], &recs[i]); d != "" {
			t.Errorf("record %d: %s", i, d)
		}
	}
	if unsafe.StringData(got[1].Fields[0].Name) != unsafe.StringData(got[0].Fields[0].Name) {
		t.Error("record 1's A is a string of its own, want record 0's")
	}
}
