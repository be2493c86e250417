package migration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/config"
	"github.com/rekeyio/rekey/internal/spannerdb"
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
		j.Spanner = &SpannerSchemas{exists: map[string]bool{}}
	}
	return j.Spanner
}

// resolveSpannerSource reads the source table's schema and those of its
// interleaved children named in the config: from the DDL file of
// source.schema if given, else from the database.
func (j *Job) resolveSpannerSource(ctx context.Context) error {
	src := j.Config.Source
	var read func(name string) (*spannerdb.Table, error)
	if src.Schema != "" {
		text, err := os.ReadFile(src.Schema)
		if err != nil {
			return configErrorf("source.schema: %w", err)
		}
		tables, err := spannerdb.ParseDDL(string(text))
		if err != nil {
			return configErrorf("source.schema %s: %w", src.Schema, err)
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
	c, err := spannerClient(ctx, tgt)
	switch {
	case err == nil:
		defer c.Close()
		read = func(name string) (*spannerdb.Table, error) { return spannerdb.ReadTable(ctx, c, name) }
	case j.offline:
		j.TargetUnread = err
	default:
		return err
	}
	name := firstNonEmpty(tgt.Table, j.Spec.Table)
	var existing *spannerdb.Table
	if read != nil {
		existing, err = read(name)
		switch {
		case err == nil, errors.Is(err, spannerdb.ErrTableNotFound):
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
	return nil
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
