package source

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/record"
)

// windows writes lines as Excel ("CSV UTF-8") and Windows tools write
// them: a UTF-8 byte order mark first, every line ended by CRLF.
func windows(t *testing.T, name string, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	text := "\uFEFF" + strings.Join(lines, "\r\n") + "\r\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// read reads the ranges of a file as readFilesFn does, returning its
// records and dead letters (or the error that stopped the read).
func read(t *testing.T, cfg FilesConfig, ranges ...fileRange) ([]record.Record, []record.DeadLetter, error) {
	t.Helper()
	f := &readFilesFn{Cfg: cfg}
	var recs []record.Record
	var dead []record.DeadLetter
	emit := func(b record.Batch) { recs = append(recs, b.Recs...) }
	deadFn := func(line string) {
		d, _, err := record.ParseDeadLetter([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		dead = append(dead, d)
	}
	for _, fr := range ranges {
		if err := f.readFile(context.Background(), fr, emit, deadFn); err != nil {
			return recs, dead, err
		}
	}
	return recs, dead, nil
}

func whole(path string) fileRange { return fileRange{Name: path, End: -1} }

// field returns the named field of rec as text, failing the test if the
// record has no field of exactly that name.
func field(t *testing.T, rec record.Record, name string) string {
	t.Helper()
	for _, f := range rec.Fields {
		if f.Name == name {
			return f.Value.Str
		}
	}
	t.Fatalf("no field %q in %s", name, rec.Describe())
	return ""
}

// An Excel CSV (BOM, CRLF, a quoted field holding a line break) is read
// whole: every row, no dead letter, the first column named without the
// mark and the last field without the CR.
func TestExcelCSV(t *testing.T) {
	path := windows(t, "access.csv",
		"LastAccess,UserId,Note",
		"2024-01-31T12:00:00Z,u1,plain",
		`2024-01-31T12:00:01Z,u2,"two`+"\r\n"+`lines"`,
		"2024-01-31T12:00:02Z,u3,")
	recs, dead, err := read(t, FilesConfig{Format: "csv", Key: []string{"LastAccess", "UserId"}}, whole(path))
	if err != nil || len(dead) > 0 {
		t.Fatalf("error %v, dead letters %v", err, dead)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	if got := field(t, recs[0], "LastAccess"); got != "2024-01-31T12:00:00Z" {
		t.Errorf("LastAccess %q", got)
	}
	if got := field(t, recs[0], "Note"); got != "plain" {
		t.Errorf("last field %q, want plain", got)
	}
	if got := field(t, recs[1], "Note"); got != "two\nlines" {
		t.Errorf("quoted field %q, want two\\nlines", got)
	}
	if v, _ := recs[2].Get("Note"); v.Kind != record.KindNull {
		t.Errorf("empty last field %v, want NULL", v)
	}
	peeked, err := PeekFiles(context.Background(), FilesConfig{Path: path, Format: "csv", Key: []string{"UserId"}}, 5)
	if err != nil || len(peeked) != 3 || field(t, peeked[0], "LastAccess") != "2024-01-31T12:00:00Z" {
		t.Errorf("peek: %v, %v", peeked, err)
	}
}

// A Windows JSON Lines file (BOM, CRLF) is read whole and in byte ranges
// of many sizes: every record once, no dead letter, no CR in a value.
// The mark is skipped only at byte 0: a line starting with one further
// on (two files concatenated) is a dead letter, whichever range reads it.
func TestWindowsJSONL(t *testing.T) {
	var lines []string
	const n = 12
	for i := range n {
		lines = append(lines, fmt.Sprintf(`{"i": %d, "s": "v%d"}`, i, i))
	}
	path := windows(t, "in.jsonl", lines...)
	data, _ := os.ReadFile(path)
	for _, step := range []int64{1, 2, 3, 4, 17, 64, 1 << 30} {
		recs, dead, err := read(t, FilesConfig{Format: "jsonl"}, splitFile(path, int64(len(data)), step)...)
		if err != nil || len(dead) > 0 {
			t.Fatalf("step %d: error %v, dead letters %v", step, err, dead)
		}
		if len(recs) != n {
			t.Fatalf("step %d: %d records, want %d", step, len(recs), n)
		}
		for i, r := range recs {
			if got, want := field(t, r, "s"), fmt.Sprintf("v%d", i); got != want {
				t.Fatalf("step %d: record %d: s %q, want %q", step, i, got, want)
			}
		}
	}
	peeked, err := PeekFiles(context.Background(), FilesConfig{Path: path, Format: "jsonl"}, 2)
	if err != nil || len(peeked) != 2 {
		t.Errorf("peek: %v, %v", peeked, err)
	}

	cat := windows(t, "cat.jsonl", `{"i": 0}`, "\uFEFF"+`{"i": 1}`, `{"i": 2}`)
	data, _ = os.ReadFile(cat)
	for _, step := range []int64{1, 3, 4, 13, 1 << 30} {
		recs, dead, err := read(t, FilesConfig{Format: "jsonl"}, splitFile(cat, int64(len(data)), step)...)
		if err != nil || len(recs) != 2 || len(dead) != 1 || dead[0].Source != cat+":2" {
			t.Errorf("step %d: %d records, dead letters %v, error %v; want 2 records and line 2 dead-lettered", step, len(recs), dead, err)
		}
	}
}

// A UTF-16 file is refused, saying what to save it as.
func TestUTF16Refused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "unicode.csv")
	os.WriteFile(path, []byte("\xff\xfeI\x00d\x00\r\x00\n\x00"), 0o644)
	for _, format := range []string{"csv", "jsonl"} {
		_, _, err := read(t, FilesConfig{Format: format}, whole(path))
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "UTF-16") {
			t.Errorf("%s: error %v, want one naming the file and UTF-16", format, err)
		}
	}
}

// A CSV header that names a column twice or lacks a key column is one
// error naming the file and the header, before any row: no record and no
// dead letter. CheckFiles says the same before a pipeline runs.
func TestCSVHeaderRefused(t *testing.T) {
	key := []string{"LastAccess", "UserId"}
	for _, tc := range []struct {
		name, header string
		want         []string
	}{
		{"duplicate", "LastAccess,UserId,Note,UserId", []string{`"LastAccess,UserId,Note,UserId"`, `"UserId" appears twice, as columns 2 and 4`}},
		{"duplicate in another case", "LastAccess,UserId,userid", []string{`"UserId" and "userid" name the same column`, "columns 2 and 3"}},
		{"no key column", "Last Access,UserId,Note", []string{`CSV header "Last Access,UserId,Note" has no key column LastAccess (source.key: LastAccess, UserId)`}},
		{"no key columns", "A;B", []string{`"A;B" has no key columns LastAccess, UserId`}},
		// A file separated by '|' read with the default ',': the hint
		// names source.delimiter.
		{"another delimiter", "LastAccess|UserId|Note", []string{`has no key columns LastAccess, UserId`, `which "|" would split`, `(source.delimiter: "|")`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := []string{tc.header}
			for i := range 100 {
				rows = append(rows, strings.NewReplacer(",", ",x", ";", ";x").Replace(tc.header)+fmt.Sprint(i))
			}
			path := windows(t, "in.csv", rows...)
			cfg := FilesConfig{Path: path, Format: "csv", Key: key}
			if strings.Contains(tc.header, ";") {
				cfg.Delimiter = ";"
			}
			recs, dead, err := read(t, cfg, whole(path))
			if len(recs) > 0 || len(dead) > 0 {
				t.Errorf("%d records and %d dead letters, want none", len(recs), len(dead))
			}
			check := CheckFiles(context.Background(), cfg)
			for _, e := range []error{err, check} {
				if e == nil {
					t.Fatal("no error")
				}
				for _, w := range append(tc.want, path) {
					if !strings.Contains(e.Error(), w) {
						t.Errorf("error %q lacks %q", e, w)
					}
				}
			}
			if _, err := PeekFiles(context.Background(), cfg, 5); err == nil {
				t.Error("peek: no error")
			}
		})
	}
}

// CheckFiles checks every file of a glob, and refuses a glob that
// matches none; the key's case does not matter, as in a record.
func TestCheckFiles(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.csv"), []byte("Id,x\n1,2\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.csv"), []byte("id,x\n1,2\n"), 0o644)
	ctx := context.Background()
	if err := CheckFiles(ctx, FilesConfig{Path: filepath.Join(dir, "*.csv"), Format: "csv", Key: []string{"ID"}}); err != nil {
		t.Errorf("good files: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "c.csv"), []byte("Id,x,x\n1,2,3\n"), 0o644)
	err := CheckFiles(ctx, FilesConfig{Path: filepath.Join(dir, "*.csv"), Format: "csv", Key: []string{"ID"}})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "c.csv")) {
		t.Errorf("a bad file among good ones: %v, want an error naming c.csv", err)
	}
	err = CheckFiles(ctx, FilesConfig{Path: filepath.Join(dir, "*.jsonl"), Format: "jsonl"})
	if err == nil || !strings.Contains(err.Error(), "no file matches") {
		t.Errorf("no match: %v", err)
	}
}

// Empty inputs hold no records and are no error: an empty file, a BOM
// alone, a CSV header alone.
func TestEmptyFiles(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, format, text string }{
		{"empty.csv", "csv", ""},
		{"bom.csv", "csv", "\uFEFF"},
		{"header.csv", "csv", "\uFEFFId,x\r\n"},
		{"empty.jsonl", "jsonl", ""},
		{"bom.jsonl", "jsonl", "\uFEFF"},
		{"blank.jsonl", "jsonl", "\uFEFF\r\n\r\n"},
	} {
		path := filepath.Join(dir, tc.name)
		os.WriteFile(path, []byte(tc.text), 0o644)
		recs, dead, err := read(t, FilesConfig{Format: tc.format, Key: []string{"Id"}}, splitFile(path, int64(len(tc.text)), 1)...)
		if len(recs) > 0 || len(dead) > 0 || err != nil {
			t.Errorf("%s: %d records, dead letters %v, error %v; want none", tc.name, len(recs), dead, err)
		}
		if err := CheckFiles(context.Background(), FilesConfig{Path: path, Format: tc.format, Key: []string{"Id"}}); err != nil {
			t.Errorf("%s: CheckFiles: %v", tc.name, err)
		}
	}
}

// Dead letters of a file read in many byte ranges, plainly and
// interleaved, name their line in the file, counted as an editor does
// (blank lines too; the last line without a line end).
func TestDeadLetterLineInTheFile(t *testing.T) {
	const n = 1000
	bad := map[int]bool{1: true, 200: true, 201: true, 517: true, 999: true, n: true}
	var lines []string
	for i := 1; i <= n; i++ {
		switch {
		case bad[i]:
			lines = append(lines, fmt.Sprintf(`{"line": %d, oops}`, i))
		case i%97 == 0:
			lines = append(lines, "")
		default:
			lines = append(lines, fmt.Sprintf(`{"line": %d, "pad": %q}`, i, strings.Repeat("x", i%31)))
		}
	}
	path := windows(t, "in.jsonl", lines...)
	// The last line without its CRLF.
	data, _ := os.ReadFile(path)
	data = bytes.TrimSuffix(data, []byte("\r\n"))
	os.WriteFile(path, data, 0o644)
	want := func(t *testing.T, dead []record.DeadLetter) {
		t.Helper()
		got := map[string]bool{}
		for _, d := range dead {
			got[d.Source] = true
		}
		if len(dead) != len(bad) || len(got) != len(bad) {
			t.Fatalf("%d dead letters (%d places), want %d: %v", len(dead), len(got), len(bad), dead)
		}
		for i := range bad {
			if where := fmt.Sprintf("%s:%d", path, i); !got[where] {
				t.Errorf("no dead letter at %s; got %v", where, got)
			}
		}
		for _, d := range dead {
			var line int
			fmt.Sscanf(d.Raw, `{"line": %d`, &line)
			if d.Source != fmt.Sprintf("%s:%d", path, line) {
				t.Errorf("line %q dead-lettered as %s", d.Raw, d.Source)
			}
		}
	}
	for _, step := range []int64{64, 1000, 1 << 30} {
		t.Run(fmt.Sprint(step), func(t *testing.T) {
			ranges := splitFile(path, int64(len(data)), step)
			rand.Shuffle(len(ranges), func(i, j int) { ranges[i], ranges[j] = ranges[j], ranges[i] })
			recs, dead, err := read(t, FilesConfig{Format: "jsonl"}, ranges...)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(recs) + len(dead); got != n-n/97 {
				t.Errorf("%d records and dead letters, want %d", got, n-n/97)
			}
			want(t, dead)
		})
	}
	t.Run("interleaved", func(t *testing.T) {
		var dead []record.DeadLetter
		f := &readFilesFn{Cfg: FilesConfig{Format: "jsonl", Interleave: 50}}
		err := f.readInterleaved(context.Background(), interleavedRanges(path, int64(len(data)), int64(len(data)), 64), func(record.Batch) {}, func(line string) {
			d, _, _ := record.ParseDeadLetter([]byte(line))
			dead = append(dead, d)
		})
		if err != nil {
			t.Fatal(err)
		}
		want(t, dead)
	})
}

// lineIndex counts the line ends before any offset, asked in any order,
// from the marks it left (here over several marks' worth of file), and
// tells a rewritten file from the one it counted.
func TestLineIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.jsonl")
	data := make([]byte, 3*markStep+12345)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		if rng.IntN(40) == 0 {
			data[i] = '\n'
		} else {
			data[i] = 'x'
		}
	}
	os.WriteFile(path, data, 0o644)
	x := &lineIndex{files: map[fileID]*lineMarks{}}
	ctx := context.Background()
	offs := []int64{int64(len(data)), 2*markStep + 7, 5, markStep, markStep - 1, 0, 2 * markStep, 3*markStep + 1, int64(len(data)) - 1}
	for range 20 {
		offs = append(offs, rng.Int64N(int64(len(data))+1))
	}
	for _, off := range offs {
		got, err := x.before(ctx, path, off)
		if want := int64(bytes.Count(data[:off], []byte{'\n'})); got != want || err != nil {
			t.Errorf("before %d: %d, %v; want %d", off, got, err, want)
		}
	}
	os.WriteFile(path, data[:markStep+10], 0o644) // another file under the same name
	if got, _ := x.before(ctx, path, markStep+10); got != int64(bytes.Count(data[:markStep+10], []byte{'\n'})) {
		t.Errorf("a rewritten file: %d", got)
	}
	os.WriteFile(path, bytes.Repeat([]byte{'\n'}, markStep+10), 0o644) // same size, another time
	later := time.Now().Add(time.Hour)
	os.Chtimes(path, later, later)
	if got, _ := x.before(ctx, path, markStep+10); got != markStep+10 {
		t.Errorf("a file rewritten to the same size: %d, want %d", got, markStep+10)
	}
}
