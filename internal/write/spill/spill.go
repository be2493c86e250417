// Package spill keeps the elements a local run shuffles on the local disk
// instead of in the runner's memory: a DoFn writes an element's bytes to a
// file of its own (Writer.Append) and passes on a small reference to one
// or more such elements (Writer.Ref), which a DoFn after the shuffle reads
// back (Reader.Each).
//
// Beam's local runners hold every element of a shuffle in memory, and
// prism sends a stage's whole input to the worker as one message, so a
// shuffle of N bytes costs several times N of memory while it passes.
// When the workers run in the launching process (direct, or prism and
// universal with the loopback environment), they share its disk, and
// spilling keeps the runner's part to the references: a few dozen bytes
// for each element of thousands of records. Files are never modified once
// their references are out, so a retried bundle writes a new file and
// leaves the old one unread; the directory is removed after the run.
package spill

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// tag is the first byte of a reference. Record batches (record.EncodeBatch)
// start with a small version number, never this.
const tag = 0xF5

// IsRef reports whether b is a reference from Writer.Ref.
func IsRef(b []byte) bool { return len(b) > 0 && b[0] == tag }

// Segment is where Writer.Append put an element in the writer's file.
type Segment struct{ Offset, Length int64 }

// ref is a decoded reference: n records in segments of the file at path.
type ref struct {
	n    int64
	segs []Segment
	path string
}

func decode(b []byte) (ref, error) {
	var r ref
	b = b[1:]
	next := func() int64 {
		x, k := binary.Uvarint(b)
		if k <= 0 || x > 1<<62 {
			b = nil
			return -1
		}
		b = b[k:]
		return int64(x)
	}
	r.n = next()
	k := next()
	if k > int64(len(b)) {
		k = -1
	}
	for i := int64(0); i < k; i++ {
		seg := Segment{Offset: next(), Length: next()}
		if seg.Offset < 0 || seg.Length < 0 {
			k = -1
			break
		}
		r.segs = append(r.segs, seg)
	}
	if r.n < 0 || k < 0 || len(b) == 0 {
		return r, errors.New("spill: corrupt reference")
	}
	r.path = string(b)
	return r, nil
}

// Len is the record count a reference carries, or -1 if b is not one.
func Len(b []byte) int {
	if !IsRef(b) {
		return -1
	}
	r, err := decode(b)
	if err != nil {
		return -1
	}
	return int(r.n)
}

// Writer appends elements to one new file in a directory.
type Writer struct {
	dir  string
	f    *os.File
	w    *bufio.Writer
	off  int64
	path string
}

// NewWriter returns a writer whose file is created in dir on first use.
func NewWriter(dir string) *Writer { return &Writer{dir: dir} }

// Append appends b to the writer's file and returns where it is.
func (w *Writer) Append(b []byte) (Segment, error) {
	if w.f == nil {
		f, err := os.CreateTemp(w.dir, "part-*.spill")
		if err != nil {
			return Segment{}, fmt.Errorf("spill: %w", err)
		}
		w.f, w.w, w.off, w.path = f, bufio.NewWriterSize(f, 1<<20), 0, f.Name()
	}
	if _, err := w.w.Write(b); err != nil {
		return Segment{}, fmt.Errorf("spill: writing %s: %w", w.path, err)
	}
	seg := Segment{Offset: w.off, Length: int64(len(b))}
	w.off += seg.Length
	return seg, nil
}

// Ref is a reference to segs of the writer's current file, holding n
// records in all. It may be read once Flush or Close has returned.
func (w *Writer) Ref(n int, segs []Segment) []byte {
	r := make([]byte, 0, 1+(2+2*len(segs))*binary.MaxVarintLen64+len(w.path))
	r = append(r, tag)
	r = binary.AppendUvarint(r, uint64(n))
	r = binary.AppendUvarint(r, uint64(len(segs)))
	for _, s := range segs {
		r = binary.AppendUvarint(r, uint64(s.Offset))
		r = binary.AppendUvarint(r, uint64(s.Length))
	}
	return append(r, w.path...)
}

// Put appends b, an element of n records, and returns its reference
// (Append and Ref).
func (w *Writer) Put(b []byte, n int) ([]byte, error) {
	seg, err := w.Append(b)
	if err != nil {
		return nil, err
	}
	return w.Ref(n, []Segment{seg}), nil
}

// Flush writes out what Append buffered.
func (w *Writer) Flush() error {
	if w.w == nil {
		return nil
	}
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("spill: writing %s: %w", w.path, err)
	}
	return nil
}

// Close flushes and closes the file; the next Append starts a new one.
func (w *Writer) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.Flush()
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("spill: closing %s: %w", w.path, cerr)
	}
	w.f, w.w = nil, nil
	return err
}

// Reader reads references back, keeping the files it opened open until
// Close.
type Reader struct {
	files map[string]*os.File
}

// Each calls fn with each element b refers to, in the order they were
// written, or with b itself if it is not a reference. Each element is
// read into a new slice, which fn may keep.
func (r *Reader) Each(b []byte, fn func(elem []byte) error) error {
	if !IsRef(b) {
		return fn(b)
	}
	ref, err := decode(b)
	if err != nil {
		return err
	}
	f, ok := r.files[ref.path]
	if !ok {
		if f, err = os.Open(ref.path); err != nil {
			return fmt.Errorf("spill: %w", err)
		}
		if r.files == nil {
			r.files = map[string]*os.File{}
		}
		r.files[ref.path] = f
	}
	for _, s := range ref.segs {
		out := make([]byte, s.Length)
		if _, err := f.ReadAt(out, s.Offset); err != nil {
			return fmt.Errorf("spill: reading %s at %d: %w", ref.path, s.Offset, err)
		}
		if err := fn(out); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the files Each opened.
func (r *Reader) Close() {
	for p, f := range r.files {
		f.Close()
		delete(r.files, p)
	}
}
