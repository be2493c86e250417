package source

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// CSV rows are read line-aware, not with encoding/csv's Reader: a quote
// that is never closed, or closed in the wrong place, made that reader
// take the lines after it into a quoted field until the next quote (or
// the end of the file), so one broken row swallowed the valid rows after
// it into a dead letter that held none of them (and no raw line).
//
// How a row resynchronises: a quoted field may still span lines (Excel
// writes line breaks in cells so). A row is the lines up to the first
// one that ends outside a quoted field (quoteOpen); it is parsed as
// encoding/csv would (parseCSVRow: RFC 4180, "" in a quoted field, no
// lazy quotes). If a row of one line cannot be read, that line is dead.
// If a row spanning lines cannot be read (a parse error, the wrong
// number of fields, a quote not closed before the end of the file or
// within maxLine bytes), it is taken to be a broken quote on its first
// line: that line alone is dead-lettered, with its bytes, and the lines
// after it are read again as rows of their own. So a broken row costs
// itself and no other: a valid row after it is read and written. The
// price: the lines of a genuinely multi-line row that is broken further
// on are read as rows too (most are dead-lettered as broken or short; one
// that happens to read as a whole row is one). Each line is scanned a
// bounded number of times: from a failed row's first line, scanning stops
// at the first quote that closes its field, and every line before that
// one holds only doubled quotes, which close within their line when
// read again.

// csvRows reads a CSV file's rows.
type csvRows struct {
	br    *bufio.Reader
	sep   []byte    // the field delimiter, UTF-8
	ahead []csvLine // lines read and not yet taken
	line  int       // the number of the next line to take (1-based)
	err   error     // what ended the reading of lines (io.EOF), once met
	row   []string  // reused for the fields
	// fields is the header's number of fields, once read: a row spanning
	// lines with another number is refused as broken (see next).
	fields int
}

// csvLine is one physical line, without its line end.
type csvLine struct {
	b    []byte
	long bool // longer than maxLine: b is nil
}

func newCSVRows(r io.Reader, comma rune) (*csvRows, error) {
	if comma == '"' || comma == '\r' || comma == '\n' || !utf8.ValidRune(comma) || comma == utf8.RuneError {
		return nil, fmt.Errorf("CSV delimiter %q cannot separate fields", comma)
	}
	return &csvRows{br: bufio.NewReaderSize(r, 1<<20), sep: utf8.AppendRune(nil, comma), line: 1}, nil
}

// more reads one more line into ahead; io.EOF at the end of the file.
func (c *csvRows) more() error {
	if c.err != nil {
		return c.err
	}
	b, err := readRawLine(c.br)
	switch {
	case errors.Is(err, errLineTooLong):
		c.ahead = append(c.ahead, csvLine{long: true})
		return nil
	case err == io.EOF && len(b) == 0:
		c.err = err
		return err
	case err != nil && err != io.EOF:
		c.err = err
		return err
	}
	c.err = err // io.EOF after a last line without a line end, or nil
	c.ahead = append(c.ahead, csvLine{b: append([]byte(nil), b...)})
	return nil
}

// take drops the first n lines of ahead.
func (c *csvRows) take(n int) {
	c.line += n
	c.ahead = c.ahead[:copy(c.ahead, c.ahead[n:])]
}

// next returns the next row: its fields (reused by the next call), or,
// if it cannot be read, the bytes to dead-letter and why (bad); line is
// the number of its first line. Blank lines between rows are skipped.
// err is io.EOF at the end, or what stopped the reading.
func (c *csvRows) next() (row []string, line int, raw []byte, bad, err error) {
	for {
		if len(c.ahead) == 0 {
			if err := c.more(); err != nil {
				return nil, c.line, nil, nil, err
			}
		}
		if l := c.ahead[0]; l.long || len(l.b) > 0 {
			break
		}
		c.take(1)
	}
	line = c.line
	first := c.ahead[0]
	if first.long {
		c.take(1)
		return nil, line, nil, errLineTooLong, nil
	}
	// The lines of the row: up to one that ends outside a quoted field.
	span, size, quoted, why := 0, 0, false, error(nil)
	for {
		if span == len(c.ahead) {
			if err := c.more(); err == io.EOF {
				why = errors.New("it is not closed before the end of the file")
				break
			} else if err != nil {
				return nil, line, nil, nil, err
			}
		}
		l := c.ahead[span]
		if l.long || span > 0 && size+len(l.b) > maxLine {
			why = fmt.Errorf("it is not closed within %d bytes", maxLine)
			break
		}
		quoted = quoteOpen(l.b, quoted, c.sep)
		size += len(l.b) + 1
		span++
		if !quoted {
			break
		}
	}
	text := first.b
	if why == nil && span > 1 {
		text = c.joined(span)
	}
	if why == nil {
		c.row, why = parseCSVRow(text, c.sep, line, c.row[:0])
	}
	if why == nil && span > 1 && c.fields > 0 && len(c.row) != c.fields {
		why = fmt.Errorf("the row would have %d fields, the header has %d", len(c.row), c.fields)
	}
	if why != nil && span > 1 || why != nil && quoted {
		// A quoted field opened on the first line that does not close
		// well: that line alone is dead, the next ones are read again.
		c.take(1)
		return nil, line, first.b, fmt.Errorf("a quoted field opened on this line does not close well (%w): this line is dead-lettered alone, the next lines are read as rows", why), nil
	}
	c.take(span)
	if why != nil {
		return nil, line, text, why, nil
	}
	return c.row, line, text, nil, nil
}

// joined returns the first n lines of ahead joined by LF (a line break
// in a quoted field is a LF, as encoding/csv reads a CRLF in one).
func (c *csvRows) joined(n int) []byte {
	var b []byte
	for i := range n {
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, c.ahead[i].b...)
	}
	return b
}

// quoteOpen reports whether a row is inside a quoted field at the end of
// line, which it starts inside one if quoted: a field that starts with a
// quote is quoted until a quote that is not doubled. A quote elsewhere
// is no concern of this scan (parseCSVRow refuses it).
func quoteOpen(line []byte, quoted bool, sep []byte) bool {
	i, start := 0, !quoted
	for i < len(line) {
		if quoted {
			k := bytes.IndexByte(line[i:], '"')
			if k < 0 {
				return true
			}
			i += k + 1
			if i < len(line) && line[i] == '"' {
				i++
				continue
			}
			quoted, start = false, false
			continue
		}
		if start && line[i] == '"' {
			quoted, start = true, false
			i++
			continue
		}
		k := bytes.Index(line[i:], sep)
		if k < 0 {
			return false
		}
		i += k + len(sep)
		start = true
	}
	return quoted
}

// parseCSVRow parses the text of one row (its lines joined by LF) into
// row as encoding/csv does without LazyQuotes: a quote in an unquoted
// field, or a quoted field's closing quote followed by anything but the
// delimiter or the end, is an error (a *csv.ParseError; line is the
// row's first line in the file).
func parseCSVRow(text, sep []byte, line int, row []string) ([]string, error) {
	fail := func(at int, err error) error {
		lf := bytes.Count(text[:at], []byte{'\n'})
		col := at - (bytes.LastIndexByte(text[:at], '\n') + 1) + 1
		return &csv.ParseError{StartLine: line, Line: line + lf, Column: col, Err: err}
	}
	var field []byte
	for i := 0; ; {
		if i < len(text) && text[i] == '"' {
			field = field[:0]
			j := i + 1
			for {
				k := bytes.IndexByte(text[j:], '"')
				if k < 0 {
					return row, fail(len(text), csv.ErrQuote)
				}
				field = append(field, text[j:j+k]...)
				j += k + 1
				if j < len(text) && text[j] == '"' {
					field = append(field, '"')
					j++
					continue
				}
				break
			}
			row = append(row, string(field))
			switch {
			case j == len(text):
				return row, nil
			case bytes.HasPrefix(text[j:], sep):
				i = j + len(sep)
			default:
				return row, fail(j, csv.ErrQuote)
			}
			continue
		}
		end, last := len(text), true
		if k := bytes.Index(text[i:], sep); k >= 0 {
			end, last = i+k, false
		}
		if q := bytes.IndexByte(text[i:end], '"'); q >= 0 {
			return row, fail(i+q, csv.ErrBareQuote)
		}
		row = append(row, string(text[i:end]))
		if last {
			return row, nil
		}
		i = end + len(sep)
	}
}
