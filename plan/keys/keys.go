// Package keys is the file format between `rekey plan`'s pipeline and its
// analysis: per sampled record, its key before and after the rewrite
// (order-preserving encodings and readable text) and what the key
// analysis needs of the old record.
//
// The pipeline's plan sink writes one part file per bundle
// (part-*.keys in the keys directory), its records in the order the
// write planner emitted them, each planned batch numbered within the file
// (Key.Batch). A part file is one worker's stream of commits; the
// analysis interleaves the files batch by batch (Interleave) to get the
// order the target would see from workers committing side by side.
//
// # File format
//
// A part file is binary: the 8 bytes "RKPKEYS\n", the format's version
// (a uvarint, 1), then one record per key, each its length in bytes (a
// uvarint) and then its fields, so that a reader can skip a record
// without decoding it. Numbers are varints (encoding/binary: uvarints for
// counts, lengths and other numbers that are never negative, zig-zag
// varints otherwise); a string or a byte string is its length (a uvarint)
// and its bytes. A record's fields, in order:
//
//   - Batch (uvarint);
//   - flags (uvarint): 1 the record has a Time, 2 a Pos;
//   - Table and, for a record with a Time, TimeField are names: a uvarint
//     k, then if k is 0 the name as a string (the file's next name, number
//     1, 2, …), else the file's name number k: each name is written once;
//   - Old and New (byte strings), OldText and NewText (strings);
//   - First (a part), NewColumns (uvarint), the number of NewParts
//     (uvarint) and each of them (parts);
//   - Columns (uvarint);
//   - with flag 1: Time as its Unix seconds (varint) and nanoseconds
//     (uvarint), then TimeField (a name);
//   - with flag 2: Pos (varint);
//   - Bytes (uvarint).
//
// A part is its Kind (uvarint: 0 "", 1 "int", 2 "string", 3 "time",
// 4 "float", 5 "bool", 6 "bytes", 7 "null", 8 "other", 9 any other kind,
// its name following as a string), flags (uvarint: 1 Datastore), Int
// (varint), Text (string) and Bytes (byte string).
//
// A file of another format or version (the JSON Lines files of rekey
// before this format) is an error naming it.
//
// Read gives a directory's keys as Streams of Key, for a small sample;
// Load gives them interleaved as a Set, which holds what the analysis
// needs of each key compactly and reads the texts of the few keys a
// report shows back from the files.
package keys

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
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
	Table string
	// Old and New are the keys in the source's and the target's store
	// order (rewrite.AppendSpannerKey / AppendDatastoreKey): bytes.Compare
	// orders them as the store does.
	Old []byte
	New []byte
	// OldText and NewText are the keys as people read them.
	OldText string
	NewText string
	// First is the old key's first column (Spanner) or its leaf element
	// (Datastore).
	First Part
	// NewParts are the new key's column values (Spanner targets), in key
	// order: all of them, or only the first (pipeline.PlanOptions.AllParts);
	// a Datastore key's leaf element. NewColumns is how many the key has.
	NewParts   []Part
	NewColumns int
	// Columns is the number of old key columns (Spanner) or path elements
	// (Datastore).
	Columns int
	// Time is a timestamp of the old record that is not its first key
	// column (TimeField names it), for the rank correlation of key order
	// with time; nil if the record has none. It is read back in UTC.
	Time      *time.Time
	TimeField string
	// Pos says where a record of a file source was read (0: not from a
	// file): source.PosField, which grows with the record's place in its
	// file and names the file by its index (source.PosFile). File is that
	// file's name, set after the keys are read, not stored.
	Pos  int64
	File string
	// Bytes is the record's size (its encoding).
	Bytes int
	// Batch numbers the planned batch within its part file.
	Batch int
}

// Part is one key column's value or a Datastore path element: Kind is
// "int", "string", "time", "float", "bool", "bytes", "null" or "other";
// Text is the value as text (a Datastore name, a string, an RFC 3339
// time, a number's digits).
type Part struct {
	Kind string
	Int  int64
	Text string
	// Bytes is a BYTES value.
	Bytes []byte
	// Datastore is set for a Datastore path element (Kind "int" for an
	// id, "string" for a name).
	Datastore bool
}

// magic starts every part file; version follows it.
const (
	magic   = "RKPKEYS\n"
	version = 1
	// Ext is the part files' extension.
	Ext = ".keys"
)

// Record flags.
const (
	hasTime = 1 << iota
	hasPos
)

// kinds are the Part kinds by their code; other kinds are written by name
// (code otherKind).
var kinds = []string{"", "int", "string", "time", "float", "bool", "bytes", "null", "other"}

const otherKind = 9

func kindCode(k string) uint64 {
	for i, s := range kinds {
		if s == k {
			return uint64(i)
		}
	}
	return otherKind
}

// Writer writes keys to one part file.
type Writer struct {
	w     io.WriteCloser
	buf   *bufio.Writer
	rec   []byte
	names map[string]int
}

// Create opens a new part file in dir (local or gs://) named
// part-NAME.keys.
func Create(ctx context.Context, dir, name string) (*Writer, error) {
	p := Join(dir, "part-"+name+Ext)
	fs, err := filesystem.New(ctx, p)
	if err != nil {
		return nil, err
	}
	w, err := fs.OpenWrite(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("plan keys: creating %s: %w", p, err)
	}
	buf := bufio.NewWriterSize(w, 1<<20)
	if _, err := buf.WriteString(magic); err != nil {
		w.Close()
		return nil, err
	}
	buf.Write(binary.AppendUvarint(nil, version))
	return &Writer{w: w, buf: buf, names: map[string]int{}}, nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendBytes(b, s []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// appendName appends a name: its number if written before, else 0 and
// the name.
func (w *Writer) appendName(b []byte, s string) []byte {
	if k, ok := w.names[s]; ok {
		return binary.AppendUvarint(b, uint64(k))
	}
	w.names[s] = len(w.names) + 1
	return appendString(binary.AppendUvarint(b, 0), s)
}

func appendPart(b []byte, p *Part) []byte {
	code := kindCode(p.Kind)
	b = binary.AppendUvarint(b, code)
	if code == otherKind {
		b = appendString(b, p.Kind)
	}
	flags := uint64(0)
	if p.Datastore {
		flags = 1
	}
	b = binary.AppendUvarint(b, flags)
	b = binary.AppendVarint(b, p.Int)
	b = appendString(b, p.Text)
	return appendBytes(b, p.Bytes)
}

// Write writes one key.
func (w *Writer) Write(k *Key) error {
	b := w.rec[:0]
	b = binary.AppendUvarint(b, uint64(k.Batch))
	flags := uint64(0)
	if k.Time != nil {
		flags |= hasTime
	}
	if k.Pos != 0 {
		flags |= hasPos
	}
	b = binary.AppendUvarint(b, flags)
	b = w.appendName(b, k.Table)
	b = appendBytes(b, k.Old)
	b = appendBytes(b, k.New)
	b = appendString(b, k.OldText)
	b = appendString(b, k.NewText)
	b = appendPart(b, &k.First)
	b = binary.AppendUvarint(b, uint64(k.NewColumns))
	b = binary.AppendUvarint(b, uint64(len(k.NewParts)))
	for i := range k.NewParts {
		b = appendPart(b, &k.NewParts[i])
	}
	b = binary.AppendUvarint(b, uint64(k.Columns))
	if k.Time != nil {
		b = binary.AppendVarint(b, k.Time.Unix())
		b = binary.AppendUvarint(b, uint64(k.Time.Nanosecond()))
		b = w.appendName(b, k.TimeField)
	}
	if k.Pos != 0 {
		b = binary.AppendVarint(b, k.Pos)
	}
	b = binary.AppendUvarint(b, uint64(k.Bytes))
	w.rec = b
	var n [binary.MaxVarintLen64]byte
	if _, err := w.buf.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))]); err != nil {
		return err
	}
	_, err := w.buf.Write(b)
	return err
}

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

// list lists the part files of dir, sorted by name. Every file named
// part-* is listed, so that one of another format is an error, not left
// out.
func list(ctx context.Context, dir string) (filesystem.Interface, []string, error) {
	glob := Join(dir, "part-*")
	fs, err := filesystem.New(ctx, glob)
	if err != nil {
		return nil, nil, err
	}
	names, err := fs.List(ctx, glob)
	if err != nil {
		fs.Close()
		return nil, nil, fmt.Errorf("plan keys: listing %s: %w", glob, err)
	}
	sort.Strings(names)
	return fs, names, nil
}

// Read reads every part file in dir. The streams come in the order of
// their file names (random names: no stream is favoured).
func Read(ctx context.Context, dir string) ([]Stream, error) {
	fs, names, err := list(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer fs.Close()
	var out []Stream
	for _, name := range names {
		var s Stream
		err := scan(ctx, fs, name, func(_ int, r *rawKey) error {
			s = append(s, r.key())
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(s) > 0 {
			out = append(out, s)
		}
	}
	return out, nil
}

// reader reads one part file's records.
type reader struct {
	name string
	r    *bufio.Reader
	buf  []byte
	n    int // records read
}

func open(ctx context.Context, fs filesystem.Interface, name string) (*reader, io.Closer, error) {
	rc, err := fs.OpenRead(ctx, name)
	if err != nil {
		return nil, nil, fmt.Errorf("plan keys: opening %s: %w", name, err)
	}
	r := &reader{name: name, r: bufio.NewReaderSize(rc, 1<<20)}
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(r.r, head); err != nil || string(head) != magic {
		rc.Close()
		return nil, nil, fmt.Errorf("plan keys: %s is not a key file of this version of rekey (a file of an older one, or not a key file)", name)
	}
	if v, err := binary.ReadUvarint(r.r); err != nil || v != version {
		rc.Close()
		return nil, nil, fmt.Errorf("plan keys: %s is a key file of format version %d; this rekey reads version %d", name, v, version)
	}
	return r, rc, nil
}

// next reads the next record's bytes; io.EOF after the last.
func (r *reader) next() ([]byte, error) {
	size, err := binary.ReadUvarint(r.r)
	if err == io.EOF {
		return nil, io.EOF
	}
	r.n++
	if err == nil && size > math.MaxInt32 {
		err = fmt.Errorf("a key of %d bytes", size)
	}
	if err == nil {
		if cap(r.buf) < int(size) {
			r.buf = make([]byte, size)
		}
		r.buf = r.buf[:size]
		_, err = io.ReadFull(r.r, r.buf)
	}
	if err != nil {
		return nil, r.fail(err)
	}
	return r.buf, nil
}

// skip passes over the next record.
func (r *reader) skip() error {
	size, err := binary.ReadUvarint(r.r)
	r.n++
	if err == nil {
		_, err = r.r.Discard(int(min(size, math.MaxInt32)))
	}
	if err != nil {
		return r.fail(err)
	}
	return nil
}

func (r *reader) fail(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("plan keys: %s, key %d: %w", r.name, r.n, err)
}

// scan decodes every record of the part file name, in order, calling
// visit with its number (from 0); r's fields point into a buffer reused
// for the next record.
func scan(ctx context.Context, fs filesystem.Interface, name string, visit func(int, *rawKey) error) error {
	r, c, err := open(ctx, fs, name)
	if err != nil {
		return err
	}
	defer c.Close()
	var names []string
	var raw rawKey
	for i := 0; ; i++ {
		b, err := r.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := raw.decode(b, &names); err != nil {
			return r.fail(err)
		}
		if err := visit(i, &raw); err != nil {
			return r.fail(err)
		}
	}
}

// rawPart is a decoded part; its byte slices point into the record.
type rawPart struct {
	kind      string
	datastore bool
	i         int64
	text      []byte
	bytes     []byte
}

func (p *rawPart) part() Part {
	out := Part{Kind: p.kind, Int: p.i, Text: string(p.text), Datastore: p.datastore}
	if len(p.bytes) > 0 {
		out.Bytes = append([]byte(nil), p.bytes...)
	}
	return out
}

// rawKey is a decoded record; its byte slices point into the record.
type rawKey struct {
	batch            uint64
	table, timeField string
	old, new         []byte
	oldText, newText []byte
	first            rawPart
	newColumns       uint64
	newParts         []rawPart
	columns          uint64
	time             bool
	sec              int64
	nsec             uint64
	pos              int64
	bytes            uint64
}

func (r *rawKey) key() Key {
	k := Key{Table: r.table, Old: clone(r.old), New: clone(r.new), OldText: string(r.oldText), NewText: string(r.newText),
		First: r.first.part(), NewColumns: int(r.newColumns), Columns: int(r.columns), Pos: r.pos, Bytes: int(r.bytes), Batch: int(r.batch)}
	for i := range r.newParts {
		k.NewParts = append(k.NewParts, r.newParts[i].part())
	}
	if r.time {
		t := time.Unix(r.sec, int64(r.nsec)).UTC()
		k.Time, k.TimeField = &t, r.timeField
	}
	return k
}

func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

var errShort = errors.New("record cut short")

// dec reads a record's fields in turn; the first error sticks.
type dec struct {
	b   []byte
	err error
}

func (d *dec) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errShort
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// name reads a name (see the package doc), adding a new one to names.
func (d *dec) name(names *[]string) string {
	k := d.uvarint()
	if d.err != nil {
		return ""
	}
	if k == 0 {
		s := string(d.bytes())
		*names = append(*names, s)
		return s
	}
	if k > uint64(len(*names)) {
		d.err = fmt.Errorf("name %d of %d", k, len(*names))
		return ""
	}
	return (*names)[k-1]
}

func (d *dec) part(p *rawPart) {
	code := d.uvarint()
	switch {
	case code < uint64(len(kinds)):
		p.kind = kinds[code]
	case code == otherKind:
		p.kind = string(d.bytes())
	default:
		if d.err == nil {
			d.err = fmt.Errorf("unknown kind %d", code)
		}
	}
	p.datastore = d.uvarint()&1 != 0
	p.i = d.varint()
	p.text = d.bytes()
	p.bytes = d.bytes()
}

func (r *rawKey) decode(b []byte, names *[]string) error {
	d := dec{b: b}
	r.batch = d.uvarint()
	flags := d.uvarint()
	r.table = d.name(names)
	r.old, r.new = d.bytes(), d.bytes()
	r.oldText, r.newText = d.bytes(), d.bytes()
	d.part(&r.first)
	r.newColumns = d.uvarint()
	np := d.uvarint()
	if np > uint64(len(d.b)) {
		return errShort
	}
	r.newParts = r.newParts[:0]
	for range np {
		var p rawPart
		d.part(&p)
		r.newParts = append(r.newParts, p)
	}
	r.columns = d.uvarint()
	r.time, r.sec, r.nsec, r.timeField, r.pos = flags&hasTime != 0, 0, 0, "", 0
	if r.time {
		r.sec, r.nsec = d.varint(), d.uvarint()
		r.timeField = d.name(names)
	}
	if flags&hasPos != 0 {
		r.pos = d.varint()
	}
	r.bytes = d.uvarint()
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes after the key's fields", len(d.b))
	}
	return d.err
}

// decodeTexts reads a record's OldText and NewText only.
func decodeTexts(b []byte) (oldText, newText []byte, err error) {
	d := dec{b: b}
	d.uvarint() // batch
	d.uvarint() // flags
	if d.uvarint() == 0 {
		d.bytes() // the table's name, first written
	}
	d.bytes() // old
	d.bytes() // new
	oldText, newText = d.bytes(), d.bytes()
	return oldText, newText, d.err
}

// Interleave merges streams into the order a target sees them when each
// stream is one worker committing its batches in turn, all workers side
// by side: the first batch of every stream, then the second of every
// stream, and so on.
func Interleave(streams []Stream) []Key {
	runs := make([][]int, len(streams))
	n := 0
	for i, s := range streams {
		runs[i] = batchRuns(len(s), func(j int) int { return s[j].Batch })
		n += len(s)
	}
	out := make([]Key, 0, n)
	interleave(runs, func(s, j int) { out = append(out, streams[s][j]) })
	return out
}

// batchRuns are the lengths of the runs of equal batch numbers of a
// stream of n keys.
func batchRuns(n int, batch func(int) int) []int {
	var runs []int
	for start := 0; start < n; {
		end := start + 1
		for end < n && batch(end) == batch(start) {
			end++
		}
		runs = append(runs, end-start)
		start = end
	}
	return runs
}

// interleave visits the keys of streams of batches of the lengths runs
// in the order of Interleave: each key's stream and index in it.
func interleave(runs [][]int, visit func(stream, index int)) {
	next := make([]int, len(runs)) // index of the stream's next batch's first key
	for round, more := 0, true; more; round++ {
		more = false
		for s, r := range runs {
			if round < len(r) {
				for j := range r[round] {
					visit(s, next[s]+j)
				}
				next[s] += r[round]
				more = more || round+1 < len(r)
			}
		}
	}
}
