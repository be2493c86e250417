// Package keys is the file format between `rekey plan`'s pipeline and its
// analysis: one JSON object a line per sampled record, with the record's
// key before and after the rewrite (order-preserving encodings and
// readable text) and what the key analysis needs of the old record.
//
// The pipeline's plan sink writes one part file per bundle
// (part-*.jsonl in the keys directory), its records in the order the
// write planner emitted them, each planned batch numbered within the file
// (Key.Batch). A part file is one worker's stream of commits; the
// analysis interleaves the files batch by batch (Interleave) to get the
// order the target would see from workers committing side by side.
package keys

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"   // gs:// paths
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // local paths
)

// Key is one sampled record.
type Key struct {
	// Table is the target table or kind.
	Table string `json:"t"`
	// Old and New are the keys in the source's and the target's store
	// order (rewrite.AppendSpannerKey / AppendDatastoreKey): bytes.Compare
	// orders them as the store does.
	Old []byte `json:"o"`
	New []byte `json:"n"`
	// OldText and NewText are the keys as people read them.
	OldText string `json:"ot"`
	NewText string `json:"nt"`
	// First is the old key's first column (Spanner) or its leaf element
	// (Datastore).
	First Part `json:"f"`
	// NewParts are the new key's column values (Spanner targets), in key
	// order: all of them, or only the first (pipeline.PlanOptions.AllParts);
	// a Datastore key's leaf element. NewColumns is how many the key has.
	NewParts   []Part `json:"np,omitempty"`
	NewColumns int    `json:"nc,omitempty"`
	// Columns is the number of old key columns (Spanner) or path elements
	// (Datastore).
	Columns int `json:"c"`
	// Time is a timestamp of the old record that is not its first key
	// column (TimeField names it), for the rank correlation of key order
	// with time; nil if the record has none.
	Time      *time.Time `json:"ts,omitempty"`
	TimeField string     `json:"tf,omitempty"`
	// Pos says where a record of a file source was read (0: not from a
	// file): source.PosField, which grows with the record's place in its
	// file and names the file by its index (source.PosFile). File is that
	// file's name, set after the keys are read, not stored.
	Pos  int64  `json:"ps,omitempty"`
	File string `json:"-"`
	// Bytes is the record's size (its encoding).
	Bytes int `json:"b"`
	// Batch numbers the planned batch within its part file.
	Batch int `json:"q"`
}

// Part is one key column's value or a Datastore path element: Kind is
// "int", "string", "time", "float", "bool", "bytes", "null" or "other";
// Text is the value as text (a Datastore name, a string, an RFC 3339
// time, a number's digits).
type Part struct {
	Kind string `json:"k"`
	Int  int64  `json:"i,omitempty"`
	Text string `json:"s,omitempty"`
	// Bytes is a BYTES value.
	Bytes []byte `json:"y,omitempty"`
	// Datastore is set for a Datastore path element (Kind "int" for an
	// id, "string" for a name).
	Datastore bool `json:"d,omitempty"`
}

// Writer writes keys to one part file.
type Writer struct {
	w   io.WriteCloser
	buf *bufio.Writer
	enc *json.Encoder
}

// Create opens a new part file in dir (local or gs://) named
// part-NAME.jsonl.
func Create(ctx context.Context, dir, name string) (*Writer, error) {
	p := Join(dir, "part-"+name+".jsonl")
	fs, err := filesystem.New(ctx, p)
	if err != nil {
		return nil, err
	}
	w, err := fs.OpenWrite(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("plan keys: creating %s: %w", p, err)
	}
	buf := bufio.NewWriterSize(w, 1<<20)
	return &Writer{w: w, buf: buf, enc: json.NewEncoder(buf)}, nil
}

// Write writes one key.
func (w *Writer) Write(k *Key) error { return w.enc.Encode(k) }

// Close flushes and closes the file.
func (w *Writer) Close() error {
	if err := w.buf.Flush(); err != nil {
		w.w.Close()
		return err
	}
	return w.w.Close()
}

// Join joins a directory (local or gs://) and a name.
func Join(dir, name string) string {
	if strings.Contains(dir, "://") {
		return strings.TrimSuffix(dir, "/") + "/" + name
	}
	return path.Join(dir, name)
}

// Stream is one part file's keys, in the order they were written.
type Stream []Key

// Read reads every part file in dir. The streams come in the order of
// their file names (random names: no stream is favoured).
func Read(ctx context.Context, dir string) ([]Stream, error) {
	glob := Join(dir, "part-*.jsonl")
	fs, err := filesystem.New(ctx, glob)
	if err != nil {
		return nil, err
	}
	defer fs.Close()
	names, err := fs.List(ctx, glob)
	if err != nil {
		return nil, fmt.Errorf("plan keys: listing %s: %w", glob, err)
	}
	sort.Strings(names)
	var out []Stream
	for _, name := range names {
		s, err := readStream(ctx, fs, name)
		if err != nil {
			return nil, err
		}
		if len(s) > 0 {
			out = append(out, s)
		}
	}
	return out, nil
}

func readStream(ctx context.Context, fs filesystem.Interface, name string) (Stream, error) {
	r, err := fs.OpenRead(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("plan keys: opening %s: %w", name, err)
	}
	defer r.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(r, 1<<20))
	var s Stream
	// Every key repeats its table's and time field's name: one copy each.
	names := map[string]string{}
	intern := func(v string) string {
		if c, ok := names[v]; ok {
			return c
		}
		names[v] = v
		return v
	}
	for line := 1; ; line++ {
		var k Key
		if err := dec.Decode(&k); err == io.EOF {
			return s, nil
		} else if err != nil {
			return nil, fmt.Errorf("plan keys: %s, key %d: %w", name, line, err)
		}
		k.Table, k.TimeField = intern(k.Table), intern(k.TimeField)
		s = append(s, k)
	}
}

// Interleave merges streams into the order a target sees them when each
// stream is one worker committing its batches in turn, all workers side
// by side: the first batch of every stream, then the second of every
// stream, and so on.
func Interleave(streams []Stream) []Key {
	n := 0
	batches := make([][]Stream, len(streams))
	for i, s := range streams {
		n += len(s)
		for start := 0; start < len(s); {
			end := start + 1
			for end < len(s) && s[end].Batch == s[start].Batch {
				end++
			}
			batches[i] = append(batches[i], s[start:end])
			start = end
		}
	}
	out := make([]Key, 0, n)
	for round := 0; len(out) < n; round++ {
		for _, b := range batches {
			if round < len(b) {
				out = append(out, b[round]...)
			}
		}
	}
	return out
}
