package source_test

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/internal/testkit/beamtest"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms/source"
)

// runSource runs a source of record batches and dead letters on runner:
// what it emitted and the counters.
func runSource(t *testing.T, runner string, src func(beam.Scope) (beam.PCollection, beam.PCollection)) (batches, dead *beamtest.Collector, m beamtest.Metrics) {
	t.Helper()
	batches, dead = beamtest.NewCollector(t), beamtest.NewCollector(t)
	m = beamtest.Run(t, runner, func(s beam.Scope) {
		b, d := src(s)
		batches.Collect(s, b)
		dead.Collect(s, d)
	})
	return batches, dead, m
}

// readFiles runs source.Files over cfg on runner: the records read, the
// dead letters and the counters.
func readFiles(t *testing.T, runner string, cfg source.FilesConfig) ([]record.Record, []record.DeadLetter, beamtest.Metrics) {
	t.Helper()
	out, dead, m := runSource(t, runner, func(s beam.Scope) (beam.PCollection, beam.PCollection) { return source.Files(s, cfg) })
	return batchRecords(t, out.Elements()), deadLetters(t, dead.Elements()), m
}

func batchRecords(t *testing.T, batches []any) []record.Record {
	t.Helper()
	var recs []record.Record
	for _, e := range batches {
		rs := e.(record.Batch).Recs
		recs = append(recs, rs...)
	}
	return recs
}

func deadLetters(t *testing.T, lines []any) []record.DeadLetter {
	t.Helper()
	var out []record.DeadLetter
	for _, e := range lines {
		d, _, err := record.ParseDeadLetter([]byte(e.(string)))
		if errors.Is(err, record.ErrNotDeadLetter) {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	// By source, shorter first: file:9 before file:10.
	slices.SortFunc(out, func(a, b record.DeadLetter) int {
		return cmp.Or(cmp.Compare(len(a.Source), len(b.Source)), strings.Compare(a.Source, b.Source))
	})
	return out
}

// A CSV row with a broken quote (bare, not closed before the next quote,
// not closed before the end of the file) is dead-lettered alone, with its
// line's bytes and file:line; the valid rows after it are read, and a
// quoted field spanning lines still is one. A row that is not valid UTF-8
// is dead-lettered at read with its bytes exactly (raw_base64). read
// counts every row, the dead-lettered ones too.
func TestCSVBrokenQuoteCostsOnlyItsRow(t *testing.T) {
	lines := []string{
		"Id,Name,Note",
		"1,a,x",
		`2,b,"two`, `lines"`, // one row on two lines
		"3,c,y",
		`4,d"bare,z`, // line 6: a bare quote
		`5,e,"open`,  // line 7: a quote closed on line 9, badly
		"6,f,z",      // read
		`7,g,"q"`,    // read
		"8,h\xff,z",  // line 10: not UTF-8
		`9,i,"never`, // line 11: never closed
		"10,j,k",     // read
	}
	path := filepath.Join(t.TempDir(), "in.csv")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\r\n")+"\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			recs, dead, m := readFiles(t, runner, source.FilesConfig{Path: path, Format: "csv", Key: []string{"Id"}})
			var ids []string
			notes := map[string]string{}
			for _, r := range recs {
				id, _ := r.Get("Id")
				note, _ := r.Get("Note")
				ids = append(ids, id.Str)
				notes[id.Str] = note.Str
			}
			slices.Sort(ids)
			if want := []string{"1", "10", "2", "3", "6", "7"}; !slices.Equal(ids, want) {
				t.Errorf("rows read %v, want %v", ids, want)
			}
			if notes["2"] != "two\nlines" || notes["7"] != "q" {
				t.Errorf("notes %q: want two\\nlines and q", notes)
			}
			want := []struct {
				line int
				raw  string
			}{{6, lines[5]}, {7, lines[6]}, {10, lines[9]}, {11, lines[10]}}
			if len(dead) != len(want) {
				t.Fatalf("%d dead letters %+v, want %d", len(dead), dead, len(want))
			}
			for i, w := range want {
				d := dead[i]
				if d.Stage != record.StageRead || d.Source != fmt.Sprintf("%s:%d", path, w.line) || !bytes.Equal(d.RawBytes(), []byte(w.raw)) {
					t.Errorf("dead letter %d: %+v, want stage read, line %d, raw %q", i, d, w.line, w.raw)
				}
			}
			if dead[2].Raw != "" || dead[2].RawBase64 == nil || !strings.Contains(dead[2].Reason, "column Name: string is not valid UTF-8") {
				t.Errorf("the row not in UTF-8: %+v, want its bytes in raw_base64 and the column named", dead[2])
			}
			if m["rekey/read"] != 10 || m["rekey/dead_lettered"] != 4 {
				t.Errorf("counters %v, want read=10 (every row) dead_lettered=4", m)
			}
		})
	}
}

// A JSON line that is not valid UTF-8 is dead-lettered with its bytes
// exactly: in raw_base64, not as text with U+FFFD in raw.
func TestInvalidUTF8LineKeptExactly(t *testing.T) {
	bad := "{\"UserId\":\"u\xff\"}"
	path := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(path, []byte("{\"UserId\":\"u1\"}\n"+bad+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	recs, dead, m := readFiles(t, "direct", source.FilesConfig{Path: path, Format: "jsonl"})
	if len(recs) != 1 || len(dead) != 1 {
		t.Fatalf("%d records, dead letters %+v; want 1 and 1", len(recs), dead)
	}
	if d := dead[0]; d.Raw != "" || string(d.RawBase64) != bad || !strings.Contains(d.Reason, "not valid UTF-8") {
		t.Errorf("dead letter %+v: want the line's bytes in raw_base64", d)
	}
	if m["rekey/read"] != 2 || m["rekey/dead_lettered"] != 1 {
		t.Errorf("counters %v, want read=2 dead_lettered=1", m)
	}
}

// A redrive refuses what is still not valid UTF-8, a raw line or a
// record, and dead-letters it again with its bytes exactly and why; it
// writes nothing of it. Every line of the file is counted read.
func TestRedriveRefusesInvalidUTF8(t *testing.T) {
	line := "{\"UserId\":\"u\xff\"}"
	badRec := record.Record{Table: "Logs", Fields: []record.Field{{Name: "UserId", Value: record.String("v\xfe")}}}
	goodRec := record.Record{Table: "Logs", Fields: []record.Field{{Name: "UserId", Value: record.String("ok")}}}
	file := strings.Join([]string{
		record.RawDeadLetter(record.StageRead, "in.jsonl:2", line, errors.New("column 12: string is not valid UTF-8")),
		record.NewDeadLetter(record.StageWrite, "Logs", &badRec, errors.New("STRING value is not valid UTF-8")),
		record.NewDeadLetter(record.StageRewrite, "Logs", &goodRec, errors.New("refused")),
	}, "\n") + "\n"
	if strings.Contains(file, "\ufffd") || strings.Contains(file, `\ufffd`) {
		t.Fatalf("dead letters hold U+FFFD:\n%s", file)
	}
	path := filepath.Join(t.TempDir(), "dead.jsonl")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	rewrite, write, again := beamtest.NewCollector(t), beamtest.NewCollector(t), beamtest.NewCollector(t)
	m := beamtest.Run(t, "direct", func(s beam.Scope) {
		a, b, c := source.DeadLetters(s, path)
		rewrite.Collect(s, a)
		write.Collect(s, b)
		again.Collect(s, c)
	})
	if got := batchRecords(t, rewrite.Elements()); len(got) != 1 || record.Diff(&got[0], &goodRec) != "" {
		t.Errorf("to rewrite %+v, want the valid record alone", got)
	}
	if got := batchRecords(t, write.Elements()); len(got) != 0 {
		t.Errorf("to write %+v, want none", got)
	}
	dead := deadLetters(t, again.Elements())
	if len(dead) != 2 {
		t.Fatalf("dead again %+v, want 2", dead)
	}
	// Sorted by source: "Logs" before "in.jsonl:2".
	if d := dead[0]; d.Stage != record.StageWrite || len(d.Record) != 0 || !strings.Contains(d.Reason, "; redrive: ") {
		t.Errorf("record dead again %+v", d)
	} else if _, r, err := record.ParseDeadLetter([]byte(d.Line())); err == nil || r != nil {
		t.Errorf("record dead again parses: %v", err)
	} else if recs, _ := record.DecodeBatch(d.RecordBase64); len(recs) != 1 || record.Diff(&recs[0], &badRec) != "" {
		t.Errorf("record dead again holds %+v, want %+v", recs, badRec)
	}
	if d := dead[1]; d.Stage != record.StageRead || d.Source != "in.jsonl:2" || string(d.RawBase64) != line || !strings.Contains(d.Reason, "; redrive: ") || !strings.Contains(d.Reason, "not valid UTF-8") {
		t.Errorf("raw line dead again %+v", d)
	}
	if m["rekey/read"] != 3 || m["rekey/dead_lettered"] != 2 {
		t.Errorf("counters %v, want read=3 dead_lettered=2", m)
	}
}
