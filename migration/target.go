package migration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/write/retry"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/rewrite"
)

// ManifestTable (Spanner) and ManifestKind (Datastore) hold, per target
// table or kind, the rewrite spec a migration wrote it with. A re-run with
// a different spec is refused (unless forced) instead of mixing two key
// schemes in one table.
const (
	ManifestTable = "RekeyManifest"
	ManifestKind  = "RekeyManifest"
)

const manifestDDL = `CREATE TABLE RekeyManifest (
  Target STRING(MAX) NOT NULL,
  Spec STRING(MAX) NOT NULL,
  UpdatedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp=true)
) PRIMARY KEY (Target)`

// ManifestSpec is the text recorded in the target's manifest: the
// canonical strategy spec and the keys before and after.
func (j *Job) ManifestSpec() string {
	st, err := rewrite.New(j.Spec.Strategy)
	spec := j.Spec.Strategy.Strategy
	if err == nil {
		spec = st.Spec().String()
	}
	out := "strategy " + spec
	if len(j.SourceKey.Columns) > 0 {
		out += "; key " + "(" + j.SourceKey.Text() + ")"
	}
	if len(j.TargetKey.Columns) > 0 {
		out += " -> " + "(" + j.TargetKey.Text() + ")"
	}
	return out
}

// MissingDDL is the part of TargetDDL whose tables do not exist yet: what
// Prepare runs with CreateTarget (and a dry run shows).
func (j *Job) MissingDDL() []string {
	if j.Spanner == nil {
		return nil
	}
	var missing []string
	for i, t := range j.Spanner.Targets {
		if i < len(j.TargetDDL) && !j.Spanner.exists[strings.ToLower(t.Name)] {
			missing = append(missing, j.TargetDDL[i])
		}
	}
	return missing
}

// IndexDDL creates the target's secondary indexes that do not exist yet
// (see SpannerSchemas.TargetIndexes), unless write.indexes is none.
func (j *Job) IndexDDL() []string {
	if j.Spanner == nil || j.Config.Write.Indexes == config.IndexesNone {
		return nil
	}
	var out []string
	for _, ix := range j.Spanner.TargetIndexes {
		if !j.Spanner.indexes[strings.ToLower(ix.Name)] {
			out = append(out, ix.DDL())
		}
	}
	return out
}

// indexesAfter reports whether the indexes are created after the load.
func (j *Job) indexesAfter() bool { return j.Config.Write.Indexes != config.IndexesBefore }

// DDLText is the DDL Prepare runs with --create-target: the missing
// tables (and database), and the missing indexes, saying when, each part
// under a comment (header heads the tables'); "" when there is none.
func (j *Job) DDLText(header string) string {
	var w strings.Builder
	j.writeDDL(&w, header)
	return w.String()
}

func (j *Job) writeDDL(w *strings.Builder, header string) {
	if j.Spanner == nil {
		return
	}
	indexes := j.IndexDDL()
	if kindOf(j.Config.Target.Type).export {
		fmt.Fprintf(w, "-- the tables of the Spanner export in %s, which `gcloud spanner databases import` creates\n%s;\n", j.Config.Target.Path, strings.Join(j.TargetDDL, ";\n\n"))
		if len(indexes) > 0 {
			fmt.Fprintf(w, "-- secondary indexes, in the export's schemas (the import creates them after the data)\n%s;\n", strings.Join(indexes, ";\n"))
		}
		return
	}
	tables := j.MissingDDL()
	if len(tables) > 0 || j.Spanner.DatabaseMissing {
		db := endpointPath(j.Config.Target)
		if j.Spanner.DatabaseMissing {
			db += ", a new database"
		}
		fmt.Fprintf(w, "-- %s (%s)\n%s;\n", header, db, strings.Join(tables, ";\n\n"))
	}
	if len(indexes) > 0 {
		when := "after the load (write.indexes: after)"
		if !j.indexesAfter() {
			when = "with the tables, before the load (write.indexes: before)"
		}
		fmt.Fprintf(w, "-- secondary indexes, created %s\n%s;\n", when, strings.Join(indexes, ";\n"))
	}
	for _, n := range j.Spanner.IndexNotes {
		fmt.Fprintf(w, "-- note: %s\n", n)
	}
}

// CreateIndexesAfter creates the indexes left for after the load (see
// IndexDDL), saying so (o.Notes); nothing unless write.indexes is after and
// the job created its target (o.CreateTarget).
func (j *Job) CreateIndexesAfter(ctx context.Context, o Options) error {
	ddl := j.IndexDDL()
	if !o.CreateTarget || !j.indexesAfter() || len(ddl) == 0 || j.DryRun || o.TranslateOnly || !kindOf(j.Config.Target.Type).spannerDB() {
		return nil
	}
	admin, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		return fmt.Errorf("spanner admin: %w", err)
	}
	defer admin.Close()
	o.Notes.Say(CreatingIndexes{N: len(ddl)})
	start := time.Now()
	if err := updateDDL(ctx, admin, endpointPath(j.Config.Target), ddl); err != nil {
		return fmt.Errorf("creating the target's indexes (the data is written; a re-run of the same config creates them): %w", err)
	}
	for _, ix := range j.Spanner.TargetIndexes {
		j.Spanner.indexes[strings.ToLower(ix.Name)] = true
	}
	o.Notes.Say(IndexesCreated{Took: time.Since(start)})
	return nil
}

// sayDDL gives the DDL (DDLText) to o.Notes, if there is any.
func (j *Job) sayDDL(o Options, header string) {
	if ddl := j.DDLText(header); ddl != "" {
		o.Notes.Say(TargetDDL{Text: ddl})
	}
}

// Prepare shows (o.Notes) and with o.CreateTarget runs the target DDL, and checks
// and records the rewrite spec in the target's manifest.
func (j *Job) Prepare(ctx context.Context, o Options) error {
	if k := kindOf(j.Config.Target.Type); k.prepare != nil {
		return k.prepare(ctx, j, o)
	}
	return nil
}

func prepareSpanner(ctx context.Context, j *Job, o Options) error {
	tgt := j.Config.Target
	missing := j.MissingDDL()
	admin, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		return fmt.Errorf("spanner admin: %w", err)
	}
	defer admin.Close()
	indexes := j.IndexDDL()
	if len(missing) > 0 || len(indexes) > 0 && o.CreateTarget {
		j.sayDDL(o, "target DDL")
	}
	if len(missing) > 0 {
		if !o.CreateTarget {
			if j.Spanner.DatabaseMissing {
				return configErrorf("target database %s does not exist: run with --create-target to create it with the DDL above", endpointPath(tgt))
			}
			return configErrorf("target table %s does not exist: run with --create-target to create it with the DDL above", j.Spanner.Targets[0].Name)
		}
		stmts := missing
		if !j.indexesAfter() {
			stmts = append(append([]string(nil), missing...), indexes...)
		}
		if err := createTables(ctx, admin, j, stmts); err != nil {
			return err
		}
		for _, t := range j.Spanner.Targets {
			j.Spanner.exists[strings.ToLower(t.Name)] = true
		}
		if !j.indexesAfter() {
			for _, ix := range j.Spanner.TargetIndexes {
				j.Spanner.indexes[strings.ToLower(ix.Name)] = true
			}
		}
	} else if len(indexes) > 0 && o.CreateTarget && !j.indexesAfter() {
		if err := updateDDL(ctx, admin, endpointPath(tgt), indexes); err != nil {
			return fmt.Errorf("creating the target's indexes: %w", err)
		}
		for _, ix := range j.Spanner.TargetIndexes {
			j.Spanner.indexes[strings.ToLower(ix.Name)] = true
		}
	}
	c, err := spannerClient(ctx, tgt)
	if err != nil {
		return err
	}
	defer c.Close()
	target := j.Spanner.Targets[0].Name
	spec := j.ManifestSpec()
	row, err := c.Single().ReadRow(ctx, ManifestTable, spanner.Key{target}, []string{"Spec"})
	switch {
	case spanner.ErrCode(err) == codes.NotFound && strings.Contains(err.Error(), "Table not found"):
		if err := updateDDL(ctx, admin, endpointPath(tgt), []string{manifestDDL}); err != nil {
			return fmt.Errorf("creating %s: %w", ManifestTable, err)
		}
	case errors.Is(err, spanner.ErrRowNotFound):
	case err != nil:
		return fmt.Errorf("reading %s: %w", ManifestTable, err)
	default:
		var old string
		if err := row.Columns(&old); err != nil {
			return err
		}
		if old != spec && !o.Force {
			return configErrorf("%w: %s was written with\n  %s\nthis config gives\n  %s\n(use --force to write anyway)", ErrManifestMismatch, target, old, spec)
		}
	}
	m := []*spanner.Mutation{spanner.InsertOrUpdate(ManifestTable, []string{"Target", "Spec", "UpdatedAt"}, []any{target, spec, spanner.CommitTimestamp})}
	_, err = j.Config.Write.Retry.Policy().Do(ctx, func(ctx context.Context) error {
		_, err := c.Apply(ctx, m)
		return err
	}, retry.Hooks{})
	if err != nil {
		return fmt.Errorf("writing %s: %w", ManifestTable, err)
	}
	if !j.Ramp("").Off() {
		return rampTable(ctx, admin, c, endpointPath(tgt))
	}
	return nil
}

// createTables runs stmts in the target database, creating the database
// first with them if it does not exist.
func createTables(ctx context.Context, admin *database.DatabaseAdminClient, j *Job, stmts []string) error {
	tgt := j.Config.Target
	if !j.Spanner.DatabaseMissing {
		if err := updateDDL(ctx, admin, endpointPath(tgt), stmts); err != nil {
			return fmt.Errorf("creating the target tables: %w", err)
		}
		return nil
	}
	op, err := admin.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
		Parent:          "projects/" + tgt.Project + "/instances/" + tgt.Instance,
		CreateStatement: "CREATE DATABASE " + rewrite.QuoteIdent(tgt.Database),
		ExtraStatements: stmts,
	})
	if err == nil {
		_, err = op.Wait(ctx)
	}
	if err != nil {
		return fmt.Errorf("creating the target database %s: %w", endpointPath(tgt), err)
	}
	j.Spanner.DatabaseMissing = false
	return nil
}

// rampTable creates the ramp-up's lease table (throttle,
// spannerdb.RampLease) in database db, which c reaches, if it is missing.
func rampTable(ctx context.Context, admin *database.DatabaseAdminClient, c *spanner.Client, db string) error {
	_, err := c.Single().ReadRow(ctx, spannerdb.RampTable, spanner.Key{"", ""}, []string{"BeatAt"})
	switch {
	case spanner.ErrCode(err) == codes.NotFound && strings.Contains(err.Error(), "Table not found"):
		if err := updateDDL(ctx, admin, db, []string{spannerdb.RampDDL}); err != nil {
			return fmt.Errorf("creating %s: %w", spannerdb.RampTable, err)
		}
	case err != nil && !errors.Is(err, spanner.ErrRowNotFound):
		return fmt.Errorf("reading %s: %w", spannerdb.RampTable, err)
	}
	return nil
}

// PrepareCleanup prepares the source for a cohort cleanup, which deletes
// there: under a ramp-up a Spanner source gets the ramp-up's lease table
// where it is missing, as Prepare gives a target (the lease is kept where
// the writes go). Nothing else is touched: a cleanup needs neither the
// target's tables nor its manifest.
func (j *Job) PrepareCleanup(ctx context.Context) error {
	return j.prepareRamp(ctx, j.Config.Source)
}

// PrepareLoad prepares a phase-aware load, which writes old and new
// through the application library: under a ramp-up a Spanner target
// (where the phase store is, and the load's lease) gets the ramp-up's
// lease table where it is missing. Nothing else is touched.
func (j *Job) PrepareLoad(ctx context.Context) error {
	return j.prepareRamp(ctx, j.Config.Target)
}

// prepareRamp creates the ramp-up's lease table in ep's database if ep is
// a Spanner database, the job ramps up, and the table is missing.
func (j *Job) prepareRamp(ctx context.Context, ep config.Endpoint) error {
	if !kindOf(ep.Type).spannerDB() || j.Ramp("").Off() {
		return nil
	}
	admin, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		return fmt.Errorf("spanner admin: %w", err)
	}
	defer admin.Close()
	c, err := spannerClient(ctx, ep)
	if err != nil {
		return err
	}
	defer c.Close()
	return rampTable(ctx, admin, c, endpointPath(ep))
}

func updateDDL(ctx context.Context, admin *database.DatabaseAdminClient, db string, stmts []string) error {
	op, err := admin.UpdateDatabaseDdl(ctx, &databasepb.UpdateDatabaseDdlRequest{Database: db, Statements: stmts})
	if err != nil {
		return err
	}
	return op.Wait(ctx)
}

type manifestEntity struct {
	Spec      string    `datastore:",noindex"`
	UpdatedAt time.Time `datastore:",noindex"`
}

func prepareDatastore(ctx context.Context, j *Job, o Options) error {
	tgt := j.Config.Target
	c, err := datastoredb.Client(ctx, tgt.Project, tgt.Database)
	if err != nil {
		return err
	}
	defer c.Close()
	kind := firstNonEmpty(tgt.Kind, j.Spec.Kind)
	key := datastore.NameKey(ManifestKind, kind, nil)
	key.Namespace = tgt.Namespace
	spec := j.ManifestSpec()
	var m manifestEntity
	err = c.Get(ctx, key, &m)
	switch {
	case errors.Is(err, datastore.ErrNoSuchEntity):
	case err != nil:
		return fmt.Errorf("reading %s: %w", ManifestKind, err)
	case m.Spec != spec && !o.Force:
		return configErrorf("%w: kind %s was written with\n  %s\nthis config gives\n  %s\n(use --force to write anyway)", ErrManifestMismatch, kind, m.Spec, spec)
	}
	_, err = j.Config.Write.Retry.Policy().Do(ctx, func(ctx context.Context) error {
		_, err := c.Put(ctx, key, &manifestEntity{Spec: spec, UpdatedAt: time.Now().UTC()})
		return err
	}, retry.Hooks{})
	if err != nil {
		return fmt.Errorf("writing %s: %w", ManifestKind, err)
	}
	return nil
}
