package record

import (
	"os"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/rewrite"
)

// The conversions docs/file-formats.md lists for a Spanner target are the
// ones Coerce makes: each row's JSON value, converted to the row's column
// type, gives the row's result ("error" for a dead letter).
func TestCoercionTableInDocs(t *testing.T) {
	text, err := os.ReadFile("../docs/file-formats.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(text), "| JSON value | column type | value written |")
	if !ok {
		t.Fatal("docs/file-formats.md has no table of the conversions to a column's type")
	}
	rows := 0
	for _, line := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 3 {
			t.Fatalf("row %q: want 3 cells", line)
		}
		unquote := func(s string) string { return strings.Trim(s, "`") }
		js, typ, want := unquote(cells[0]), unquote(cells[1]), unquote(cells[2])
		rec, err := ParseJSON([]byte(`{"__table__": "T", "v": ` + js + `}`))
		if err != nil {
			t.Fatalf("row %q: %v", line, err)
		}
		v, _ := rec.Get("v")
		ct, err := rewrite.ParseType(typ)
		if err != nil {
			t.Fatalf("row %q: %v", line, err)
		}
		got := "error"
		if c, err := Coerce(v, ct); err == nil {
			got = c.String()
		}
		if got != want {
			t.Errorf("%s to %s: got %s, the docs say %s", js, typ, got, want)
		}
		rows++
	}
	if rows < 10 {
		t.Errorf("%d rows", rows)
	}
}
