package cutover_test

import (
	"encoding/json"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestExportedAPIHasNoInternalTypes: package cutover is the library an
// application outside the module links, so no exported function, method,
// variable, constant, type or field of it may name a type of one of the
// module's internal packages (which such an application cannot import or
// build). It reads the package's compiled export data, as the compiler
// sees it.
func TestExportedAPIHasNoInternalTypes(t *testing.T) {
	pkg := loadExported(t, "github.com/rekeyio/rekey/cutover")
	var bad []string
	for _, name := range pkg.Scope().Names() {
		obj := pkg.Scope().Lookup(name)
		if !obj.Exported() {
			continue
		}
		for _, p := range internalIn(obj.Type()) {
			bad = append(bad, fmt.Sprintf("%s: %s", name, p))
		}
		if tn, ok := obj.(*types.TypeName); ok {
			named, ok := tn.Type().(*types.Named)
			if !ok {
				continue
			}
			for i := 0; i < named.NumMethods(); i++ {
				if m := named.Method(i); m.Exported() {
					for _, p := range internalIn(m.Type()) {
						bad = append(bad, fmt.Sprintf("%s.%s: %s", name, m.Name(), p))
					}
				}
			}
		}
	}
	sort.Strings(bad)
	for _, b := range slices.Compact(bad) {
		t.Errorf("the exported API names an internal type: %s", b)
	}
}

// applicationNames are the names package cutover gives of package
// phases: what an application names (the phases, the map the library acts
// on, the cache's defaults, the error of a database without a phase
// store).
var applicationNames = []string{
	"Phase", "Old", "DualWrite", "Backfilled", "Verified", "Shadow", "ReadNew", "NewOnly", "Done",
	"Map", "Span", "DefaultCacheTTL", "DefaultSkew", "ErrNoPhaseStore",
}

// operatorNames are the phase store's operator side, package phases'
// alone: the store and its moves, rules and audit, the backfill's terms,
// the repair log, the marks' and the tables' names.
var operatorNames = []string{
	"Store", "SpannerStore", "DatastoreStore", "Move", "Note", "Audit", "Check", "Rules", "RulesFor",
	"Phases", "ParsePhase", "Backfill", "BackfillSpan", "Reverse", "RepairEntry", "RepairLog",
	"SpannerKeyText", "DatastoreMarkKey", "DatastoreMark", "DatastoreRepair", "BehindClearer",
	"BehindOld", "BehindNew", "ErrConflict", "ErrIllegal", "ErrMissedNewOnly", "SpannerDDL",
	"CreateSpannerTables", "SpannerMigrationTable", "SpannerPhaseTable", "SpannerAuditTable",
	"SpannerRepairTable", "SpannerTouchedTable", "DatastoreMigrationKind", "DatastorePhaseKind",
	"DatastoreAuditKind", "DatastoreRepairKind", "DatastoreTouchedKind", "ActionCleanup",
	"SwitchesAuthority",
}

// TestExportedAPIHasNoOperatorNames: package cutover exports the library
// and, of package phases, only what an application names
// (applicationNames); the phase store's operator side (operatorNames,
// and whatever else package phases exports) is package phases' alone,
// for the operator, the jobs and the command to name as phases.X.
func TestExportedAPIHasNoOperatorNames(t *testing.T) {
	pkg := loadExported(t, "github.com/rekeyio/rekey/cutover")
	ph := loadExported(t, "github.com/rekeyio/rekey/cutover/phases")
	operator := map[string]bool{}
	for _, name := range operatorNames {
		operator[name] = true
	}
	for _, name := range ph.Scope().Names() {
		if token.IsExported(name) && !slices.Contains(applicationNames, name) {
			operator[name] = true
		}
	}
	for _, name := range pkg.Scope().Names() {
		if token.IsExported(name) && operator[name] {
			t.Errorf("package cutover exports %s, of the phase store's operator side: name it as phases.%s where it is used", name, name)
		}
	}
	for _, name := range applicationNames {
		if pkg.Scope().Lookup(name) == nil {
			t.Errorf("package cutover does not export %s, which an application names", name)
		}
	}
}

// internalIn returns the internal packages' types that t names in what
// an importer sees: signatures, exported fields, elements, and the
// underlying type of a type declared in the package itself or in package
// phases (whose Map, Span and RepairEntry the library's API names).
func internalIn(t types.Type) []string {
	var out []string
	seen := map[types.Type]bool{}
	var walk func(types.Type)
	walk = func(t types.Type) {
		if seen[t] {
			return
		}
		seen[t] = true
		switch t := t.(type) {
		case *types.Named:
			if p := t.Obj().Pkg(); p != nil {
				if strings.Contains(p.Path()+"/", "/internal/") {
					out = append(out, p.Path()+"."+t.Obj().Name())
					return
				}
				if p.Path() == "github.com/rekeyio/rekey/cutover" || p.Path() == "github.com/rekeyio/rekey/cutover/phases" {
					walk(t.Underlying())
				}
			}
			for i := 0; i < t.TypeArgs().Len(); i++ {
				walk(t.TypeArgs().At(i))
			}
		case *types.Pointer:
			walk(t.Elem())
		case *types.Slice:
			walk(t.Elem())
		case *types.Array:
			walk(t.Elem())
		case *types.Map:
			walk(t.Key())
			walk(t.Elem())
		case *types.Chan:
			walk(t.Elem())
		case *types.Signature:
			for i := 0; i < t.Params().Len(); i++ {
				walk(t.Params().At(i).Type())
			}
			for i := 0; i < t.Results().Len(); i++ {
				walk(t.Results().At(i).Type())
			}
		case *types.Struct:
			for i := 0; i < t.NumFields(); i++ {
				if f := t.Field(i); f.Exported() || f.Embedded() {
					walk(f.Type())
				}
			}
		case *types.Interface:
			for i := 0; i < t.NumMethods(); i++ {
				if m := t.Method(i); m.Exported() {
					walk(m.Type())
				}
			}
		}
	}
	walk(t)
	return out
}

// loadExported type-checks path from the export data the go command
// builds (go list -export), as a compiler importing it would.
func loadExported(t *testing.T, path string) *types.Package {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export", path)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export %s: %v", path, err)
	}
	exports := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(p string) (io.ReadCloser, error) {
		f, ok := exports[p]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", p)
		}
		return os.Open(f)
	})
	pkg, err := imp.Import(path)
	if err != nil {
		t.Fatalf("importing %s: %v", path, err)
	}
	return pkg
}
