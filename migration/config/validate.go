package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/rewrite"
)

// Validate reports every problem of the config at once: errors.Join of
// *FieldError, each with the path of the key at fault. The rewrite section
// is checked by rewrite.New, whose paths are prefixed with "rewrite.".
// Validate expects defaults to be filled in (Load does; see SetDefaults).
func (c *Config) Validate() error {
	var p problems
	c.validateEndpoint(&p, "source", c.Source)
	c.validateEndpoint(&p, "target", c.Target)
	c.validateSame(&p)
	c.validateEntityJSON(&p)
	c.validateExport(&p)
	schema, schemaOK := c.validateKey(&p)
	c.validateRewrite(&p, schema, schemaOK)
	c.validateOptions(&p, schema, schemaOK)
	c.validateWrite(&p)
	c.validateRetry(&p)
	c.validateRamp(&p)
	c.validateCohort(&p, schema, schemaOK)
	return errors.Join(p...)
}

type problems []error

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// enum checks that v is one of allowed.
func (p *problems) enum(path, v string, allowed ...string) bool {
	if slices.Contains(allowed, v) {
		return true
	}
	if v == "" {
		p.add(path, "required: one of %s", strings.Join(allowed, ", "))
	} else {
		p.add(path, "must be one of %s, got %q", strings.Join(allowed, ", "), v)
	}
	return false
}

var (
	// Spanner instance ids: 2-64 characters.
	instanceRE = regexp.MustCompile(`^[a-z][-a-z0-9]{0,62}[a-z0-9]$`)
	// Spanner database ids: 2-30 characters.
	spannerDatabaseRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,28}[a-z0-9]$`)
	// Firestore (Datastore mode) database ids: 4-63 characters.
	datastoreDatabaseRE = regexp.MustCompile(`^[a-z][a-z0-9-]{2,61}[a-z0-9]$`)
	// Spanner identifiers (tables, columns), up to 128 characters.
	identRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,127}$`)
)

// fieldUse says which endpoint types use a field; source/target restrict
// it to one role.
type fieldUse struct {
	key        string
	value      func(Endpoint) bool
	types      []string
	sourceOnly bool
	hint       string
}

var endpointFields = []fieldUse{
	{key: "project", value: func(e Endpoint) bool { return e.Project != "" }, types: []string{TypeSpanner, TypeDatastore, TypeEntityJSON}},
	{key: "instance", value: func(e Endpoint) bool { return e.Instance != "" }, types: []string{TypeSpanner}},
	{key: "database", value: func(e Endpoint) bool { return e.Database != "" }, types: []string{TypeSpanner, TypeDatastore}},
	// A file's table names the table of its rows (Spanner-shaped records).
	{key: "table", value: func(e Endpoint) bool { return e.Table != "" }, types: []string{TypeSpanner, TypeJSONL, TypeCSV, TypeAvro}},
	{key: "filter", value: func(e Endpoint) bool { return e.Filter != "" }, types: []string{TypeSpanner}, sourceOnly: true},
	{key: "key", value: func(e Endpoint) bool { return e.Key != "" }, types: Types, sourceOnly: true,
		hint: "; the target key is source.key rewritten"},
	{key: "namespace", value: func(e Endpoint) bool { return e.Namespace != "" }, types: []string{TypeDatastore}},
	{key: "kind", value: func(e Endpoint) bool { return e.Kind != "" }, types: []string{TypeDatastore}},
	{key: "path", value: func(e Endpoint) bool { return e.Path != "" }, types: []string{TypeJSONL, TypeCSV, TypeAvro, TypeEntityJSON}},
	{key: "delimiter", value: func(e Endpoint) bool { return e.Delimiter != "" }, types: []string{TypeCSV}},
	{key: "schema", value: func(e Endpoint) bool { return e.Schema != "" }, types: []string{TypeSpanner, TypeAvro}},
	{key: "read_time", value: func(e Endpoint) bool { return e.ReadTime != "" }, types: []string{TypeDatastore, TypeSpanner}, sourceOnly: true},
}

func (c *Config) validateEndpoint(p *problems, role string, e Endpoint) {
	if !p.enum(role+".type", e.Type, Enums[role+".type"]...) {
		return
	}
	what := fmt.Sprintf("a %s %s", e.Type, role)
	for _, f := range endpointFields {
		if !f.value(e) {
			continue
		}
		if f.sourceOnly && role != "source" {
			p.add(role+"."+f.key, "not used by a %s%s", role, f.hint)
		} else if !slices.Contains(f.types, e.Type) {
			p.add(role+"."+f.key, "not used by %s", what)
		}
	}
	required := func(key, v string) bool {
		if strings.TrimSpace(v) == "" {
			p.add(role+"."+key, "required for %s", what)
			return false
		}
		return true
	}
	if e.Schema != "" && role == "target" && e.Type == TypeSpanner {
		p.add(role+".schema", "not used by a spanner target: its tables are derived from the source's")
	}
	if e.Schema != "" && role == "source" && e.Type == TypeAvro {
		p.add(role+".schema", "not used by an avro source: its files carry their schema")
	}
	if e.Schema != "" && (role == "source" && e.Type == TypeSpanner || role == "target" && e.Type == TypeAvro) {
		if strings.Contains(e.Schema, "://") {
			p.add(role+".schema", "must be a local file (rekey reads it before the pipeline starts), got %q", e.Schema)
		} else if _, err := os.Stat(e.Schema); err != nil {
			p.add(role+".schema", "cannot read the DDL file: %v", err)
		}
	}
	if e.ReadTime != "" && role == "source" && (e.Type == TypeDatastore || e.Type == TypeSpanner) {
		if t, _, err := c.SourceReadTime(time.Now()); err != nil {
			p.add(role+".read_time", "%v", err)
		} else if t.After(time.Now().Add(time.Minute)) {
			p.add(role+".read_time", "%s is in the future", e.ReadTime)
		}
	}
	switch e.Type {
	case TypeSpanner:
		required("project", e.Project)
		if required("instance", e.Instance) && !instanceRE.MatchString(e.Instance) {
			p.add(role+".instance", "must be 2-64 lowercase letters, digits or hyphens, starting with a letter and not ending with a hyphen, got %q", e.Instance)
		}
		if required("database", e.Database) && !spannerDatabaseRE.MatchString(e.Database) {
			p.add(role+".database", "must be 2-30 lowercase letters, digits, underscores or hyphens, starting with a letter and not ending with _ or -, got %q", e.Database)
		}
		if required("table", e.Table) {
			checkTableName(p, role+".table", e.Table)
		}
		for i, col := range e.Columns {
			checkIdent(p, fmt.Sprintf("%s.columns[%d]", role, i), col)
		}
	case TypeDatastore:
		required("project", e.Project)
		if e.Database != "" && e.Database != "(default)" && !datastoreDatabaseRE.MatchString(e.Database) {
			p.add(role+".database", "must be empty or (default) for the default database, or 4-63 lowercase letters, digits or hyphens, starting with a letter and ending with a letter or digit, got %q", e.Database)
		}
		if required("kind", e.Kind) && strings.HasPrefix(e.Kind, "__") {
			p.add(role+".kind", "kinds starting with __ are reserved by Datastore, got %q", e.Kind)
		}
		if strings.HasPrefix(e.Namespace, "__") && strings.HasSuffix(e.Namespace, "__") {
			p.add(role+".namespace", "namespaces matching __*__ are reserved by Datastore, got %q", e.Namespace)
		}
	default: // files
		if required("path", e.Path) {
			checkPath(p, role+".path", e.Path)
		}
		if e.Type == TypeCSV {
			if d := []rune(e.Delimiter); len(d) != 1 || d[0] == '"' || d[0] == '\r' || d[0] == '\n' {
				p.add(role+".delimiter", "must be one character other than a quote or a line break, got %q", e.Delimiter)
			}
		}
	}
	for i, col := range e.Columns {
		if strings.TrimSpace(col) == "" {
			p.add(fmt.Sprintf("%s.columns[%d]", role, i), "must not be empty")
		}
	}
	if i, j, ok := duplicate(e.Columns, true); ok {
		p.add(fmt.Sprintf("%s.columns[%d]", role, j), "%q is listed twice (also columns[%d])", e.Columns[j], i)
	}
}

// validateSame refuses a target that is the source itself: a source read
// while it is being rewritten would see its own rewritten rows.
func (c *Config) validateSame(p *problems) {
	s, t := c.Source, c.Target
	if s.Type != t.Type {
		return
	}
	switch s.Type {
	case TypeSpanner:
		if s.Project == t.Project && s.Instance == t.Instance && s.Database == t.Database && strings.EqualFold(s.Table, t.Table) && s.Table != "" {
			p.add("target.table", "is the source table %q in the same database; write the rewritten rows to a new table", t.Table)
		}
	case TypeDatastore:
		sameDB := s.Database == t.Database || (s.Database == "" || s.Database == "(default)") && (t.Database == "" || t.Database == "(default)")
		if s.Project == t.Project && sameDB && s.Namespace == t.Namespace && s.Kind == t.Kind && s.Kind != "" {
			p.add("target.kind", "is the source kind %q in the same database and namespace; write to another kind, namespace or database", t.Kind)
		}
	default:
		if s.Path == t.Path && s.Path != "" {
			p.add("target.path", "is the source path %q; write to another path", t.Path)
		}
	}
}

// holdsEntities reports whether endpoints of type t hold Datastore
// entities only.
func holdsEntities(t string) bool { return t == TypeDatastore || t == TypeEntityJSON }

// validateEntityJSON refuses an entity-json target fed with rows: it
// holds entities, so the source must give entities (datastore,
// entity-json, or jsonl records with a __key__ and no source.key).
func (c *Config) validateEntityJSON(p *problems) {
	if c.Target.Type != TypeEntityJSON {
		return
	}
	switch c.Source.Type {
	case TypeSpanner, TypeCSV, TypeAvro:
		p.add("target.type", "entity-json holds Datastore entities, which a %s source does not give (its records are rows); use a datastore, entity-json or jsonl source", c.Source.Type)
	}
}

// validateExport checks an avro target, a Spanner export: it holds
// rows, whose table comes from a spanner source's schema or from
// target.schema; csv is a source format only.
func (c *Config) validateExport(p *problems) {
	switch c.Target.Type {
	case TypeCSV:
		p.add("target.type", "csv is read, not written; write jsonl, or avro (a Spanner export)")
	case TypeAvro:
		switch {
		case holdsEntities(c.Source.Type):
			p.add("target.type", "avro is a Spanner export and holds rows, which a %s source does not give (its records are entities)", c.Source.Type)
		case c.Source.Type != TypeSpanner && c.Target.Schema == "":
			p.add("target.schema", "required for an avro target fed by a %s source: the DDL of the export's table (CREATE TABLE with the rewritten primary key), as `gcloud spanner databases ddl describe` prints it; from a spanner source rekey derives it", c.Source.Type)
		}
	}
}

// validateKey checks source.key; it returns the parsed schema and whether
// one is available.
func (c *Config) validateKey(p *problems) (rewrite.KeySchema, bool) {
	schema, ok, err := c.SourceKey()
	if err != nil {
		p.add("source.key", "%v", err)
		return schema, false
	}
	validSource := slices.Contains(Types, c.Source.Type)
	if !ok && c.Source.Type == TypeSpanner && c.Source.Schema != "" {
		// The source table's key from its DDL file, as run reads it.
		return c.schemaFileKey(p)
	}
	if !ok {
		if (c.Target.Type == TypeSpanner || c.Target.Type == TypeAvro && !holdsEntities(c.Source.Type)) && validSource && c.Source.Type != TypeSpanner {
			p.add("source.key", "required for a %s source going to a %s target: the key columns of each record as Spanner DDL, e.g. \"UserId STRING(36), LastAccess TIMESTAMP\"", c.Source.Type, c.Target.Type)
		}
		return schema, false
	}
	if c.Source.Type != TypeSpanner && c.Target.Type != TypeSpanner && validSource && (holdsEntities(c.Source.Type) || holdsEntities(c.Target.Type)) {
		p.add("source.key", "used only for rows: with a spanner source or target, or between files")
	}
	if len(c.Source.Columns) > 0 {
		for _, col := range schema.Columns {
			if !slices.ContainsFunc(c.Source.Columns, func(s string) bool { return strings.EqualFold(s, col.Name) }) {
				p.add("source.columns", "must include the key column %s (from source.key)", col.Name)
			}
		}
	}
	return schema, true
}

// schemaFileKey returns the key of the source table as source.schema
// declares it, reporting a table that is not there.
func (c *Config) schemaFileKey(p *problems) (rewrite.KeySchema, bool) {
	text, err := os.ReadFile(c.Source.Schema)
	if err != nil || strings.TrimSpace(c.Source.Table) == "" {
		return rewrite.KeySchema{}, false // reported by validateEndpoint
	}
	tables, err := spannerdb.ParseDDL(string(text))
	if err != nil {
		p.add("source.schema", "%s: %v", c.Source.Schema, err)
		return rewrite.KeySchema{}, false
	}
	t := tables[strings.ToLower(c.Source.Table)]
	if t == nil {
		p.add("source.table", "table %s is not in source.schema %s", c.Source.Table, c.Source.Schema)
		return rewrite.KeySchema{}, false
	}
	key := t.Key.Clone()
	if key.Table == "" {
		key.Table = t.Name
	}
	return key, true
}

// rewriteStore is the store whose keys the rewrite produces: the target's,
// else the source's when the target is a file; "" when neither is a store.
func (c *Config) rewriteStore() (store, role string) {
	for _, e := range []struct {
		role string
		e    Endpoint
	}{{"target", c.Target}, {"source", c.Source}} {
		if e.e.Type == TypeSpanner || e.e.Type == TypeDatastore {
			return e.e.Type, e.role
		}
		if e.e.Type == TypeEntityJSON {
			return TypeDatastore, e.role // its keys are Datastore keys
		}
		if e.e.Type == TypeAvro && e.role == "target" {
			return TypeSpanner, e.role // a Spanner export
		}
	}
	return "", ""
}

func (c *Config) validateRewrite(p *problems, schema rewrite.KeySchema, schemaOK bool) {
	if strings.TrimSpace(c.Rewrite.Strategy) == "" {
		names := make([]string, 0)
		for _, i := range rewrite.Strategies() {
			names = append(names, i.Name)
		}
		p.add("rewrite.strategy", "required: one of %s", strings.Join(names, ", "))
		return
	}
	store, role := c.rewriteStore()
	supported := store == "" || c.checkSupport(p, "rewrite.", c.Rewrite, store, role)
	s, err := rewrite.New(c.Rewrite.Step())
	if err != nil {
		for _, e := range leaves(err) {
			var pe *rewrite.ParamError
			if errors.As(e, &pe) {
				p.add("rewrite."+pe.Path, "%s", pe.Msg)
			} else {
				p.add("rewrite", "%v", e)
			}
		}
		return
	}
	if !supported {
		return
	}
	switch store {
	case TypeSpanner, "":
		// Rows: a Spanner table's, or records between files keyed by
		// source.key; the rewrite must find the key columns it names.
		if schemaOK {
			if schema.Table == "" {
				schema.Table = c.keyTableName()
			}
			if _, err := s.Spanner(schema); err != nil {
				what := fmt.Sprintf("source.key %q", c.Source.Key)
				if c.Source.Key == "" {
					what = fmt.Sprintf("the key of table %s in source.schema %s", schema.Table, c.Source.Schema)
				}
				p.add("rewrite", "does not apply to %s: %v", what, err)
			}
		}
	case TypeDatastore:
		if _, err := s.Datastore(); err != nil {
			p.add("rewrite", "%v", err)
		}
	}
}

// keyTableName names the table of source.key when the config names none
// (records between files): the source file's name without its extension.
func (c *Config) keyTableName() string {
	name := path.Base(filepath.ToSlash(c.Source.Path))
	if i := strings.IndexByte(name, '.'); i > 0 {
		name = name[:i]
	}
	if name == "" || name == "." || name == "/" {
		return "(source)"
	}
	return name
}

// checkSupport reports the strategies of r (a chain's steps one by one)
// that cannot rewrite keys of store, at path+"strategy". It works from the
// strategies' descriptions, so it also reports on a rewrite whose
// parameters are wrong.
func (c *Config) checkSupport(p *problems, path string, r RewriteConfig, store, role string) bool {
	name := strings.ToLower(strings.TrimSpace(r.Strategy))
	if name == "chain" {
		ok := true
		for i, st := range r.Steps {
			ok = c.checkSupport(p, fmt.Sprintf("%ssteps[%d].", path, i), st, store, role) && ok
		}
		return ok
	}
	i := slices.IndexFunc(rewrite.Strategies(), func(info rewrite.Info) bool { return info.Name == name })
	if i < 0 {
		return true // unknown: rewrite.New reports it
	}
	info := rewrite.Strategies()[i]
	if store == TypeSpanner && info.Spanner || store == TypeDatastore && info.Datastore {
		return true
	}
	msg := fmt.Sprintf("%s does not support a %s %s", name, store, role)
	if s, err := rewrite.New(r.Step()); err == nil {
		// The strategy's own error says what to use instead.
		if store == TypeSpanner {
			_, err = s.Spanner(rewrite.KeySchema{})
		} else {
			_, err = s.Datastore()
		}
		if err != nil {
			msg += " (" + err.Error() + ")"
		}
	}
	p.add(path+"strategy", "%s", msg)
	return false
}

// leaves flattens a tree of errors.Join.
func leaves(err error) []error {
	if m, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range m.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}

func (c *Config) validateOptions(p *problems, schema rewrite.KeySchema, schemaOK bool) {
	p.enum("ancestors", c.Ancestors, Enums["ancestors"]...)

	if len(c.References) > 0 && c.Target.Type != TypeDatastore && slices.Contains(Types, c.Target.Type) {
		p.add("references", "only for a datastore target, not %s", c.Target.Type)
	}
	for i, r := range c.References {
		if strings.TrimSpace(r) == "" {
			p.add(fmt.Sprintf("references[%d]", i), "must not be empty")
		}
	}
	if i, j, ok := duplicate(c.References, false); ok {
		p.add(fmt.Sprintf("references[%d]", j), "%q is listed twice (also references[%d])", c.References[j], i)
	}

	if k := c.KeepOriginalKey; k != "" {
		switch c.Target.Type {
		case TypeSpanner:
			checkIdent(p, "keep_original_key", k)
			if schemaOK && schema.Index(k) >= 0 {
				p.add("keep_original_key", "%q is a key column of the source; choose a new column name", k)
			}
		case TypeDatastore:
			if strings.HasPrefix(k, "__") && strings.HasSuffix(k, "__") {
				p.add("keep_original_key", "property names matching __*__ are reserved by Datastore, got %q", k)
			}
			if slices.Contains(c.References, k) {
				p.add("keep_original_key", "%q is also listed in references", k)
			}
		}
	}

	kinds, kindsKey := c.Descendants, "descendants"
	tables := c.Interleaved
	if c.Source.Type == TypeDatastore && len(c.Descendants) == 0 {
		kinds, kindsKey, tables = c.Interleaved, "interleaved", nil // the older name
	}
	if len(c.Descendants) > 0 && c.Source.Type != TypeDatastore {
		p.add("descendants", "only for a datastore source (descendant kinds)")
	}
	if len(tables) > 0 && (c.Source.Type != TypeSpanner || c.Target.Type != TypeSpanner && c.Target.Type != TypeAvro) {
		if c.Source.Type == TypeDatastore {
			p.add("interleaved", "not with descendants: the descendant kinds of a datastore source go in descendants")
		} else {
			p.add("interleaved", "only for a spanner source with a spanner or avro target (child tables) or a datastore source (descendant kinds)")
		}
	}
	for i, t := range tables {
		path := fmt.Sprintf("interleaved[%d]", i)
		checkTableName(p, path, t)
		if strings.EqualFold(t, c.Source.Table) {
			p.add(path, "%q is the source table itself", t)
		}
	}
	if i, j, ok := duplicate(tables, true); ok {
		p.add(fmt.Sprintf("interleaved[%d]", j), "%q is listed twice (also interleaved[%d])", tables[j], i)
	}
	if c.Source.Type == TypeDatastore {
		for i, t := range kinds {
			path := fmt.Sprintf("%s[%d]", kindsKey, i)
			if strings.Contains(t, "/") || t == "" {
				p.add(path, "%q is not a kind name", t)
			}
			if t == c.Source.Kind {
				p.add(path, "%q is the source kind itself", t)
			}
		}
		if i, j, ok := duplicate(kinds, true); ok {
			p.add(fmt.Sprintf("%s[%d]", kindsKey, j), "%q is listed twice (also %s[%d])", kinds[j], kindsKey, i)
		}
	}

	for i, r := range c.ReferencesTo {
		path := fmt.Sprintf("references_to[%d]", i)
		if c.Target.Type != TypeDatastore {
			p.add(path, "only for a datastore target")
		}
		if r.Property == "" {
			p.add(path+".property", "required")
		} else if slices.Contains(c.References, r.Property) {
			p.add(path+".property", "%q is also listed in references", r.Property)
		}
		switch {
		case r.Config != "" && r.Rewrite.Strategy != "":
			p.add(path, "give rewrite or config, not both")
		case r.Config == "" && r.Rewrite.Strategy == "":
			p.add(path, "give the rewrite the kind got (rewrite: {strategy: ...}) or the config that migrated it (config: FILE)")
		case r.Config == "" && r.Kind == "":
			p.add(path+".kind", "required with rewrite")
		}
	}

	if c.DeadLetter != "" {
		checkPath(p, "dead_letter", c.DeadLetter)
	}
}

func (c *Config) validateWrite(p *problems) {
	w := c.Write
	p.enum("write.mode", w.Mode, Enums["write.mode"]...)
	p.enum("write.shuffle", w.Shuffle, Enums["write.shuffle"]...)
	p.enum("write.indexes", w.Indexes, Enums["write.indexes"]...)
	positive := func(key string, v int) bool {
		if v <= 0 {
			p.add("write."+key, "must be > 0, got %d", v)
			return false
		}
		return true
	}
	atMost := func(key string, v, limit int, why string) {
		if v > limit {
			p.add("write."+key, "must be at most %d (%s), got %d", limit, why, v)
		}
	}
	okM := positive("batch_mutations", w.BatchMutations)
	okB := positive("batch_bytes", w.BatchBytes)
	okR := positive("batch_rows", w.BatchRows)
	if positive("shards", w.Shards) {
		atMost("shards", w.Shards, MaxWriteShards, "more shard keys only add per-element cost")
	}
	if positive("buffer", w.Buffer) {
		atMost("buffer", w.Buffer, MaxWriteBuffer, "a worker holds the whole buffer in memory")
		if okR && w.Buffer < w.BatchRows {
			p.add("write.buffer", "must be at least write.batch_rows (%d): a commit's records are sorted together, got %d", w.BatchRows, w.Buffer)
		}
	}
	switch {
	case w.Parallelism < 0:
		p.add("write.parallelism", "must be >= 0, got %d", w.Parallelism)
	case c.Target.Type == TypeDatastore && w.Parallelism == 0:
		p.add("write.parallelism", "must be > 0 for a Datastore target, got 0")
	case c.Target.Type != TypeDatastore && c.Target.Type != TypeSpanner && w.Parallelism > 1:
		p.add("write.parallelism", "applies to Spanner and Datastore targets only, got %d", w.Parallelism)
	default:
		atMost("parallelism", w.Parallelism, MaxWriteParallelism, "commits in flight per worker")
	}
	switch c.Target.Type {
	case TypeSpanner:
		if okM {
			atMost("batch_mutations", w.BatchMutations, spannerdb.MaxCommitMutations, "Spanner's limit of mutations per commit")
		}
		if okB {
			atMost("batch_bytes", w.BatchBytes, spannerdb.MaxCommitBytes, "100 MiB, Spanner's limit per commit")
		}
	case TypeDatastore:
		if okM {
			atMost("batch_mutations", w.BatchMutations, datastoredb.MaxCommitEntities, "Datastore's limit of entities per commit")
		}
		if okR {
			atMost("batch_rows", w.BatchRows, datastoredb.MaxCommitEntities, "Datastore's limit of entities per commit")
		}
		if okB {
			atMost("batch_bytes", w.BatchBytes, datastoredb.MaxCommitBytes, "10 MiB, Datastore's limit per request")
		}
	}
}

func (c *Config) validateRetry(p *problems) {
	r := c.Write.Retry
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"initial_backoff", r.InitialBackoff}, {"max_backoff", r.MaxBackoff},
		{"commit_deadline", r.CommitDeadline}, {"max_cumulative_backoff", r.MaxCumulativeBackoff},
	} {
		if d.v < 0 {
			p.add("write.retry."+d.key, "must be a positive duration, got %s", d.v)
		}
	}
	if r.InitialBackoff > 0 && r.MaxBackoff > 0 && r.InitialBackoff > r.MaxBackoff {
		p.add("write.retry.initial_backoff", "must be at most write.retry.max_backoff (%s), got %s", r.MaxBackoff, r.InitialBackoff)
	}
	a := c.Write.AdaptiveThrottle
	if math.IsNaN(a.K) || a.K < 1 {
		p.add("write.adaptive_throttle.k", "must be at least 1 (at 1 the throttle sheds as soon as anything fails; the default is %g), got %g", DefaultAdaptiveK, a.K)
	}
	if a.Window < time.Second {
		p.add("write.adaptive_throttle.window", "must be at least 1s, got %s", a.Window)
	}
}

// maxRampRun and rampRunChars bound ramp.run, a key in the lease table
// or kind.
const maxRampRun = 100

var rampRunChars = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

func (c *Config) validateRamp(p *problems) {
	r := c.Ramp
	if !p.enum("ramp.profile", r.Profile, Enums["ramp.profile"]...) {
		return
	}
	params := []struct {
		key string
		v   float64
		min float64
		doc string
	}{
		{"base", r.Base, 0, "writes per second at the start"},
		{"growth", r.Growth, 1, "the rate is multiplied by it every interval"},
		{"interval_seconds", r.IntervalSeconds, 0, "seconds between increases"},
	}
	switch {
	case r.Run == "":
	case r.Profile == RampNone:
		p.add("ramp.run", "set to %q but ramp.profile is none; a shared run needs a ramp-up (datastore, gcs or custom)", r.Run)
	case len(r.Run) > maxRampRun || !rampRunChars.MatchString(r.Run):
		p.add("ramp.run", "%q: use letters, digits, '.', '_' and '-', at most %d", r.Run, maxRampRun)
	}
	for _, q := range params {
		path := "ramp." + q.key
		switch {
		case r.Profile == RampNone:
			if q.v != 0 {
				p.add(path, "set to %g but ramp.profile is none; choose a profile (datastore, gcs or custom)", q.v)
			}
		case math.IsNaN(q.v) || math.IsInf(q.v, 0):
			p.add(path, "must be a finite number, got %g", q.v)
		case q.min == 0 && q.v <= 0:
			if q.v == 0 && r.Profile == RampCustom {
				p.add(path, "required for the custom profile (%s)", q.doc)
			} else {
				p.add(path, "must be > 0 (%s), got %g", q.doc, q.v)
			}
		case q.min > 0 && q.v < q.min:
			if q.v == 0 && r.Profile == RampCustom {
				p.add(path, "required for the custom profile (%s)", q.doc)
			} else {
				p.add(path, "must be >= %g (%s), got %g", q.min, q.doc, q.v)
			}
		}
	}
}

func (c *Config) validateCohort(p *problems, schema rewrite.KeySchema, schemaOK bool) {
	if b := c.Cohort.Buckets; b < 1 || b > cohort.MaxBuckets {
		p.add("cohort.buckets", "must be 1..%d, got %d", cohort.MaxBuckets, b)
	}
	if c.Cohort.CacheTTL < 0 {
		p.add("cohort.cache_ttl", "must not be negative, got %s", c.Cohort.CacheTTL)
	}
	if c.Cohort.Skew < 0 {
		p.add("cohort.skew", "must not be negative, got %s", c.Cohort.Skew)
	}
	u, ok, err := c.Cohort.UserSpec()
	if err != nil {
		p.add("cohort.user", "%v", err)
	}
	if !ok {
		return
	}
	if u.From == cohort.FromKey || u.From == cohort.FromRef {
		switch c.Source.Type {
		case TypeSpanner, TypeCSV, TypeAvro:
			p.add("cohort.user", "%s reads a Datastore key, which the rows of a %s source do not have; name the column that holds the user id", u, c.Source.Type)
		}
	}
	if u.From == cohort.FromKey {
		return
	}
	if c.Source.Type == TypeSpanner {
		checkIdent(p, "cohort.user", u.Name)
		if i := schema.Index(u.Name); schemaOK && i >= 0 {
			if _, err := cohort.SQLExpr(u, schema.Columns[i].Type); err != nil {
				p.add("cohort.user", "%s is a %s key column (source.key); a user id must be STRING, INT64 or BYTES", u.Name, schema.Columns[i].Type)
			}
		}
	}
	if len(c.Source.Columns) > 0 && !slices.ContainsFunc(c.Source.Columns, func(s string) bool { return strings.EqualFold(s, u.Name) }) {
		p.add("cohort.user", "%s is not among source.columns, so the records would not have it", u.Name)
	}
}

func checkIdent(p *problems, path, s string) {
	if s != "" && !identRE.MatchString(s) {
		p.add(path, "must be a Spanner identifier (a letter, then up to 127 letters, digits or underscores), got %q", s)
	}
}

// checkTableName accepts a table name, optionally in a named schema
// ("schema.Table").
func checkTableName(p *problems, path, s string) {
	parts := strings.Split(s, ".")
	if len(parts) > 2 || !identRE.MatchString(parts[0]) || !identRE.MatchString(parts[len(parts)-1]) {
		p.add(path, "must be a Spanner table name (a letter, then letters, digits or underscores, optionally schema.Table), got %q", s)
	}
}

// checkPath accepts a local path or gs://bucket[/object].
func checkPath(p *problems, path, s string) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return
	}
	if scheme != "gs" {
		p.add(path, "unsupported scheme %q in %q (want a local path or gs://bucket/...)", scheme, s)
		return
	}
	if bucket, _, _ := strings.Cut(rest, "/"); bucket == "" {
		p.add(path, "missing bucket name in %q (want gs://bucket/...)", s)
	}
}

// duplicate returns the first repeated entry of list: i < j with the same
// value (compared case-insensitively when fold is set).
func duplicate(list []string, fold bool) (i, j int, ok bool) {
	seen := map[string]int{}
	for j, s := range list {
		if s == "" {
			continue
		}
		k := s
		if fold {
			k = strings.ToLower(s)
		}
		if i, dup := seen[k]; dup {
			return i, j, true
		}
		seen[k] = j
	}
	return 0, 0, false
}

// ValidateRemote reports the paths remote workers (Dataflow's, or a job
// server's in other processes) cannot read or write: every file path of
// the config must be a gs:// path, since the workers do not see the
// launching machine's disk. The dead-letter path must be given (its
// default is a local file). sharedDisk adds that --shared-disk allows
// local paths (not on Dataflow).
func (c *Config) ValidateRemote(sharedDisk bool) error {
	var p problems
	local := func(path, s string) {
		if !strings.HasPrefix(s, "gs://") {
			p.add(path, "%q %s (or override it with REKEY_%s)", s, RemoteHint(sharedDisk), strings.ToUpper(strings.ReplaceAll(path, ".", "_")))
		}
	}
	for _, e := range []struct {
		path string
		ep   Endpoint
	}{{"source.path", c.Source}, {"target.path", c.Target}} {
		if e.ep.IsFile() {
			local(e.path, e.ep.Path)
		}
	}
	if c.DeadLetter == "" {
		p.add("dead_letter", "required for workers on other machines (a gs://bucket/... path; the default is a local file)")
	} else {
		local("dead_letter", c.DeadLetter)
	}
	return errors.Join(p...)
}

// RemoteHint says why a local path is refused for workers that may not
// see this machine's disk, and what to give instead.
func RemoteHint(sharedDisk bool) string {
	s := "is a local path, which workers on other machines cannot read or write; give a gs://bucket/... path"
	if sharedDisk {
		s += ", or pass --shared-disk if every worker sees this machine's files at the same paths"
	}
	return s
}
