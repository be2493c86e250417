package source

// Text files as people have them: written by spreadsheets and Windows
// tools, with a UTF-8 byte order mark at the start and CRLF line ends
// (both accepted: the mark is skipped at byte 0 of a file, a CR before a
// LF is no part of a line or a field); CSV headers that name a column
// twice or lack a key column (refused once, before any row is read,
// instead of dead-lettering every row); and dead letters that say which
// line of the file they are, even when the file is read in byte ranges
// (lineIndex).

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
)

// utf8BOM is the UTF-8 encoding of U+FEFF, which Excel ("CSV UTF-8"),
// Notepad and PowerShell put at the start of the files they write.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// errUTF16 refuses a file that starts with a UTF-16 byte order mark
// (Excel's "Unicode Text", PowerShell 5's default): its text is not UTF-8.
var errUTF16 = errors.New(`the file is UTF-16 (it starts with a UTF-16 byte order mark); rekey reads UTF-8: save it as UTF-8 (in Excel: "CSV UTF-8")`)

// skipBOM returns r, which must be at the start of a file, past the UTF-8
// byte order mark the file may start with, and how many bytes it skipped
// (0 or 3).
func skipBOM(r io.Reader) (io.Reader, int64, error) {
	var head [3]byte
	n, err := io.ReadFull(r, head[:])
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, 0, err
	}
	switch {
	case bytes.Equal(head[:n], utf8BOM):
		return r, int64(n), nil
	case n >= 2 && (head[0] == 0xFF && head[1] == 0xFE || head[0] == 0xFE && head[1] == 0xFF):
		return nil, 0, errUTF16
	}
	return io.MultiReader(bytes.NewReader(head[:n]), r), 0, nil
}

// skipTo moves r, at the start of a file, to byte off: by seeking if it
// can, else by reading up to there.
func skipTo(r io.Reader, off int64) error {
	if s, ok := r.(io.Seeker); ok {
		_, err := s.Seek(off, io.SeekStart)
		return err
	}
	_, err := io.CopyN(io.Discard, r, off)
	return err
}

// openCSV reads the header line of a CSV file, r at its start (past a
// UTF-8 byte order mark), and checks it (checkCSVHeader): the rows
// returned are at the first row, its fields separated by cfg.Delimiter. A
// nil header and no error: the file is empty. (A CR before a LF ends a
// line, in a quoted field too: the field holds the LF.)
func openCSV(r io.Reader, cfg FilesConfig) (*csvRows, []string, error) {
	r, _, err := skipBOM(r)
	if err != nil {
		return nil, nil, err
	}
	comma := ','
	if cfg.Delimiter != "" {
		comma = []rune(cfg.Delimiter)[0]
	}
	rows, err := newCSVRows(r, comma)
	if err != nil {
		return nil, nil, err
	}
	header, _, _, bad, err := rows.next()
	switch {
	case err == io.EOF:
		return rows, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("CSV header: %w", err)
	case bad != nil:
		return nil, nil, fmt.Errorf("CSV header: %w", bad)
	}
	header = append([]string(nil), header...)
	for _, name := range header {
		if !utf8.ValidString(name) {
			return nil, nil, fmt.Errorf("CSV header: column name %q is not valid UTF-8", name)
		}
	}
	rows.fields = len(header)
	return rows, header, checkCSVHeader(header, cfg)
}

// checkCSVHeader refuses a CSV header that names a column twice (names
// are compared without case, as a record's fields are looked up and as
// Spanner compares column names) or lacks one of cfg.Key's columns:
// every row would be dead-lettered.
func checkCSVHeader(header []string, cfg FilesConfig) error {
	quoted := func() string {
		const limit = 200
		h := strings.Join(header, cmp.Or(cfg.Delimiter, ","))
		if len(h) > limit {
			h = h[:limit] + "..."
		}
		return fmt.Sprintf("%q", h)
	}
	first := map[string]int{}
	for i, name := range header {
		k := strings.ToLower(name)
		if j, dup := first[k]; dup {
			same := fmt.Sprintf("%q appears twice", name)
			if header[j] != name {
				same = fmt.Sprintf("%q and %q name the same column (names are compared without case)", header[j], name)
			}
			return fmt.Errorf("CSV header %s: %s, as columns %d and %d; give every column its own name", quoted(), same, j+1, i+1)
		}
		first[k] = i
	}
	var missing []string
	for _, k := range cfg.Key {
		if _, ok := first[strings.ToLower(k)]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		columns := "column"
		if len(missing) > 1 {
			columns += "s"
		}
		return fmt.Errorf("CSV header %s has no key %s %s (source.key: %s)%s", quoted(), columns, strings.Join(missing, ", "), strings.Join(cfg.Key, ", "), delimiterHint(header, cfg.Delimiter))
	}
	return nil
}

// delimiterHint suggests source.delimiter for a header read as one column
// that another common delimiter would split ("" if none).
func delimiterHint(header []string, delim string) string {
	if len(header) != 1 {
		return ""
	}
	for _, d := range []string{";", "\t", "|"} {
		if d != cmp.Or(delim, ",") && strings.Contains(header[0], d) {
			return fmt.Sprintf("; the header reads as one column, which %q would split: is the file separated by it? (source.delimiter: %q)", d, d)
		}
	}
	return ""
}

// CheckFiles checks, before a pipeline reads cfg's files, what would
// otherwise fail it or dead-letter every record: that cfg.Path matches
// files, and, for CSV, that each file's header names every column once
// and holds the key columns cfg.Key. It reads the first line of each CSV
// file. The error names the file.
func CheckFiles(ctx context.Context, cfg FilesConfig) error {
	fs, files, err := listFiles(ctx, cfg.Path)
	if err != nil {
		return err
	}
	defer fs.Close()
	if !strings.EqualFold(cfg.Format, "csv") {
		return nil
	}
	for _, name := range files {
		if !rereadable(name) {
			// A named pipe (or another file that is not a regular one)
			// can be read once: the pipeline's read checks its header.
			continue
		}
		if err := checkCSVFile(ctx, fs, name, cfg); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func checkCSVFile(ctx context.Context, fs filesystem.Interface, name string, cfg FilesConfig) error {
	rc, err := fs.OpenRead(ctx, name)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, _, err = openCSV(rc, cfg)
	return err
}

// fileLine says where line n of the lines read from fr is: "file:line",
// counting the lines before fr (lineIndex) when fr starts after byte 0,
// at the first call. If they cannot be counted, it names the range.
func fileLine(ctx context.Context, fr fileRange) func(n int) string {
	before, counted := int64(0), fr.Start == 0
	var err error
	return func(n int) string {
		if !counted && err == nil {
			// The range's first line follows the first LF at or after
			// byte Start-1 (seekRange).
			before, err = lineCounts.before(ctx, fr.Name, fr.Start-1)
			before++
			counted = err == nil
		}
		if !counted {
			return fmt.Sprintf("%s: line %d of the range from byte %d (the lines before it could not be counted: %v)", fr.Name, n, fr.Start, err)
		}
		return fmt.Sprintf("%s:%d", fr.Name, before+int64(n))
	}
}

// lineCounts counts the lines before offsets of the files read, in this
// process.
var lineCounts = &lineIndex{files: map[fileID]*lineMarks{}}

// lineIndex counts the line ends in files before given offsets, for the
// line numbers of dead letters of byte ranges (a range's reader does not
// know how many lines precede it). Counting is done only when a range has
// a dead letter, and once per file and process: it notes the count at
// every markStep bytes it passes (and at the offsets asked for), and
// starts from the last note before the offset asked for. So however many
// ranges of a file have dead letters, in whatever order, the file is read
// about once, plus at most markStep bytes per range.
type lineIndex struct {
	mu    sync.Mutex
	files map[fileID]*lineMarks
}

// fileID tells apart the versions of a file a long-lived process may read.
type fileID struct {
	name     string
	size     int64
	modified int64 // Unix nanoseconds, where the filesystem says
}

// lineMarks are the counts of LFs before offsets of one file.
type lineMarks struct {
	mu sync.Mutex
	at map[int64]int64
}

// markStep is how far apart lineIndex notes its counts.
const markStep = 4 << 20

// before returns the number of LF bytes in [0, off) of the file name.
func (x *lineIndex) before(ctx context.Context, name string, off int64) (int64, error) {
	fs, err := filesystem.New(ctx, name)
	if err != nil {
		return 0, err
	}
	defer fs.Close()
	id := fileID{name: name}
	if id.size, err = fs.Size(ctx, name); err != nil {
		return 0, err
	}
	if lm, ok := fs.(filesystem.LastModifiedGetter); ok {
		if t, err := lm.LastModified(ctx, name); err == nil {
			id.modified = t.UnixNano()
		}
	}
	x.mu.Lock()
	m := x.files[id]
	if m == nil {
		m = &lineMarks{at: map[int64]int64{}}
		x.files[id] = m
	}
	x.mu.Unlock()
	// One count of a file at a time: a range waiting here then finds the
	// marks the other one left.
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.count(ctx, fs, name, off)
}

// count is before, with m's marks locked.
func (m *lineMarks) count(ctx context.Context, fs filesystem.Interface, name string, off int64) (int64, error) {
	if n, ok := m.at[off]; ok {
		return n, nil
	}
	pos, n := int64(0), int64(0)
	for k := off / markStep; k > 0; k-- {
		if c, ok := m.at[k*markStep]; ok {
			pos, n = k*markStep, c
			break
		}
	}
	rc, err := fs.OpenRead(ctx, name)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	if err := skipTo(rc, pos); err != nil {
		return 0, err
	}
	c := &lfCounter{}
	for pos < off {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		next := min((pos/markStep+1)*markStep, off)
		if _, err := io.CopyN(c, rc, next-pos); err != nil {
			return 0, err
		}
		pos = next
		m.at[pos] = n + c.n
	}
	return n + c.n, nil
}

// lfCounter counts the LF bytes written to it.
type lfCounter struct{ n int64 }

func (c *lfCounter) Write(p []byte) (int, error) {
	c.n += int64(bytes.Count(p, []byte{'\n'}))
	return len(p), nil
}

// rereadable reports whether the file can be read before the pipeline
// reads it: a gs:// object or a regular local file; not a named pipe,
// whose data a first read would consume.
func rereadable(name string) bool {
	if strings.Contains(name, "://") {
		return true
	}
	st, err := os.Stat(name)
	return err != nil || st.Mode().IsRegular()
}
