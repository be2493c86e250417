package spannerdb

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/rekeyio/rekey/rewrite"
)

// ParseDDL reads the tables of a database's DDL, as `gcloud spanner
// databases ddl describe` prints it (or as CreateDDL renders a table):
// CREATE TABLE statements separated by semicolons, with their columns,
// primary key and interleaving. Other statements (indexes, views, change
// streams, ...) and table constraints are skipped. Tables are keyed by
// their lower-case name.
func ParseDDL(ddl string) (map[string]*Table, error) {
	tables := map[string]*Table{}
	for i, stmt := range splitTopLevel(stripComments(ddl), ';') {
		f := strings.Fields(stmt)
		if len(f) < 3 || !strings.EqualFold(f[0], "CREATE") || !strings.EqualFold(f[1], "TABLE") {
			continue
		}
		t, err := parseCreateTable(stmt)
		if err != nil {
			return nil, fmt.Errorf("statement %d: %w", i+1, err)
		}
		tables[strings.ToLower(t.Name)] = t
	}
	return tables, nil
}

func parseCreateTable(stmt string) (*Table, error) {
	open := strings.IndexByte(stmt, '(')
	if open < 0 {
		return nil, fmt.Errorf("CREATE TABLE without columns: %.60q", stmt)
	}
	head := strings.Fields(stmt[:open])
	name := unquote(head[len(head)-1]) // also after IF NOT EXISTS
	closeAt := matching(stmt, open)
	if closeAt < 0 {
		return nil, fmt.Errorf("table %s: unbalanced parentheses", name)
	}
	t := &Table{Name: name, Key: rewrite.KeySchema{Table: name}}
	for _, def := range splitTopLevel(stmt[open+1:closeAt], ',') {
		def = strings.TrimSpace(def)
		if def == "" {
			continue
		}
		first := strings.ToUpper(strings.Fields(def)[0])
		if first == "CONSTRAINT" || first == "FOREIGN" || first == "CHECK" || first == "PRIMARY" {
			continue
		}
		c, err := parseColumn(def)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", name, err)
		}
		t.Columns = append(t.Columns, c)
	}
	rest := stmt[closeAt+1:]
	upper := strings.ToUpper(rest)
	pk := strings.Index(upper, "PRIMARY KEY")
	if pk < 0 {
		return nil, fmt.Errorf("table %s: no PRIMARY KEY", name)
	}
	kOpen := strings.IndexByte(rest[pk:], '(')
	if kOpen < 0 {
		return nil, fmt.Errorf("table %s: PRIMARY KEY without columns", name)
	}
	kOpen += pk
	kClose := matching(rest, kOpen)
	if kClose < 0 {
		return nil, fmt.Errorf("table %s: unbalanced PRIMARY KEY", name)
	}
	for _, part := range splitTopLevel(rest[kOpen+1:kClose], ',') {
		f := strings.Fields(part)
		if len(f) == 0 {
			continue
		}
		c := t.Column(unquote(f[0]))
		if c == nil {
			return nil, fmt.Errorf("table %s: key column %s is not among the columns", name, f[0])
		}
		kc, err := keyColumn(c)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", name, err)
		}
		kc.Desc = len(f) > 1 && strings.EqualFold(f[1], "DESC")
		t.Key.Columns = append(t.Key.Columns, kc)
	}
	if i := strings.Index(upper, "INTERLEAVE IN PARENT"); i >= 0 {
		f := strings.Fields(rest[i+len("INTERLEAVE IN PARENT"):])
		if len(f) == 0 {
			return nil, fmt.Errorf("table %s: INTERLEAVE IN PARENT without a table", name)
		}
		t.Parent = unquote(strings.TrimRight(f[0], ","))
		t.OnDeleteCascade = strings.Contains(strings.ToUpper(strings.Join(f[1:], " ")), "ON DELETE CASCADE")
	}
	return t, nil
}

// parseColumn reads "Name TYPE [NOT NULL] [DEFAULT (e)] [AS (e) [STORED]]
// [OPTIONS (...)]".
func parseColumn(def string) (Column, error) {
	i := strings.IndexFunc(def, unicode.IsSpace)
	if i < 0 {
		return Column{}, fmt.Errorf("column %q has no type", def)
	}
	c := Column{Name: unquote(def[:i])}
	rest := strings.TrimSpace(def[i:])
	// The type runs to the first space outside <> and ().
	depth, end := 0, len(rest)
	for j, r := range rest {
		switch r {
		case '<', '(':
			depth++
		case '>', ')':
			depth--
		}
		if depth == 0 && unicode.IsSpace(r) {
			end = j
			break
		}
	}
	c.Type = strings.ToUpper(strings.ReplaceAll(rest[:end], " ", ""))
	if _, err := ParseColumnType(c.Type); err != nil {
		return Column{}, fmt.Errorf("column %s: %w", c.Name, err)
	}
	rest = rest[end:]
	upper := strings.ToUpper(rest)
	c.NotNull = strings.Contains(upper, "NOT NULL")
	if j := strings.Index(upper, "DEFAULT"); j >= 0 {
		c.Default = parenthesised(rest[j:])
	}
	if j := strings.Index(upper, " AS "); j >= 0 || strings.HasPrefix(strings.TrimSpace(upper), "AS ") {
		if j < 0 {
			j = strings.Index(upper, "AS ")
		}
		c.Generated = true
		c.Expression = parenthesised(rest[j:])
		c.Stored = strings.Contains(upper, "STORED")
	}
	if strings.Contains(strings.ReplaceAll(upper, " ", ""), "ALLOW_COMMIT_TIMESTAMP=TRUE") {
		c.AllowCommitTimestamp = true
	}
	return c, nil
}

// parenthesised returns the text inside the first balanced parentheses of
// s.
func parenthesised(s string) string {
	open := strings.IndexByte(s, '(')
	if open < 0 {
		return ""
	}
	end := matching(s, open)
	if end < 0 {
		return ""
	}
	return strings.TrimSpace(s[open+1 : end])
}

// unquoted calls visit with the index and rune of every rune of s outside
// quoted text ('...', "...", `...`) until visit returns false.
func unquoted(s string, visit func(i int, r rune) bool) {
	var quote rune
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"' || r == '`':
			quote = r
		default:
			if !visit(i, r) {
				return
			}
		}
	}
}

// matching is the index of the parenthesis closing the one at open, or
// -1; quoted text is skipped.
func matching(s string, open int) int {
	depth, at := 0, -1
	unquoted(s[open:], func(i int, r rune) bool {
		switch r {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				at = open + i
				return false
			}
		}
		return true
	})
	return at
}

// splitTopLevel splits s at sep outside parentheses, angle brackets and
// quotes.
func splitTopLevel(s string, sep rune) []string {
	var out []string
	depth, start := 0, 0
	unquoted(s, func(i int, r rune) bool {
		switch {
		case r == '(' || r == '<':
			depth++
		case r == ')' || r == '>':
			depth--
		case r == sep && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
		return true
	})
	return append(out, s[start:])
}

// stripComments removes -- and # line comments (outside quotes is not
// checked: DDL from gcloud has none inside strings that matter here).
func stripComments(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if j := strings.Index(l, "--"); j >= 0 {
			lines[i] = l[:j]
		}
	}
	return strings.Join(lines, "\n")
}

func unquote(s string) string { return strings.Trim(s, "`") }

// Schema is what ParseSchema reads from a database's DDL.
type Schema struct {
	// Tables are the tables, as ParseDDL reads them.
	Tables map[string]*Table
	// Indexes are the secondary indexes (CREATE INDEX), in DDL order.
	Indexes []Index
	// Checks are the CHECK constraints of each table, keyed by the table's
	// lower-case name: the expressions inside CHECK (...).
	Checks map[string][]string
}

// Index is a secondary index:
//
//	CREATE [UNIQUE] [NULL_FILTERED] INDEX [IF NOT EXISTS] Name ON Table (Key [DESC], ...)
//	  [STORING (Columns)] [WHERE ...] [, INTERLEAVE IN Parent]
type Index struct {
	Name  string
	Table string
	// Columns are the index key, in key order.
	Columns      []IndexColumn
	Unique       bool
	NullFiltered bool
	// Storing are the STORING columns.
	Storing []string
	// Interleave is the table the index is interleaved in, "" if none.
	Interleave string
}

// IndexColumn is one key column of an index.
type IndexColumn struct {
	Name string
	Desc bool
}

// ParseSchema reads the tables (as ParseDDL does), the secondary indexes
// and the tables' CHECK constraints from DDL. Search and vector indexes,
// views, sequences, change streams and other statements are skipped.
// Errors name the statement's number (1-based) and the index or table.
func ParseSchema(ddl string) (*Schema, error) {
	tables, err := ParseDDL(ddl)
	if err != nil {
		return nil, err
	}
	s := &Schema{Tables: tables, Checks: map[string][]string{}}
	for i, stmt := range splitTopLevel(stripComments(ddl), ';') {
		f := upperFields(stmt, 4)
		switch {
		case len(f) >= 3 && f[0] == "CREATE" && f[1] == "TABLE":
			name, checks := tableChecks(stmt)
			if len(checks) > 0 {
				s.Checks[strings.ToLower(name)] = checks
			}
		case len(f) >= 3 && f[0] == "CREATE" && indexStatement(f[1:]):
			ix, err := parseCreateIndex(stmt)
			if err != nil {
				return nil, fmt.Errorf("statement %d: %w", i+1, err)
			}
			s.Indexes = append(s.Indexes, ix)
		}
	}
	return s, nil
}

// upperFields is the first n fields of s, upper-cased, split at spaces and
// before '('.
func upperFields(s string, n int) []string {
	f := strings.Fields(strings.ReplaceAll(s, "(", " ("))
	if len(f) > n {
		f = f[:n]
	}
	for i := range f {
		f[i] = strings.ToUpper(f[i])
	}
	return f
}

// indexStatement reports whether the words after CREATE start a plain
// secondary index: [UNIQUE] [NULL_FILTERED] INDEX.
func indexStatement(words []string) bool {
	for _, w := range words {
		switch w {
		case "UNIQUE", "NULL_FILTERED":
		case "INDEX":
			return true
		default:
			return false
		}
	}
	return false
}

func parseCreateIndex(stmt string) (Index, error) {
	var ix Index
	open := strings.IndexByte(stmt, '(')
	if open < 0 {
		return ix, fmt.Errorf("CREATE INDEX without key columns: %.60q", strings.TrimSpace(stmt))
	}
	head := strings.Fields(stmt[:open])
	on, index := -1, -1
	for i, w := range head {
		switch strings.ToUpper(w) {
		case "UNIQUE":
			ix.Unique = true
		case "NULL_FILTERED":
			ix.NullFiltered = true
		case "INDEX":
			index = i
		case "ON":
			on = i
		}
	}
	if on != len(head)-2 || on-1 <= index || strings.EqualFold(head[on-1], "EXISTS") {
		return ix, fmt.Errorf("CREATE INDEX: want \"Name ON Table (columns)\", got %.60q", strings.TrimSpace(stmt[:open]))
	}
	ix.Name, ix.Table = unquote(head[on-1]), unquote(head[on+1])
	closeAt := matching(stmt, open)
	if closeAt < 0 {
		return ix, fmt.Errorf("index %s: unbalanced parentheses", ix.Name)
	}
	for _, part := range splitTopLevel(stmt[open+1:closeAt], ',') {
		f := strings.Fields(part)
		if len(f) == 0 {
			continue
		}
		ix.Columns = append(ix.Columns, IndexColumn{Name: unquote(f[0]), Desc: len(f) > 1 && strings.EqualFold(f[1], "DESC")})
	}
	if len(ix.Columns) == 0 {
		return ix, fmt.Errorf("index %s: no key columns", ix.Name)
	}
	rest := stmt[closeAt+1:]
	upper := strings.ToUpper(rest)
	if i := strings.Index(upper, "STORING"); i >= 0 {
		for _, c := range splitTopLevel(parenthesised(rest[i:]), ',') {
			if c = strings.TrimSpace(c); c != "" {
				ix.Storing = append(ix.Storing, unquote(c))
			}
		}
	}
	if i := strings.Index(upper, "INTERLEAVE IN"); i >= 0 {
		f := strings.Fields(rest[i+len("INTERLEAVE IN"):])
		if len(f) == 0 {
			return ix, fmt.Errorf("index %s: INTERLEAVE IN without a table", ix.Name)
		}
		ix.Interleave = unquote(strings.TrimRight(f[0], ","))
	}
	return ix, nil
}

// tableChecks returns the name of the table stmt creates and the
// expressions of its CHECK constraints ([CONSTRAINT Name] CHECK (e)).
func tableChecks(stmt string) (table string, checks []string) {
	open := strings.IndexByte(stmt, '(')
	if open < 0 {
		return "", nil
	}
	head := strings.Fields(stmt[:open])
	table = unquote(head[len(head)-1])
	closeAt := matching(stmt, open)
	if closeAt < 0 {
		return table, nil
	}
	for _, def := range splitTopLevel(stmt[open+1:closeAt], ',') {
		f := upperFields(def, 3)
		if len(f) > 0 && f[0] == "CHECK" || len(f) > 2 && f[0] == "CONSTRAINT" && f[2] == "CHECK" {
			at := strings.Index(strings.ToUpper(def), "CHECK")
			checks = append(checks, parenthesised(def[at:]))
		}
	}
	return table, checks
}
