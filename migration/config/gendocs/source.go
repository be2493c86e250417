package main

import (
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// typeDocs are the doc comments of a package's struct types: the type's
// own, and each field's.
type typeDocs struct {
	doc    string
	fields map[string]string
}

// parseDocs reads the doc comments of the struct types declared in the Go
// files of dir (tests left out), by type name.
func parseDocs(dir string) (map[string]typeDocs, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	out := map[string]typeDocs{}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, spec := range g.Specs {
				ts := spec.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				doc := ts.Doc
				if doc == nil {
					doc = g.Doc
				}
				td := typeDocs{doc: doc.Text(), fields: map[string]string{}}
				for _, fld := range st.Fields.List {
					text := fld.Doc.Text()
					if text == "" {
						text = fld.Comment.Text()
					}
					for _, n := range fld.Names {
						td.fields[n.Name] = text
					}
				}
				out[ts.Name.Name] = td
			}
		}
	}
	return out, nil
}

// oneLine joins a doc comment's lines into one paragraph for a table
// cell: indented blocks stay readable as "a; b", and | is escaped.
func oneLine(doc string) string {
	var parts []string
	for _, l := range strings.Split(doc, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.ReplaceAll(strings.Join(parts, " "), "|", `\|`)
}

// markdown renders a doc comment as Markdown, for the text above a table.
func markdown(doc string) string {
	var p comment.Parser
	var pr comment.Printer
	return strings.TrimSpace(string(pr.Markdown(p.Parse(doc))))
}
