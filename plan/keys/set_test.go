package keys_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/rekeyio/rekey/plan/keys"
)

// view is what a set says of one key.
type view struct {
	Old, New         []byte
	First, NewFirst  keys.Part
	FirstOK, NewOK   bool
	Columns, NewCols int
	Multi            bool
	Bytes            int
	Sec              int64
	Nsec             int32
	Field            string
	Timed            bool
	Pos              int64
	File             string
	OldText, NewText string // by Texts
	OldOne, NewOne   string // by Text
}

// views are what s says of its keys, the texts read by Texts and Text.
func views(t *testing.T, s *keys.Set) []view {
	t.Helper()
	idx := make([]int, s.Len())
	for i := range idx {
		idx[i] = i
	}
	old, new, err := s.Texts(context.Background(), idx)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]view, s.Len())
	for i := range out {
		v := &out[i]
		v.Old, v.New = s.Old(i), s.New(i)
		v.First, v.FirstOK = s.First(true, i)
		v.NewFirst, v.NewOK = s.First(false, i)
		v.Columns, v.NewCols, v.Multi, v.Bytes = s.Columns(i), s.NewColumns(i), s.Multi(i), s.Bytes(i)
		v.Sec, v.Nsec, v.Field, v.Timed = s.Time(i)
		v.Pos, v.File = s.Pos(i), s.File(i)
		v.OldText, v.NewText = old[i], new[i]
		v.OldOne, v.NewOne = s.Text(true, i), s.Text(false, i)
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	return out
}

// testStreams are three streams of keys with every field set somewhere.
func testStreams() []keys.Stream {
	created := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	var streams []keys.Stream
	for s, sizes := range [][]int{{2, 1, 3}, {1}, {1, 2, 1, 2}} {
		var st keys.Stream
		for b, n := range sizes {
			for range n {
				i := len(st)
				k := keys.Key{
					Table: fmt.Sprint("T", s), Old: []byte(fmt.Sprintf("old-%d-%d", s, i)), New: []byte(fmt.Sprintf("new-%d-%d", s, i)),
					OldText: fmt.Sprintf("(%d, %d)", s, i), NewText: fmt.Sprintf("(x, %d, %d)", s, i),
					First:    keys.Part{Kind: "int", Int: int64(i), Text: fmt.Sprint(i)},
					NewParts: []keys.Part{{Kind: "string", Text: fmt.Sprint("s", s)}}, NewColumns: 3,
					Columns: 2, Bytes: 100 + i, Batch: b,
				}
				if s == 2 {
					at := created.Add(time.Duration(i) * time.Hour)
					k.Time, k.TimeField = &at, fmt.Sprint("F", i%2)
					k.Pos = int64(i + 1)
					k.First = keys.Part{Kind: "decimal", Text: "1.5"}
					k.NewParts, k.NewColumns = nil, 0
				}
				st = append(st, k)
			}
		}
		streams = append(streams, st)
	}
	return streams
}

// A set loaded from part files holds what one made from the keys in
// memory does, in the same interleaved order, and reads the texts back.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	streams := testStreams()
	for i, s := range streams {
		writeStream(t, dir, fmt.Sprint(i), s...)
	}
	writeStream(t, dir, "9-empty")
	loaded, err := keys.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := keys.FromStreams(streams)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Len() != 13 || mem.Len() != 13 {
		t.Fatalf("loaded %d keys, made %d; want 13", loaded.Len(), mem.Len())
	}
	got, want := views(t, loaded), views(t, mem)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded\n%+v\nmade in memory\n%+v", got, want)
	}
	for i, k := range keys.Interleave(streams) {
		if got[i].OldText != k.OldText || got[i].NewText != k.NewText || got[i].OldOne != k.OldText || got[i].NewOne != k.NewText {
			t.Errorf("key %d: texts %q %q, one by one %q %q; want %q and %q", i, got[i].OldText, got[i].NewText, got[i].OldOne, got[i].NewOne, k.OldText, k.NewText)
		}
		if tm, ok := got[i].Timed, k.Time != nil; tm != ok || ok && (got[i].Sec != k.Time.Unix() || got[i].Nsec != int32(k.Time.Nanosecond()) || got[i].Field != k.TimeField) {
			t.Errorf("key %d: time %d.%d %q (%v), want %v %q", i, got[i].Sec, got[i].Nsec, got[i].Field, tm, k.Time, k.TimeField)
		}
		if nf, ok := got[i].NewFirst, len(k.NewParts) > 0; got[i].NewOK != ok || ok && nf.Text != k.NewParts[0].Text {
			t.Errorf("key %d: new first %+v (%v), want %+v", i, nf, got[i].NewOK, k.NewParts)
		}
		if got[i].First.Kind != k.First.Kind || got[i].First.Text != k.First.Text || got[i].Pos != k.Pos || got[i].Bytes != k.Bytes {
			t.Errorf("key %d: first %+v, pos %d, bytes %d; want %+v, %d, %d", i, got[i].First, got[i].Pos, got[i].Bytes, k.First, k.Pos, k.Bytes)
		}
	}
	if p := loaded.TextPrefix(true); p != "(" {
		t.Errorf("old texts share %q, want %q", p, "(")
	}
	if p := loaded.TextPrefix(false); p != "(x, " {
		t.Errorf("new texts share %q, want %q", p, "(x, ")
	}

	// Files are named after the keys' positions.
	if err := loaded.NameFiles(func(pos int64) (string, error) { return fmt.Sprint("file-", pos%2), nil }); err != nil {
		t.Fatal(err)
	}
	for i := range loaded.Len() {
		want := ""
		if p := loaded.Pos(i); p != 0 {
			want = fmt.Sprint("file-", p%2)
		}
		if f := loaded.File(i); f != want {
			t.Errorf("key %d (pos %d): file %q, want %q", i, loaded.Pos(i), f, want)
		}
	}
}
