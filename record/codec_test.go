package record

import (
	"errors"
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

func TestEachRaw(t *testing.T) {
	recs := sampleRecords()
	recs = append(recs, Record{Table: "Empty"}, Record{Table: "Bytes", Fields: []Field{{Name: "B", Value: Bytes([]byte{0, 1, 2})}, {Name: "N", NoIndex: true, Value: Int(-3)}}})
	b := EncodeBatch(recs)
	// The records in reverse order, still encoded, make a batch that
	// decodes to them in that order.
	var raws [][]byte
	i := 0
	err := EachRaw(b, func(raw []byte, rec *Record) error {
		if !rec.Equal(&recs[i]) {
			t.Errorf("record %d: %s, want %s", i, rec.Describe(), recs[i].Describe())
		}
		raws = append(raws, append([]byte{}, raw...))
		i++
		return nil
	})
	if err != nil || i != len(recs) {
		t.Fatalf("EachRaw: %d records, %v", i, err)
	}
	out := AppendBatchHeader(nil, len(raws))
	for j := len(raws) - 1; j >= 0; j-- {
		out = append(out, raws[j]...)
	}
	got, err := DecodeBatch(out)
	if err != nil {
		t.Fatal(err)
	}
	for j := range got {
		if want := &recs[len(recs)-1-j]; !got[j].Equal(want) {
			t.Errorf("re-batched record %d: %s, want %s", j, got[j].Describe(), want.Describe())
		}
	}
	if err := EachRaw(b[:len(b)-3], func([]byte, *Record) error { return nil }); err == nil {
		t.Error("EachRaw of a cut batch: no error")
	}
	stop := errors.New("stop")
	if err := EachRaw(b, func([]byte, *Record) error { return stop }); err != stop {
		t.Errorf("EachRaw returned %v, want fn's error", err)
	}
}
