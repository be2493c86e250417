package splits

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rekeyio/rekey/rewrite"
)

// The splits file of `gcloud spanner databases splits add --splits-file`
// holds one point a line and nothing else (no comments, no blank lines):
//
//	TABLE Singers ('c32ca57a-786c-2268-09d4-95182a9930be')
//	INDEX Indx_A ('2152120141932780000')
//
// gcloud (command_lib/spanner/split_file_parser.py) reads a line as
// TYPE NAME (VALUES), splits VALUES at commas with Python's csv reader
// (quoting off, backslash the escape character, spaces after a comma
// skipped) and turns each token into a key part: NULL is null; true and
// false (or TRUE, FALSE) are booleans; a token with no single quote is a
// float; any other is a string, with single quotes stripped from both
// ends. So:
//
//	STRING     'text', with \ written \\ and a comma \,
//	INT64      '123' (a string: the API takes INT64 key parts as strings)
//	NUMERIC    '99.99'
//	TIMESTAMP  '2020-06-18T17:24:53.5Z' (RFC 3339, UTC)
//	DATE       '2024-01-31'
//	BYTES      'base64' (the API's encoding of BYTES, sent as the string)
//	FLOAT64    1.287 (bare; NaN and infinities refused)
//	BOOL       true, false
//	NULL       NULL
//
// A string that starts or ends with a single quote, or holds a line break
// or a NUL, cannot be written (gcloud would strip the quote or split the
// line), nor one holding ") TABLE ", ") INDEX " or ") TableKey ", which
// gcloud's line patterns would take for a second point or a table key:
// Format refuses them, and such points can still be added with the API
// (Requests). gcloud's parser turns the token false into bool("false"),
// which Python takes as true: HasFalse finds the points that meet this.

// Write writes the points in the splits-file format, one a line.
func Write(w io.Writer, pts []Point) error {
	bw := bufio.NewWriter(w)
	for _, p := range pts {
		line, err := Format(p)
		if err != nil {
			return err
		}
		bw.WriteString(line)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// Format renders one point as a splits-file line (without the newline).
func Format(p Point) (string, error) {
	line := "TABLE " + p.Table
	if p.Index != "" {
		line = "INDEX " + p.Index
	}
	if len(p.Key) == 0 {
		return "", fmt.Errorf("splits: a point of %s has no key parts", object(p))
	}
	parts := make([]string, len(p.Key))
	for i, v := range p.Key {
		s, err := formatValue(v)
		if err != nil {
			return "", fmt.Errorf("splits: point %s of %s, key part %d: %w", rewrite.FormatKey(p.Key, false), object(p), i+1, err)
		}
		parts[i] = s
	}
	return line + " (" + strings.Join(parts, ", ") + ")", nil
}

// formatValue renders one key part.
func formatValue(v rewrite.Value) (string, error) {
	if v.Null {
		return "NULL", nil
	}
	switch v.Type {
	case rewrite.TypeString:
		return quoteString(v.Str)
	case rewrite.TypeInt64, rewrite.TypeNumeric, rewrite.TypeTimestamp, rewrite.TypeDate, rewrite.TypeBytes:
		s, err := apiString(v)
		return "'" + s + "'", err
	case rewrite.TypeFloat64:
		if err := finite(v.Float); err != nil {
			return "", err
		}
		return strconv.FormatFloat(v.Float, 'g', -1, 64), nil
	case rewrite.TypeBool:
		return strconv.FormatBool(v.Int != 0), nil
	}
	return "", fmt.Errorf("a %s value has no splits-file form", v.Type)
}

// quoteString quotes a STRING value, escaping backslashes and commas.
func quoteString(s string) (string, error) {
	if strings.HasPrefix(s, "'") || strings.HasSuffix(s, "'") {
		return "", fmt.Errorf("string %q starts or ends with a single quote, which gcloud strips; add this point with --apply instead", s)
	}
	if i := strings.IndexAny(s, lineBreaks); i >= 0 {
		return "", fmt.Errorf("string %q holds a line break or NUL (%U), which ends a splits-file line; add this point with --apply instead", s, []rune(s[i:])[0])
	}
	for _, bad := range []string{") TABLE ", ") INDEX ", ") TableKey "} {
		if strings.Contains(s, bad) {
			return "", fmt.Errorf("string %q holds %q, which gcloud reads as the start of another point; add this point with --apply instead", s, bad)
		}
	}
	r := strings.NewReplacer(`\`, `\\`, `,`, `\,`)
	return "'" + r.Replace(s) + "'", nil
}

// lineBreaks are the characters at which Python's str.splitlines, which
// gcloud reads the file with, ends a line, and NUL, which its csv reader
// refuses.
const lineBreaks = "\n\r\v\f\x1c\x1d\x1e\u0085\u2028\u2029\x00"

// apiString is the API's string form of an INT64, NUMERIC, TIMESTAMP,
// DATE or BYTES key part (and of a STRING's, itself).
func apiString(v rewrite.Value) (string, error) {
	switch v.Type {
	case rewrite.TypeInt64:
		return strconv.FormatInt(v.Int, 10), nil
	case rewrite.TypeNumeric, rewrite.TypeString:
		return v.Str, nil
	case rewrite.TypeTimestamp:
		return v.Time.UTC().Format(time.RFC3339Nano), nil
	case rewrite.TypeDate:
		return rewrite.DateString(v.Int), nil
	case rewrite.TypeBytes:
		return base64.StdEncoding.EncodeToString(v.Bytes), nil
	}
	return "", fmt.Errorf("a %s value has no string form", v.Type)
}

func finite(f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("FLOAT64 %v cannot be a split point", f)
	}
	return nil
}

// HasFalse returns the points with a BOOL false key part: gcloud's
// splits-file parser reads false as true (it converts the token with
// Python's bool(), true for any non-empty string), so those points are
// exact only when added with the API (Requests).
func HasFalse(pts []Point) []Point {
	var out []Point
	for _, p := range pts {
		for _, v := range p.Key {
			if v.Type == rewrite.TypeBool && !v.Null && v.Int == 0 {
				out = append(out, p)
				break
			}
		}
	}
	return out
}
