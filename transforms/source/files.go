package source

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"   // gs:// paths
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // local paths
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms"
)

// FilesConfig configures a file source.
type FilesConfig struct {
	// Path is a file or a glob, local or gs://.
	Path string `json:"path"`
	// Format is "jsonl" (the record JSON Lines format, see record.ParseJSON),
	// "csv" (a header line of column names; every field is a string,
	// converted to the target column's type when written; an empty field
	// is NULL), "avro" (as Spanner's export writes it, see readAvro) or
	// EntityJSON (Datastore entities as Google's templates write them).
	Format string `json:"format"`
	// Delimiter separates CSV fields (default ",").
	Delimiter string `json:"delimiter"`
	// Key names the key columns of CSV rows: a CSV header without one of
	// them is refused (see CheckFiles).
	Key []string `json:"key,omitempty"`
	// Table names the records' table when a line does not ("__table__").
	Table string `json:"table"`
	// Project is the project the keys of an EntityJSON file must be in
	// (empty: any, one per entity).
	Project string `json:"project,omitempty"`
	// SplitBytes is the size of the byte ranges JSON Lines files are read
	// in, in parallel (0: DefaultSplitBytes).
	SplitBytes int64 `json:"split_bytes,omitempty"`
	// Interleave, if positive, reads JSON Lines files in at least
	// InterleavedRanges byte ranges at once, in rounds of about Interleave
	// records from all of them together (see Files).
	Interleave int `json:"interleave,omitempty"`
	// Positions gives every record where it was read, in PosField, for
	// `rekey plan`'s read-order analysis. Not with Interleave.
	Positions bool `json:"positions,omitempty"`
	// SpareFields is room for more fields that each JSON Lines record
	// gets beyond its own (the fields the rewrite adds, which it then
	// adds in place: transforms.RewriteOwning), sized from the record
	// before it in the file.
	SpareFields int `json:"spare_fields,omitempty"`
}

// PosField is the field FilesConfig.Positions adds: the index of the
// record's file among the files the path matches (ListFiles' order),
// shifted left by PosFileShift, plus 1 + the record's byte range start +
// its number within the range (the ranges are 16 MB and a record takes at
// least 2 bytes, so the positions of one file grow with the line order,
// across ranges too; a file must be under 1 TiB). The file is an index,
// not its name: a name on every record cost about 12 bytes of peak memory
// a record per character of the path in `rekey plan`.
const (
	PosField     = "__rekey_pos__"
	PosFileShift = 40
)

// PosFile is the index of the file a PosField value was read from.
func PosFile(pos int64) int { return int(pos >> PosFileShift) }

// ListFiles lists the files path (a file or a glob) matches, in the
// order the files source reads and numbers them.
func ListFiles(ctx context.Context, path string) ([]string, error) {
	fs, files, err := listFiles(ctx, path)
	if err != nil {
		return nil, err
	}
	fs.Close()
	return files, nil
}

func init() {
	register.DoFn3x1[context.Context, []byte, func(int, string), error](&listFilesFn{})
	register.Emitter2[int, string]()
	register.DoFn5x1[context.Context, int, func(*string) bool, func(record.Batch), func(string), error](&readFilesFn{})
	register.Iter1[string]()
	register.Emitter1[string]()
}

// Files reads JSON Lines, CSV or Avro files into record batches. Each
// file, or byte range of a JSON Lines file, is read by one worker; they
// are spread over workers by a GroupByKey. Lines that cannot be parsed
// become dead letters ("read", file:line, the line).
//
// With cfg.Interleave set, JSON Lines files are cut into at least
// InterleavedRanges ranges, and each worker reads its group of up to
// InterleavedRanges of them at once, in rounds: a round takes about
// cfg.Interleave records in all, the same share of every range, visiting
// the ranges in an order spread over the input (visitOrder), each range
// from a point inside it to its end and then from its start (the points
// spread too). So every round is drawn from all over the input: when the
// input is sorted by key, from all over the key space, and a sorted
// buffer of a round cuts into key-local batches spread over it, as a
// shard of the global shuffle does (see transforms/writeplan, Local).
func Files(s beam.Scope, cfg FilesConfig) (batches, deadLetters beam.PCollection) {
	s = s.Scope("source.Files")
	names := beam.ParDo(s, &listFilesFn{Path: cfg.Path, Format: cfg.Format, SplitBytes: cfg.SplitBytes, Interleave: cfg.Interleave > 0}, beam.Impulse(s))
	grouped := beam.GroupByKey(s, names)
	return beam.ParDo2(s, &readFilesFn{Cfg: cfg}, grouped)
}

type listFilesFn struct {
	Path   string `json:"path"`
	Format string `json:"format"`
	// SplitBytes cuts JSON Lines files into byte ranges of about this size,
	// read in parallel (0: DefaultSplitBytes).
	SplitBytes int64 `json:"split_bytes"`
	// Interleave cuts JSON Lines files into at least InterleavedRanges
	// ranges in all and groups them for interleaved reading (see Files).
	Interleave bool `json:"interleave,omitempty"`
}

// DefaultSplitBytes is the size of the byte ranges JSON Lines files are cut
// into for parallel reading.
const DefaultSplitBytes = 16 << 20

// InterleavedRanges is how many byte ranges of JSON Lines files an
// interleaved read has at least (when the files' lines allow), and how
// many one worker reads at once: enough that a round's records, one piece
// of each range, are spread over the whole input finely. With 64, a
// 16th of the key space (bench/writeorder's ranges) holds four pieces,
// and a piece straddling its edge put 25% more writes on one side
// (busiest 1.23 in a simulation of a million sorted rows, against 1.10
// with 128).
const InterleavedRanges = 128

// fileRange is a part of a file: the lines that start at byte offsets in
// [Start, End); End < 0 means the whole file.
type fileRange struct {
	Name       string
	Start, End int64
	File       int // the file's index among the files listed
}

func (r fileRange) encode() string {
	return fmt.Sprintf("%d\x00%d\x00%d\x00%s", r.Start, r.End, r.File, r.Name)
}

func decodeRange(s string) (fileRange, error) {
	var r fileRange
	parts := strings.SplitN(s, "\x00", 4)
	if len(parts) != 4 {
		return r, fmt.Errorf("bad file range %q", s)
	}
	for i, p := range []*int64{&r.Start, &r.End} {
		if _, err := fmt.Sscan(parts[i], p); err != nil {
			return r, err
		}
	}
	if _, err := fmt.Sscan(parts[2], &r.File); err != nil {
		return r, err
	}
	r.Name = parts[3]
	return r, nil
}

// splitFile cuts a file of size bytes into ranges of about step bytes.
func splitFile(name string, size, step int64) []fileRange {
	if step <= 0 || size <= step {
		return []fileRange{{Name: name, Start: 0, End: -1}}
	}
	var out []fileRange
	for start := int64(0); start < size; start += step {
		end := start + step
		if end >= size {
			end = -1
		}
		out = append(out, fileRange{Name: name, Start: start, End: end})
	}
	return out
}

// listFiles opens the filesystem of path (a file or a glob) and lists
// the files it matches, refusing a path that matches none; the caller
// closes fs.
func listFiles(ctx context.Context, path string) (fs filesystem.Interface, files []string, err error) {
	fs, err = filesystem.New(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	files, err = fs.List(ctx, path)
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("no file matches %s", path)
	} else if err != nil {
		err = fmt.Errorf("listing %s: %w", path, err)
	}
	if err != nil {
		fs.Close()
		return nil, nil, err
	}
	return fs, files, nil
}

func (f *listFilesFn) ProcessElement(ctx context.Context, _ []byte, emit func(int, string)) error {
	fs, files, err := listFiles(ctx, f.Path)
	if err != nil {
		return err
	}
	defer fs.Close()
	step := f.SplitBytes
	if step == 0 {
		step = DefaultSplitBytes
	}
	jsonl := strings.EqualFold(f.Format, "jsonl") || f.Format == ""
	sizes := make([]int64, len(files))
	var total int64
	if jsonl {
		for i, name := range files {
			if sizes[i], err = fs.Size(ctx, name); err != nil {
				return fmt.Errorf("size of %s: %w", name, err)
			}
			total += sizes[i]
		}
	}
	var ranges []fileRange
	for i, name := range files {
		from := len(ranges)
		switch {
		case !jsonl:
			ranges = append(ranges, fileRange{Name: name, End: -1})
		case f.Interleave:
			ranges = append(ranges, interleavedRanges(name, sizes[i], total, step)...)
		default:
			ranges = append(ranges, splitFile(name, sizes[i], step)...)
		}
		for j := from; j < len(ranges); j++ {
			ranges[j].File = i
		}
	}
	// Each range is its own key, or with Interleave, groups of up to
	// InterleavedRanges ranges taken every so many, each spread over the
	// whole input.
	groups := len(ranges)
	if f.Interleave {
		groups = (len(ranges) + InterleavedRanges - 1) / InterleavedRanges
	}
	for i, r := range ranges {
		emit(i%groups, r.encode())
	}
	return nil
}

// interleavedRanges cuts a file of size bytes, out of total bytes of all
// files read, into its share of at least InterleavedRanges ranges in all,
// none larger than step. Unlike splitFile, the last range ends at size,
// so that every range has an end to turn around (see readInterleaved).
func interleavedRanges(name string, size, total, step int64) []fileRange {
	n := max((total+step-1)/step, InterleavedRanges)
	pieces := max(size*n/max(total, 1), (size+step-1)/step, 1)
	pieces = min(pieces, max(size, 1))
	out := make([]fileRange, 0, pieces)
	for i := range pieces {
		out = append(out, fileRange{Name: name, Start: size * i / pieces, End: size * (i + 1) / pieces})
	}
	return out
}

type readFilesFn struct {
	Cfg FilesConfig `json:"cfg"`
}

func (f *readFilesFn) ProcessElement(ctx context.Context, _ int, names func(*string) bool, emit func(record.Batch), dead func(string)) error {
	var text string
	var ranges []fileRange
	for names(&text) {
		r, err := decodeRange(text)
		if err != nil {
			return err
		}
		if f.Cfg.Interleave > 0 && r.End >= 0 {
			ranges = append(ranges, r)
			continue
		}
		if err := f.readFile(ctx, r, emit, dead); err != nil {
			return err
		}
	}
	if len(ranges) > 0 {
		return f.readInterleaved(ctx, ranges, emit, dead)
	}
	return nil
}

func (f *readFilesFn) readFile(ctx context.Context, fr fileRange, emit func(record.Batch), dead func(string)) error {
	name := fr.Name
	fs, err := filesystem.New(ctx, name)
	if err != nil {
		return err
	}
	defer fs.Close()
	rc, err := fs.OpenRead(ctx, name)
	if err != nil {
		return fmt.Errorf("opening %s: %w", name, err)
	}
	defer rc.Close()
	b := batcher{emit: emit}
	ok := f.ok(ctx, &b)
	if f.Cfg.Positions {
		ok = positioned(fr, ok)
	}
	bad := f.bad(ctx, fr, dead)
	switch strings.ToLower(f.Cfg.Format) {
	case "csv":
		err = readCSV(rc, f.Cfg, ok, bad)
	case "avro":
		err = readAvro(rc, name, ok, bad)
	case EntityJSON:
		err = readEntityJSON(rc, f.Cfg.Project, ok, bad)
	default:
		var r io.Reader = rc
		if r, err = seekRange(rc, fr); err == nil {
			err = readJSONL(r, f.Cfg.SpareFields, ok, bad)
		}
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	b.flush()
	return nil
}

// ok is what a read record goes to: counted, given the default table and
// added to b.
func (f *readFilesFn) ok(ctx context.Context, b *batcher) func(record.Record) {
	return func(rec record.Record) {
		if rec.Table == "" {
			rec.Table = f.Cfg.Table
		}
		transforms.CountRead(ctx, 1)
		b.add(rec)
	}
}

// positioned adds PosField to the records of fr before they go to ok.
func positioned(fr fileRange, ok func(record.Record)) func(record.Record) {
	n := int64(0)
	file := int64(fr.File) << PosFileShift
	return func(rec record.Record) {
		n++
		rec.Fields = append(rec.Fields, record.Field{Name: PosField, Value: record.Int(file | (fr.Start + n))})
		ok(rec)
	}
}

// bad is what a line of fr that cannot be read goes to: a dead letter
// naming where it is, file:line (fileLine), holding the line's bytes
// exactly (record.RawDeadLetter). It is counted read as well as
// dead_lettered: read counts every record taken from the input, so that
// read = written + dead_lettered (+ the counters of records left out on
// purpose, such as cohort_other).
func (f *readFilesFn) bad(ctx context.Context, fr fileRange, dead func(string)) func(int, string, error) {
	where := fileLine(ctx, fr)
	return func(line int, raw string, err error) {
		transforms.CountRead(ctx, 1)
		transforms.CountDeadLettered(ctx, 1)
		dead(record.RawDeadLetter(record.StageRead, where(line), raw, err))
	}
}

// readInterleaved reads JSON Lines ranges at once (see Files): in rounds,
// visiting the ranges in visitOrder, Cfg.Interleave/len(ranges) records
// from each in the first round and, in each later round, as large a
// share of each range as the first round read of all of them; range i is
// read from the line at or after the point frac(i·φ) of it to its end,
// then from its start to that point.
func (f *readFilesFn) readInterleaved(ctx context.Context, ranges []fileRange, emit func(record.Batch), dead func(string)) error {
	b := batcher{emit: emit}
	ok := f.ok(ctx, &b)
	// In input order (a GroupByKey keeps none), so that the visiting
	// order and the turning points are spread over the input.
	slices.SortFunc(ranges, func(a, b fileRange) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Start, b.Start))
	})
	cursors := make([]*cursor, len(ranges))
	for i, fr := range ranges {
		pivot := fr.Start + int64(goldenPoint(i)*float64(fr.End-fr.Start))
		c := &cursor{parts: []fileRange{{Name: fr.Name, Start: pivot, End: fr.End}}}
		if pivot > fr.Start {
			c.parts = append(c.parts, fileRange{Name: fr.Name, Start: fr.Start, End: pivot})
		}
		cursors[i] = c
	}
	defer func() {
		for _, c := range cursors {
			c.close()
		}
	}()
	var total int64
	for _, fr := range ranges {
		total += fr.End - fr.Start
	}
	order := visitOrder(len(ranges))
	// Shares of the ranges' bytes rather than numbers of records after
	// the first round, so that ranges holding more lines (shorter ones)
	// keep pace and all end together.
	chunk := max(f.Cfg.Interleave/len(ranges), 1)
	var share float64
	for round, open := 1, len(cursors); open > 0; round++ {
		if err := ctx.Err(); err != nil {
			return err // the job was cancelled
		}
		for _, i := range order {
			c := cursors[i]
			// The last rounds read all that is left.
			last := round > 1 && float64(round)*share >= 1
			target := int64(float64(round) * share * float64(ranges[i].End-ranges[i].Start))
			for got := 0; !c.done && (round == 1 && got < chunk || round > 1 && c.read < target || last); {
				more, err := c.next(ctx, func(rec record.Record) { got++; ok(rec) }, dead, f)
				if err != nil {
					return fmt.Errorf("reading %s: %w", c.parts[c.part].Name, err)
				}
				if !more {
					c.done = true
					open--
				}
			}
		}
		if round == 1 {
			var read int64
			for _, c := range cursors {
				read += c.read
			}
			share = float64(read) / float64(max(total, 1))
		}
	}
	b.flush()
	return nil
}

// visitOrder is the order an interleaved read visits n ranges in, each
// once per round: 0..n-1 in bit-reversed order (van der Corput's
// sequence), so that any run of visits is spread evenly over the ranges:
// every 2^k consecutive visits of a round, from a multiple of 2^k, take
// one range of every block of about n/2^k neighbouring ones.
func visitOrder(n int) []int {
	width := uint(bits.Len(uint(max(n-1, 0))))
	out := make([]int, 0, n)
	for k := range 1 << width {
		if r := int(bitsReverse(uint64(k), width)); r < n {
			out = append(out, r)
		}
	}
	return out
}

// bitsReverse reverses the low n bits of x.
func bitsReverse(x uint64, n uint) uint64 {
	if n == 0 {
		return 0
	}
	return bits.Reverse64(x) >> (64 - n)
}

// goldenPoint is frac(i·φ), φ = (√5-1)/2: points of [0, 1) spread evenly
// for any number of them.
func goldenPoint(i int) float64 {
	_, f := math.Modf(float64(i) * (math.Sqrt(5) - 1) / 2)
	return f
}

// cursor reads the lines of one range of an interleaved read, part after
// part, one file open at a time.
type cursor struct {
	parts []fileRange
	part  int
	done  bool
	read  int64 // bytes of lines read
	rc    io.ReadCloser
	fs    filesystem.Interface
	lines *lines
	bad   func(int, string, error)
}

// interleavedBuffer is the size of each of the two read buffers of a
// range of an interleaved read (InterleavedRanges of them at once).
const interleavedBuffer = 32 << 10

// next reads one line of the cursor's range (a record to ok or a dead
// letter to dead); false at the end of the range.
func (c *cursor) next(ctx context.Context, ok func(record.Record), dead func(string), f *readFilesFn) (bool, error) {
	for c.part < len(c.parts) {
		if c.lines == nil {
			fr := c.parts[c.part]
			fs, err := filesystem.New(ctx, fr.Name)
			if err != nil {
				return false, err
			}
			c.fs = fs
			if c.rc, err = fs.OpenRead(ctx, fr.Name); err != nil {
				return false, fmt.Errorf("opening %s: %w", fr.Name, err)
			}
			r, err := seekRangeSize(c.rc, fr, interleavedBuffer)
			if err != nil {
				return false, err
			}
			c.lines = &lines{br: bufio.NewReaderSize(r, interleavedBuffer), spare: f.Cfg.SpareFields}
			c.bad = f.bad(ctx, fr, dead)
		}
		before := c.lines.bytes
		more, err := c.lines.next(ok, c.bad)
		c.read += c.lines.bytes - before
		if err != nil || more {
			return more, err
		}
		c.close()
		c.part++
	}
	return false, nil
}

func (c *cursor) close() {
	if c.rc != nil {
		c.rc.Close()
		c.fs.Close()
	}
	c.rc, c.fs, c.lines = nil, nil, nil
}

// batcher groups records into batches of transforms.BatchSize, each in
// a slice of its own (an emitted batch is its consumers').
type batcher struct {
	emit func(record.Batch)
	recs []record.Record
}

func (b *batcher) add(r record.Record) {
	if b.recs == nil {
		b.recs = make([]record.Record, 0, transforms.BatchSize)
	}
	b.recs = append(b.recs, r)
	if len(b.recs) >= transforms.BatchSize {
		b.flush()
	}
}

func (b *batcher) flush() {
	if len(b.recs) > 0 {
		b.emit(record.Batch{Recs: b.recs})
		b.recs = nil
	}
}

// seekRange positions r, at the start of the file, at the first line
// that starts at or after fr.Start (past a UTF-8 byte order mark at the
// start of the file, skipBOM) and returns a reader that ends after the
// last line starting before fr.End.
func seekRange(r io.Reader, fr fileRange) (io.Reader, error) {
	return seekRangeSize(r, fr, 1<<20)
}

// seekRangeSize is seekRange with a read buffer of size bytes.
func seekRangeSize(r io.Reader, fr fileRange, size int) (io.Reader, error) {
	if fr.Start == 0 {
		// A byte order mark is part of the first line (which starts at
		// byte 0), not of its text.
		if fr.End >= 0 {
			r = &rangeReader{br: bufio.NewReaderSize(r, size), end: fr.End}
		}
		r, _, err := skipBOM(r)
		return r, err
	}
	// Skip to byte Start-1, then past the end of the line holding it: a
	// line starting exactly at Start belongs to this range.
	if err := skipTo(r, fr.Start-1); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(r, size)
	pos := fr.Start - 1
	skipped, err := br.ReadSlice('\n')
	for err == bufio.ErrBufferFull {
		pos += int64(len(skipped))
		skipped, err = br.ReadSlice('\n')
	}
	pos += int64(len(skipped))
	if err == io.EOF {
		return strings.NewReader(""), nil
	}
	if err != nil {
		return nil, err
	}
	if fr.End < 0 {
		return br, nil
	}
	return &rangeReader{br: br, pos: pos, end: fr.End}, nil
}

// rangeReader yields whole lines while they start before end.
type rangeReader struct {
	br   *bufio.Reader
	pos  int64
	end  int64
	line []byte
}

func (r *rangeReader) Read(p []byte) (int, error) {
	for len(r.line) == 0 {
		if r.pos >= r.end {
			return 0, io.EOF
		}
		line, err := r.br.ReadSlice('\n')
		for err == bufio.ErrBufferFull {
			line = append(append([]byte(nil), line...), nil...)
			more, err2 := r.br.ReadSlice('\n')
			line = append(line, more...)
			err = err2
		}
		r.pos += int64(len(line))
		r.line = line
		if len(line) == 0 && err != nil {
			return 0, err
		}
		if err != nil && err != io.EOF {
			return 0, err
		}
	}
	n := copy(p, r.line)
	r.line = r.line[n:]
	return n, nil
}

// maxLine bounds one JSON line (a Datastore entity is at most 1 MiB; its
// JSON with base64 bytes is larger).
const maxLine = 64 << 20

func readJSONL(r io.Reader, spare int, ok func(record.Record), bad func(int, string, error)) error {
	l := lines{br: bufio.NewReaderSize(r, 1<<20), spare: spare}
	for {
		more, err := l.next(ok, bad)
		if err != nil || !more {
			return err
		}
	}
}

// lines reads JSON Lines records a line at a time.
type lines struct {
	br    *bufio.Reader
	n     int   // lines read
	bytes int64 // about the bytes of the lines read (less \r)
	spare int   // room for more fields in each record (FilesConfig.SpareFields)
	last  int   // the fields of the last record parsed
}

// next reads the next line: a record to ok, a line that cannot be parsed
// to bad (blank lines to neither); false at the end.
func (l *lines) next(ok func(record.Record), bad func(int, string, error)) (bool, error) {
	l.n++
	line, err := readLine(l.br)
	l.bytes += int64(len(line)) + 1
	if len(line) > 0 {
		if rec, perr := record.ParseJSONCap(line, cmp.Or(l.last, 8)+l.spare); perr != nil {
			bad(l.n, string(line), perr)
		} else {
			l.last = len(rec.Fields)
			ok(rec)
		}
	}
	switch {
	case err == io.EOF:
		return false, nil
	case errors.Is(err, errLineTooLong):
		bad(l.n, "", err)
		return true, nil
	}
	return err == nil, err
}

var errLineTooLong = fmt.Errorf("line longer than %d bytes", maxLine)

// readLine returns the next line without its newline ("" for blank lines).
func readLine(br *bufio.Reader) ([]byte, error) {
	chunk, err := readRawLine(br)
	if len(bytes.TrimSpace(chunk)) == 0 {
		chunk = nil
	}
	return chunk, err
}

// readRawLine returns the next line without its newline, blank or not;
// errLineTooLong for one longer than maxLine, skipped. The line may be
// in br's buffer, valid until the next read.
func readRawLine(br *bufio.Reader) ([]byte, error) {
	var long []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, chunk...)
			if len(long) > maxLine {
				for err == bufio.ErrBufferFull {
					_, err = br.ReadSlice('\n')
				}
				return nil, errLineTooLong
			}
			continue
		}
		if long != nil {
			chunk = append(long, chunk...)
		}
		return trimNewline(chunk), err
	}
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// readCSV reads a CSV file, r at its start: a header line, checked
// before any row (openCSV), then the rows (csvRows: a row that cannot be
// read is dead-lettered with its bytes and its first line's number, and
// costs no other row). An empty file holds no records.
func readCSV(r io.Reader, cfg FilesConfig, ok func(record.Record), bad func(int, string, error)) error {
	rows, header, err := openCSV(r, cfg)
	if header == nil || err != nil {
		return err
	}
	for {
		row, line, raw, why, err := rows.next()
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		case why != nil:
			bad(line, string(raw), why)
			continue
		case len(row) != len(header):
			bad(line, string(raw), fmt.Errorf("%d fields, the header has %d", len(row), len(header)))
			continue
		}
		rec := record.Record{Fields: make([]record.Field, len(row))}
		for i, v := range row {
			if !utf8.ValidString(v) {
				// As record.ParseJSON refuses a JSON line: at read,
				// the line's bytes kept (record.RawDeadLetter).
				rec.Fields = nil
				bad(line, string(raw), fmt.Errorf("column %s: string is not valid UTF-8", header[i]))
				break
			}
			rec.Fields[i] = record.Field{Name: header[i], Value: record.String(v)}
			if v == "" {
				rec.Fields[i].Value = record.Value{}
			}
		}
		if rec.Fields != nil {
			ok(rec)
		}
	}
}
