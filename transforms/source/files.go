package source

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

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
	// is NULL) or "avro" (as Spanner's export writes it, see readAvro).
	Format string `json:"format"`
	// Delimiter separates CSV fields (default ",").
	Delimiter string `json:"delimiter"`
	// Table names the records' table when a line does not ("__table__").
	Table string `json:"table"`
	// SplitBytes is the size of the byte ranges JSON Lines files are read
	// in, in parallel (0: DefaultSplitBytes).
	SplitBytes int64 `json:"split_bytes,omitempty"`
}

func init() {
	register.DoFn3x1[context.Context, []byte, func(int, string), error](&listFilesFn{})
	register.Emitter2[int, string]()
	register.DoFn5x1[context.Context, int, func(*string) bool, func([]byte), func(string), error](&readFilesFn{})
	register.Iter1[string]()
	register.Emitter1[[]byte]()
	register.Emitter1[string]()
}

// Files reads JSON Lines or CSV files into record batches. Each file is
// read by one worker; files are spread over workers by a GroupByKey. Lines
// that cannot be parsed become dead letters ("read", file:line, the line).
func Files(s beam.Scope, cfg FilesConfig) (batches, deadLetters beam.PCollection) {
	s = s.Scope("source.Files")
	names := beam.ParDo(s, &listFilesFn{Path: cfg.Path, Format: cfg.Format, SplitBytes: cfg.SplitBytes}, beam.Impulse(s))
	grouped := beam.GroupByKey(s, names)
	return beam.ParDo2(s, &readFilesFn{Cfg: cfg}, grouped)
}

type listFilesFn struct {
	Path   string `json:"path"`
	Format string `json:"format"`
	// SplitBytes cuts JSON Lines files into byte ranges of about this size,
	// read in parallel (0: DefaultSplitBytes).
	SplitBytes int64 `json:"split_bytes"`
}

// DefaultSplitBytes is the size of the byte ranges JSON Lines files are cut
// into for parallel reading.
const DefaultSplitBytes = 16 << 20

// fileRange is a part of a file: the lines that start at byte offsets in
// [Start, End); End < 0 means the whole file.
type fileRange struct {
	Name       string
	Start, End int64
}

func (r fileRange) encode() string { return fmt.Sprintf("%d\x00%d\x00%s", r.Start, r.End, r.Name) }

func decodeRange(s string) (fileRange, error) {
	var r fileRange
	parts := strings.SplitN(s, "\x00", 3)
	if len(parts) != 3 {
		return r, fmt.Errorf("bad file range %q", s)
	}
	if _, err := fmt.Sscan(parts[0], &r.Start); err != nil {
		return r, err
	}
	if _, err := fmt.Sscan(parts[1], &r.End); err != nil {
		return r, err
	}
	r.Name = parts[2]
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

func (f *listFilesFn) ProcessElement(ctx context.Context, _ []byte, emit func(int, string)) error {
	fs, err := filesystem.New(ctx, f.Path)
	if err != nil {
		return err
	}
	defer fs.Close()
	files, err := fs.List(ctx, f.Path)
	if err != nil {
		return fmt.Errorf("listing %s: %w", f.Path, err)
	}
	if len(files) == 0 {
		return fmt.Errorf("no file matches %s", f.Path)
	}
	step := f.SplitBytes
	if step == 0 {
		step = DefaultSplitBytes
	}
	n := 0
	for _, name := range files {
		ranges := []fileRange{{Name: name, End: -1}}
		if strings.EqualFold(f.Format, "jsonl") || f.Format == "" {
			size, err := fs.Size(ctx, name)
			if err != nil {
				return fmt.Errorf("size of %s: %w", name, err)
			}
			ranges = splitFile(name, size, step)
		}
		for _, r := range ranges {
			emit(n, r.encode())
			n++
		}
	}
	return nil
}

type readFilesFn struct {
	Cfg FilesConfig `json:"cfg"`
}

func (f *readFilesFn) ProcessElement(ctx context.Context, _ int, names func(*string) bool, emit func([]byte), dead func(string)) error {
	var text string
	for names(&text) {
		r, err := decodeRange(text)
		if err != nil {
			return err
		}
		if err := f.readFile(ctx, r, emit, dead); err != nil {
			return err
		}
	}
	return nil
}

func (f *readFilesFn) readFile(ctx context.Context, fr fileRange, emit func([]byte), dead func(string)) error {
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
	ok := func(rec record.Record) {
		if rec.Table == "" {
			rec.Table = f.Cfg.Table
		}
		transforms.CountRead(ctx, 1)
		b.add(rec)
	}
	bad := func(line int, raw string, err error) {
		transforms.CountDeadLettered(ctx, 1)
		where := fmt.Sprintf("%s:%d", name, line)
		if fr.Start > 0 || fr.End >= 0 {
			where = fmt.Sprintf("%s@%d (line %d of the range from byte %d)", name, fr.Start, line, fr.Start)
		}
		dead(record.RawDeadLetter(record.StageRead, where, raw, err))
	}
	switch strings.ToLower(f.Cfg.Format) {
	case "csv":
		err = readCSV(rc, f.Cfg.Delimiter, ok, bad)
	case "avro":
		err = readAvro(rc, name, ok, bad)
	default:
		var r io.Reader = rc
		if r, err = seekRange(rc, fr); err == nil {
			err = readJSONL(r, ok, bad)
		}
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	b.flush()
	return nil
}

// batcher groups records into encoded batches of transforms.BatchSize.
type batcher struct {
	emit func([]byte)
	recs []record.Record
}

func (b *batcher) add(r record.Record) {
	b.recs = append(b.recs, r)
	if len(b.recs) >= transforms.BatchSize {
		b.flush()
	}
}

func (b *batcher) flush() {
	if len(b.recs) > 0 {
		b.emit(record.EncodeBatch(b.recs))
		b.recs = b.recs[:0]
	}
}

// seekRange positions r at the first line that starts at or after
// fr.Start and returns a reader that ends after the last line starting
// before fr.End.
func seekRange(r io.Reader, fr fileRange) (io.Reader, error) {
	if fr.Start == 0 && fr.End < 0 {
		return r, nil
	}
	br := bufio.NewReaderSize(r, 1<<20)
	pos := int64(0)
	if fr.Start > 0 {
		// Skip to byte Start-1, then past the end of the line holding it:
		// a line starting exactly at Start belongs to this range.
		if s, ok := r.(io.Seeker); ok {
			if _, err := s.Seek(fr.Start-1, io.SeekStart); err != nil {
				return nil, err
			}
			br.Reset(r)
		} else if _, err := io.CopyN(io.Discard, br, fr.Start-1); err != nil {
			return nil, err
		}
		pos = fr.Start - 1
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

func readJSONL(r io.Reader, ok func(record.Record), bad func(int, string, error)) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for n := 1; ; n++ {
		line, err := readLine(br)
		if len(line) > 0 {
			if rec, perr := record.ParseJSON(line); perr != nil {
				bad(n, string(line), perr)
			} else {
				ok(rec)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if errors.Is(err, errLineTooLong) {
				bad(n, "", err)
				continue
			}
			return err
		}
	}
}

var errLineTooLong = fmt.Errorf("line longer than %d bytes", maxLine)

// readLine returns the next line without its newline ("" for blank lines).
func readLine(br *bufio.Reader) ([]byte, error) {
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
		chunk = trimNewline(chunk)
		if len(strings.TrimSpace(string(chunk))) == 0 {
			chunk = nil
		}
		return chunk, err
	}
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func readCSV(r io.Reader, delim string, ok func(record.Record), bad func(int, string, error)) error {
	cr := csv.NewReader(bufio.NewReaderSize(r, 1<<20))
	if delim != "" {
		cr.Comma = []rune(delim)[0]
	}
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return fmt.Errorf("CSV header: %w", err)
	}
	header = append([]string(nil), header...)
	for {
		row, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				bad(pe.Line, "", err)
				continue
			}
			return err
		}
		if len(row) != len(header) {
			bad(line, strings.Join(row, string(cr.Comma)), fmt.Errorf("%d fields, the header has %d", len(row), len(header)))
			continue
		}
		rec := record.Record{Fields: make([]record.Field, len(row))}
		for i, v := range row {
			rec.Fields[i] = record.Field{Name: header[i], Value: record.String(v)}
			if v == "" {
				rec.Fields[i].Value = record.Value{}
			}
		}
		ok(rec)
	}
}
