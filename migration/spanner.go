package migration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/rewrite"
)

func endpointPath(e config.Endpoint) string {
	return spannerdb.DatabasePath(e.Project, e.Instance, e.Database)
}

func spannerClient(ctx context.Context, e config.Endpoint) (*spanner.Client, error) {
	c, err := spanner.NewClientWithConfig(ctx, endpointPath(e), spanner.ClientConfig{SessionPoolConfig: spanner.SessionPoolConfig{MinOpened: 1}})
	if err != nil {
		return nil, fmt.Errorf("spanner %s: %w", endpointPath(e), err)
	}
	return c, nil
}

func (j *Job) spannerSchemas() *SpannerSchemas {
	if j.Spanner == nil {
		j.Spanner = &SpannerSchemas{exists: map[string]bool{}, indexes: map[string]bool{}}
	}
	return j.Spanner
}

// resolveSpannerSource reads the source table's schema and those of its
// interleaved children named in the config: from the DDL file of
// source.schema if given, else from the database.
func (j *Job) resolveSpannerSource(ctx context.Context) error {
	src := j.Config.Source
	var read func(name string) (*spannerdb.Table, error)
	// indexes reads the source database's secondary indexes.
	var indexes func() ([]spannerdb.Index, error)
	if src.Schema != "" {
		text, err := os.ReadFile(src.Schema)
		if err != nil {
			return configErrorf("source.schema: %w", err)
		}
		tables, err := spannerdb.ParseDDL(string(text))
		if err != nil {
			return configErrorf("source.schema %s: %w", src.Schema, err)
		}
		indexes = func() ([]spannerdb.Index, error) {
			s, err := spannerdb.ParseSchema(string(text))
			if err != nil {
				return nil, err
			}
			return s.Indexes, nil
		}
		read = func(name string) (*spannerdb.Table, error) {
			if t := tables[strings.ToLower(name)]; t != nil {
				return t, nil
			}
			return nil, fmt.Errorf("table %s is not in %s: %w", name, src.Schema, spannerdb.ErrTableNotFound)
		}
	} else {
		if j.offline {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, offlineTimeout)
			defer cancel()
		}
		c, err := spannerClient(ctx, src)
		if err != nil {
			return fmt.Errorf("source: %w%s", err, schemaHint)
		}
		defer c.Close()
		read = func(name string) (*spannerdb.Table, error) { return spannerdb.ReadTable(ctx, c, name) }
		indexes = func() ([]spannerdb.Index, error) {
			s, err := spannerdb.ReadSchema(ctx, endpointPath(src))
			if err != nil {
				return nil, err
			}
			return s.Indexes, nil
		}
	}
	t, err := read(src.Table)
	if err != nil {
		return schemaError("source", err)
	}
	sp := j.spannerSchemas()
	sp.Source = t
	sp.Children = map[string]*spannerdb.Table{}
	j.SourceKey = t.Key
	j.Spec.Children = map[string]string{}
	for _, name := range j.Config.Interleaved {
		ct, err := read(name)
		if err != nil {
			return schemaError("interleaved", err)
		}
		if !interleavedUnder(ct, src.Table, sp.Children) {
			return configErrorf("interleaved: table %s is not interleaved in %s", name, src.Table)
		}
		sp.Children[ct.Name] = ct
		j.Spec.Children[ct.Name] = ct.Key.Text()
	}
	all, err := indexes()
	if err != nil {
		// The data can move without them; the target then has none.
		sp.IndexNotes = append(sp.IndexNotes, fmt.Sprintf("the source's indexes could not be read (%v); the target gets none", err))
		return nil
	}
	for _, ix := range all {
		if strings.EqualFold(ix.Table, t.Name) || sp.Children[ix.Table] != nil || childByName(sp.Children, ix.Table) != nil {
			sp.SourceIndexes = append(sp.SourceIndexes, ix)
		}
	}
	return nil
}

// exportSchema reads the tables of an avro target's DDL file and keeps
// its indexes as the target's.
func (j *Job) exportSchema(path string) (func(name string) (*spannerdb.Table, error), error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, configErrorf("target.schema: %w", err)
	}
	s, err := spannerdb.ParseSchema(string(text))
	if err != nil {
		return nil, configErrorf("target.schema %s: %w", path, err)
	}
	j.spannerSchemas().TargetIndexes = s.Indexes
	return func(name string) (*spannerdb.Table, error) {
		for _, t := range s.Tables {
			if strings.EqualFold(t.Name, name) {
				return t, nil
			}
		}
		return nil, fmt.Errorf("%s has no table %s (give target.table, or a CREATE TABLE for it)", path, name)
	}, nil
}

// childByName finds a child table by name in any case.
func childByName(children map[string]*spannerdb.Table, name string) *spannerdb.Table {
	for n, t := range children {
		if strings.EqualFold(n, name) {
			return t
		}
	}
	return nil
}

// schemaHint says how to do without the source database.
const schemaHint = "; to resolve the job without the database, give its DDL as source.schema: FILE (the output of `gcloud spanner databases ddl describe`)"

// offlineTimeout bounds each schema read of a job resolved for a runner
// that only translates it (Options.TranslateOnly).
const offlineTimeout = 10 * time.Second

// schemaError labels an error reading a table's schema: a table that does
// not exist is the config's fault, anything else (no connection, no
// credentials) an operation that failed.
func schemaError(what string, err error) error {
	if errors.Is(err, spannerdb.ErrTableNotFound) {
		return configErrorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w%s", what, err, schemaHint)
}

// interleavedUnder reports whether t's parent is root or one of the
// children already known (children are listed parents first).
func interleavedUnder(t *spannerdb.Table, root string, known map[string]*spannerdb.Table) bool {
	if strings.EqualFold(t.Parent, root) {
		return true
	}
	for name := range known {
		if strings.EqualFold(t.Parent, name) {
			return true
		}
	}
	return false
}

// resolveSpannerTarget works out the target tables: from the source
// schema under the new key (Spanner sources), or as they exist in the
// target database (other sources), whose key must then be the rewritten
// key.
func (j *Job) resolveSpannerTarget(ctx context.Context) error {
	tgt := j.Config.Target
	sp := j.spannerSchemas()
	if j.offline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, offlineTimeout)
		defer cancel()
	}
	// read is the target database's table name (nil: it does not exist).
	var read func(name string) (*spannerdb.Table, error)
	export := kindOf(tgt.Type).export
	var err error
	switch {
	case export:
		// A Spanner export: its tables are the source's under the new key,
		// or those of target.schema.
		if tgt.Schema != "" {
			if read, err = j.exportSchema(tgt.Schema); err != nil {
				return err
			}
		}
	default:
		c, cerr := spannerClient(ctx, tgt)
		switch {
		case cerr == nil:
			defer c.Close()
			read = func(name string) (*spannerdb.Table, error) { return spannerdb.ReadTable(ctx, c, name) }
		case j.offline:
			j.TargetUnread = cerr
		default:
			return cerr
		}
	}
	name := firstNonEmpty(tgt.Table, j.Spec.Table)
	var existing *spannerdb.Table
	if read != nil {
		existing, err = read(name)
		switch {
		case export && err != nil:
			return configErrorf("target.schema: %w", err)
		case err == nil, errors.Is(err, spannerdb.ErrTableNotFound):
		case databaseNotFound(err) && !j.offline:
			// Prepare creates it, with --create-target.
			sp.DatabaseMissing, read = true, nil
		case j.offline:
			j.TargetUnread, read = err, nil
		default:
			return fmt.Errorf("target: %w", err)
		}
	}
	var extra []spannerdb.Column
	if j.Config.KeepOriginalKey != "" {
		extra = append(extra, spannerdb.Column{Name: j.Config.KeepOriginalKey, Type: "STRING(MAX)"})
	}
	var main *spannerdb.Table
	switch {
	case existing != nil:
		sp.exists[strings.ToLower(name)] = true
		if existing.Key.String() != j.TargetKey.String() || !sameKeyTypes(existing, j) {
			return configErrorf("target table %s exists with (%s), but the rewrite gives (%s)", name, existing.Key.Text(), j.TargetKey.Text())
		}
		main = existing
	case sp.Source != nil:
		main = sp.Source.WithKey(j.TargetKey, extra)
		main.Name = name
		main.Key.Table = name
		main.Parent = "" // the target is a new root table
	case j.TargetUnread != nil:
		// Offline, from a file source: the table must exist already; the
		// job needs only its name and key.
		main = &spannerdb.Table{Name: name, Key: j.TargetKey}
		sp.exists[strings.ToLower(name)] = true
	default:
		return configErrorf("target table %s does not exist; create it first (rekey can derive it only from a Spanner source); its primary key must be (%s)", name, j.TargetKey.Text())
	}
	sp.Targets = []*spannerdb.Table{main}
	// Children, parents first, interleaved under their new parents.
	names := make([]string, 0, len(sp.Children))
	for n := range sp.Children {
		names = append(names, n)
	}
	sort.Slice(names, func(a, b int) bool { return depth(sp.Children, names[a]) < depth(sp.Children, names[b]) })
	for _, n := range names {
		ct := sp.Children[n]
		out := j.Children[n]
		t := ct.WithKey(out, extra)
		if strings.EqualFold(ct.Parent, sp.Source.Name) {
			t.Parent = main.Name
		}
		if read == nil {
			sp.Targets = append(sp.Targets, t)
			continue
		}
		if ex, err := read(t.Name); err == nil {
			if ex.Key.String() != out.String() {
				return configErrorf("target child table %s exists with %s, but the rewrite gives %s", t.Name, ex.Key, out)
			}
			sp.exists[strings.ToLower(t.Name)] = true
		}
		sp.Targets = append(sp.Targets, t)
	}
	j.TargetDDL = nil
	for _, t := range sp.Targets {
		j.TargetDDL = append(j.TargetDDL, t.CreateDDL(t.Name))
	}
	if !export || tgt.Schema == "" {
		j.targetIndexes() // target.schema gives an export's indexes
	}
	if export {
		// Only the indexes of the export's tables (target.schema may hold
		// others).
		sp.TargetIndexes = slices.DeleteFunc(sp.TargetIndexes, func(ix spannerdb.Index) bool {
			return !slices.ContainsFunc(sp.Targets, func(t *spannerdb.Table) bool { return strings.EqualFold(t.Name, ix.Table) })
		})
		return nil
	}
	if read != nil && len(sp.TargetIndexes) > 0 {
		if s, err := spannerdb.ReadSchema(ctx, endpointPath(tgt)); err == nil {
			for _, ix := range s.Indexes {
				sp.indexes[strings.ToLower(ix.Name)] = true
			}
		}
	}
	return nil
}

// databaseNotFound reports a Spanner error saying the database does not
// exist.
func databaseNotFound(err error) bool {
	return spanner.ErrCode(err) == codes.NotFound && strings.Contains(err.Error(), "Database not found")
}

// targetIndexes carries the source's secondary indexes to the target
// tables: an index of the main table goes to the target table (a new
// root: one interleaved above it cannot follow and is left out), an
// index of a child table stays on it; an index interleaved in the main
// table (its parent) leads with the parent's key, which the rewrite
// changed, so those leading columns become the target's key columns.
// Every column must exist in the target table; an index that names one
// that does not is left out with a note. In the source's own database the
// names get the target table's name appended (index names are the
// database's).
func (j *Job) targetIndexes() {
	sp := j.Spanner
	if sp == nil || sp.Source == nil || len(sp.Targets) == 0 {
		return
	}
	main := sp.Targets[0]
	byName := map[string]*spannerdb.Table{}
	for _, t := range sp.Targets {
		byName[strings.ToLower(t.Name)] = t
	}
	sameDB := endpointPath(j.Config.Source) == endpointPath(j.Config.Target)
	sp.TargetIndexes = nil
	for _, ix := range sp.SourceIndexes {
		out := ix
		out.Columns = append([]spannerdb.IndexColumn(nil), ix.Columns...)
		target := byName[strings.ToLower(ix.Table)]
		if strings.EqualFold(ix.Table, sp.Source.Name) {
			target = main
		}
		if target == nil {
			continue
		}
		out.Table = target.Name
		switch {
		case ix.Interleave == "":
		case strings.EqualFold(ix.Interleave, sp.Source.Name):
			out.Interleave = main.Name
			out.Columns = leadWith(out.Columns, sp.Source.Key, main.Key)
		case target == main:
			sp.IndexNotes = append(sp.IndexNotes, fmt.Sprintf("index %s is interleaved in %s, above the migrated table; the target table is a new root: left out", ix.Name, ix.Interleave))
			continue
		}
		if missing := missingColumns(out, target); len(missing) > 0 {
			sp.IndexNotes = append(sp.IndexNotes, fmt.Sprintf("index %s names %s, which the target table %s does not have: left out", ix.Name, strings.Join(missing, ", "), target.Name))
			continue
		}
		if sameDB {
			out.Name = ix.Name + "_" + main.Name
		}
		sp.TargetIndexes = append(sp.TargetIndexes, out)
	}
}

// leadWith replaces the leading columns of cols that are the old parent
// key with the new parent key.
func leadWith(cols []spannerdb.IndexColumn, old, new rewrite.KeySchema) []spannerdb.IndexColumn {
	n := 0
	for n < len(cols) && n < len(old.Columns) && strings.EqualFold(cols[n].Name, old.Columns[n].Name) {
		n++
	}
	if n < len(old.Columns) {
		return cols // it does not lead with the parent key: Spanner refuses it anyway
	}
	out := make([]spannerdb.IndexColumn, 0, len(cols)-n+len(new.Columns))
	for _, c := range new.Columns {
		out = append(out, spannerdb.IndexColumn{Name: c.Name, Desc: c.Desc})
	}
	return append(out, cols[n:]...)
}

// missingColumns are the columns ix names that t lacks.
func missingColumns(ix spannerdb.Index, t *spannerdb.Table) []string {
	var missing []string
	for _, c := range ix.Columns {
		if t.Column(c.Name) == nil {
			missing = append(missing, c.Name)
		}
	}
	for _, c := range ix.Storing {
		if t.Column(c) == nil {
			missing = append(missing, c)
		}
	}
	return missing
}

func sameKeyTypes(t *spannerdb.Table, j *Job) bool {
	for i, c := range t.Key.Columns {
		if i >= len(j.TargetKey.Columns) || c.Type != j.TargetKey.Columns[i].Type {
			return false
		}
	}
	return true
}

func depth(children map[string]*spannerdb.Table, name string) int {
	d := 0
	for t := children[name]; t != nil && d < 16; t = children[t.Parent] {
		d++
	}
	return d
}
