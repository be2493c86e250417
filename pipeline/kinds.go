package pipeline

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/progress"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/plan/sim"
	"github.com/rekeyio/rekey/record"
)

// Store kinds as the graphs see them.
//
// Each kind a source or a target can be (JSON Lines, CSV, Avro and entity
// JSON files; a Spanner export; Spanner; Datastore) is one value
// registered here, in sources and targets, and nowhere else in pipeline
// is a config type compared: the graphs ask the registry. A new kind is
// one sourceKind and/or targetKind in a file of its own and a line in
// these maps (plus its config validation in migration/config and, for a
// cohort cutover, its side in cutover). What only some kinds can do is an
// optional interface (cohortCounter, planSampler, keySampler, fileTarget,
// databaseTarget) that the callers test for.
var (
	sources = map[string]sourceKind{
		config.TypeJSONL:      filesKind{},
		config.TypeCSV:        filesKind{},
		config.TypeAvro:       filesKind{avro: true},
		config.TypeEntityJSON: filesKind{},
		config.TypeSpanner:    spannerKind{},
		config.TypeDatastore:  datastoreKind{},
	}
	targets = map[string]targetKind{
		config.TypeJSONL:      jsonlTarget{},
		config.TypeEntityJSON: entityJSONTarget{},
		config.TypeAvro:       exportTarget{},
		config.TypeSpanner:    spannerKind{},
		config.TypeDatastore:  datastoreKind{},
	}
)

// sourceKind reads a kind of source.
type sourceKind interface {
	// read reads the job's source for a graph: every record, or only
	// those of o.cohorts where the kind's query can tell them.
	read(s beam.Scope, j *migration.Job, o readOptions) (beam.PCollection, []beam.PCollection, error)
	// estimate estimates how many records read gives (for a progress
	// meter); false when it cannot tell.
	estimate(ctx context.Context, j *migration.Job) (progress.Total, bool)
	// peek reads the first n records, outside any pipeline.
	peek(ctx context.Context, j *migration.Job, n int) ([]record.Record, error)
	// describe names an endpoint of this kind for a person.
	describe(e config.Endpoint) string
}

// readOptions narrow or shape a source's read.
type readOptions struct {
	// interleave > 0 reads a JSON Lines source in interleaved ranges
	// (source.FilesConfig.Interleave).
	interleave int
	// cohorts, if any, are the only cohorts a query that can tell them
	// reads (a Spanner source's cohort filter); other kinds read all.
	cohorts []cohort.Range
	// filter is a condition a Spanner source's query adds (a plan's
	// sample); it replaces the cohorts' filter.
	filter string
	// positions gives file records their positions (a plan).
	positions bool
	// spare is room for more fields a source gives each record where it
	// can (source.FilesConfig.SpareFields): the fields the rewrite adds.
	spare int
	// keysOnly reads only what a delete needs (a cleanup): a Spanner
	// row's key and user id columns.
	keysOnly bool
	// sample > 0 samples that many records by key where the kind can
	// (keySampler); other kinds read all and the graph samples.
	sample int
}

// cohortCounter is a source kind that can count a set of cohorts'
// records exactly; false when it cannot tell them apart.
type cohortCounter interface {
	countCohorts(ctx context.Context, j *migration.Job, cohorts []cohort.Range) (progress.Total, bool)
}

// planSampler is a source kind whose query can sample: for a sample of
// about n records it gives the condition to read with (readOptions.filter,
// "" for all), the number of records it counted and how it sampled.
type planSampler interface {
	planFilter(ctx context.Context, j *migration.Job, n int) (filter string, rows int64, method string, err error)
}

// keySampler is a source kind that samples n records by their keys,
// when samplesByKeys says it does for j.
type keySampler interface {
	samplesByKeys(j *migration.Job, n int) bool
}

// targetKind writes a kind of target.
type targetKind interface {
	// write writes the planned batches (deletes them from the source for
	// a cleanup, w.deletes) and returns the dead letters.
	write(s beam.Scope, w writes, batches beam.PCollection) ([]beam.PCollection, error)
	describe(e config.Endpoint) string
}

// fileTarget is a target of files rekey writes: it does not replace one
// that exists, and removes the parts an unfinished run left.
type fileTarget interface {
	// existing is the file whose presence means t holds output, and what
	// to say of it.
	existing(t config.Endpoint) (path, what string)
	// removeParts removes what an unfinished run left at t.
	removeParts(ctx context.Context, t config.Endpoint)
}

// databaseTarget is a target rekey plan can simulate and verify can read
// back.
type databaseTarget interface {
	// readNew reads the target's records, of b's cohorts where a query
	// can tell them.
	readNew(s beam.Scope, j *migration.Job, b *phases.Backfill) (beam.PCollection, []beam.PCollection)
	// simDefaults are the store's parameters for rekey plan's
	// simulation, with nodes > 0 nodes.
	simDefaults(nodes int) sim.Params
	// entities reports whether it keys entities (Datastore) rather than
	// rows.
	entities() bool
}

// sourceOf is the job's source kind.
func sourceOf(j *migration.Job) (sourceKind, error) {
	if k, ok := sources[j.Source.Type]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("source.type %q is not supported yet", j.Source.Type)
}

// targetOf is the kind of the endpoint a job writes to (w.endpoint).
func targetOf(t config.Endpoint) (targetKind, error) {
	if k, ok := targets[t.Type]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("target.type %q is not supported yet", t.Type)
}

// databaseOf is the job's target as a database, false for files.
func databaseOf(j *migration.Job) (databaseTarget, bool) {
	d, ok := targets[j.Target.Type].(databaseTarget)
	return d, ok
}

// describe names an endpoint for a person.
func describe(e config.Endpoint) string {
	if k, ok := targets[e.Type]; ok {
		return k.describe(e)
	}
	if k, ok := sources[e.Type]; ok {
		return k.describe(e)
	}
	return e.Type + " " + e.Path
}
