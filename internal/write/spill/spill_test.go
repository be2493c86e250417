package spill_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/rekeyio/rekey/internal/write/spill"
	"github.com/rekeyio/rekey/record"
)

func TestPutLoad(t *testing.T) {
	dir := t.TempDir()
	w := spill.NewWriter(dir)
	var elems, refs [][]byte
	for i := range 50 {
		recs := []record.Record{{Table: "T", Fields: []record.Field{{Name: "N", Value: record.Int(int64(i))}}}}
		b := record.EncodeBatch(recs)
		if spill.IsRef(b) || spill.Len(b) != -1 {
			t.Fatalf("a record batch is taken for a reference")
		}
		ref, err := w.Put(b, len(recs)+i)
		if err != nil {
			t.Fatal(err)
		}
		if !spill.IsRef(ref) || spill.Len(ref) != 1+i {
			t.Fatalf("reference %d: IsRef %v, Len %d", i, spill.IsRef(ref), spill.Len(ref))
		}
		elems, refs = append(elems, b), append(refs, ref)
		if i == 20 {
			// Close ends the file; the next Put starts another.
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	var r spill.Reader
	defer r.Close()
	for i := len(refs) - 1; i >= 0; i-- {
		if got := load(t, &r, refs[i]); len(got) != 1 || !bytes.Equal(got[0], elems[i]) {
			t.Fatalf("element %d: got %x, want %x", i, got, elems[i])
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 2 {
		t.Errorf("%d files, want 2: %v", len(files), files)
	}
	// Anything else is passed through as it is.
	plain := []byte{1, 2, 3}
	if got := load(t, &r, plain); len(got) != 1 || !bytes.Equal(got[0], plain) {
		t.Errorf("Each(%x) gave %x", plain, got)
	}
}

// TestSegments: one reference to several elements of a file gives them
// back in order.
func TestSegments(t *testing.T) {
	w := spill.NewWriter(t.TempDir())
	var segs []spill.Segment
	var want [][]byte
	for i := range 10 {
		b := bytes.Repeat([]byte{byte(i)}, i+1)
		seg, err := w.Append(b)
		if err != nil {
			t.Fatal(err)
		}
		if i%3 != 1 {
			segs, want = append(segs, seg), append(want, b)
		}
	}
	ref := w.Ref(42, segs)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if spill.Len(ref) != 42 {
		t.Errorf("Len = %d, want 42", spill.Len(ref))
	}
	var r spill.Reader
	defer r.Close()
	got := load(t, &r, ref)
	if len(got) != len(want) {
		t.Fatalf("%d elements, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("element %d: %x, want %x", i, got[i], want[i])
		}
	}
}

func load(t *testing.T, r *spill.Reader, ref []byte) [][]byte {
	t.Helper()
	var out [][]byte
	if err := r.Each(ref, func(b []byte) error { out = append(out, b); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func each(ref []byte) error {
	var r spill.Reader
	defer r.Close()
	return r.Each(ref, func([]byte) error { return nil })
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	w := spill.NewWriter(dir)
	ref, err := w.Put([]byte("abc"), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := each(ref[:2]); err == nil {
		t.Errorf("a truncated reference: no error")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 1 {
		t.Fatalf("files %v, want one", files)
	}
	if err := os.Truncate(files[0], 2); err != nil {
		t.Fatal(err)
	}
	if err := each(ref); err == nil {
		t.Errorf("a reference past the end of its file: no error")
	}
	os.Remove(files[0])
	if err := each(ref); err == nil {
		t.Errorf("a removed file: no error")
	}
	if _, err := spill.NewWriter(filepath.Join(dir, "missing")).Put([]byte("x"), 1); err == nil {
		t.Errorf("a missing directory: no error")
	}
}
