package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration/config"
)

// A user's own tables on the emulator: `rekey emulators up -c FILE --ddl
// SCHEMA.sql` runs the statements of a GoogleSQL DDL file in the
// config's Spanner database (the source's, else the target's), so that
// one's own data can go in (a `rekey run` with strategy none imports a
// file as it is). Running it again changes nothing: a CREATE of a table,
// index, view or change stream that exists is kept, not run.

// splitDDL splits a DDL file into its statements: separated by ';',
// comments (--, #, /* */) removed, quoted text (', ", `, and triple
// quotes) kept whole. Empty statements are dropped.
func splitDDL(text string) []string {
	var stmts []string
	var b strings.Builder
	flush := func() {
		if s := strings.TrimSpace(b.String()); s != "" {
			stmts = append(stmts, s)
		}
		b.Reset()
	}
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '-' && strings.HasPrefix(text[i:], "--"), c == '#':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case c == '/' && strings.HasPrefix(text[i:], "/*"):
			end := strings.Index(text[i+2:], "*/")
			if end < 0 {
				i = len(text)
			} else {
				i += end + 4
			}
			b.WriteByte(' ')
		case c == '\'' || c == '"' || c == '`':
			q := string(c)
			if strings.HasPrefix(text[i:], q+q+q) {
				q = q + q + q
			}
			j := i + len(q)
			for j < len(text) && !strings.HasPrefix(text[j:], q) {
				if text[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+len(q), len(text))
			b.WriteString(text[i:j])
			i = j
		case c == ';':
			flush()
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	flush()
	return stmts
}

// createRE finds what a CREATE statement creates: its kind and name.
var createRE = regexp.MustCompile("(?is)^CREATE\\s+(?:OR\\s+REPLACE\\s+)?(?:UNIQUE\\s+)?(?:NULL_FILTERED\\s+)?(TABLE|INDEX|VIEW|CHANGE\\s+STREAM)\\s+(?:IF\\s+NOT\\s+EXISTS\\s+)?`?([A-Za-z_][A-Za-z0-9_]*)`?")

// ddlEndpoint is the endpoint of cfg whose Spanner database --ddl runs
// in: the source's, else the target's.
func ddlEndpoint(cfg *config.Config) (endpointRole, error) {
	for _, e := range endpoints(cfg) {
		if storeKindOf(e.ep.Type).spannerDB {
			return e, nil
		}
	}
	return endpointRole{}, fmt.Errorf("--ddl: neither the source (%s) nor the target (%s) is a Spanner database", cfg.Source.Type, cfg.Target.Type)
}

// applyDDLFile runs the statements of file in e's Spanner database, those
// that create what exists left out, saying what it did on w.
func applyDDLFile(ctx context.Context, e endpointRole, file string, w io.Writer) error {
	text, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--ddl: %w", err)
	}
	stmts := splitDDL(string(text))
	if len(stmts) == 0 {
		return fmt.Errorf("--ddl %s: no statement in the file", file)
	}
	db := spannerdb.DatabasePath(e.ep.Project, e.ep.Instance, e.ep.Database)
	have, err := schemaObjects(ctx, db)
	if err != nil {
		return fmt.Errorf("--ddl %s: reading the schema of %s: %w", file, db, err)
	}
	var run, kept []string
	for _, s := range stmts {
		if m := createRE.FindStringSubmatch(s); m != nil && have[strings.ToLower(m[2])] {
			kept = append(kept, strings.ToLower(strings.Join(strings.Fields(m[1]), " "))+" "+m[2])
			continue
		}
		run = append(run, s)
	}
	if len(run) > 0 {
		if err := spannerDDL(ctx, db, run); err != nil {
			return fmt.Errorf("--ddl %s: in %s: %w (statements before the one refused may have run; what exists is kept on a re-run)", file, db, err)
		}
	}
	note := fmt.Sprintf("rekey: %s: ran %s of %s in %s", e.role, plural(len(run), "statement"), file, db)
	if len(kept) > 0 {
		note += fmt.Sprintf(" (kept what exists: %s)", strings.Join(kept, ", "))
	}
	fmt.Fprintln(w, note)
	return nil
}

// schemaObjects are the names (lower case) of the tables, views, indexes
// and change streams of database db.
func schemaObjects(ctx context.Context, db string) (map[string]bool, error) {
	c, err := spanner.NewClientWithConfig(ctx, db, spanner.ClientConfig{DisableNativeMetrics: true})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	have := map[string]bool{}
	for _, q := range []string{
		"SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = ''",
		"SELECT INDEX_NAME FROM INFORMATION_SCHEMA.INDEXES WHERE TABLE_SCHEMA = ''",
		"SELECT CHANGE_STREAM_NAME FROM INFORMATION_SCHEMA.CHANGE_STREAMS",
	} {
		err := c.Single().Query(ctx, spanner.Statement{SQL: q}).Do(func(r *spanner.Row) error {
			var name string
			if err := r.Column(0, &name); err != nil {
				return err
			}
			have[strings.ToLower(name)] = true
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return have, nil
}
