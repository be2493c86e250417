package pipeline

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestGraphsTakeTheResolvedJob: the graphs take what migration resolved
// (Job.Source, Job.Target, Job.Write, Job.Cohort, Job.WriteOrder, ...),
// never the config behind the job (Job.Config): a derived job
// (Job.Reversed, planJob) changes the resolved values, which a read of
// Config would miss. It reads the package's sources for a selector
// .Config on anything but the config package.
func TestGraphsTakeTheResolvedJob(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Config" {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "config" {
				return true // the type config.Config
			}
			t.Errorf("%s: reads .Config; take the job's resolved values instead", fset.Position(sel.Pos()))
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source file read")
	}
}
