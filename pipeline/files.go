package pipeline

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/internal/progress"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/store/spannerexport"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms/sink"
	"github.com/rekeyio/rekey/transforms/source"
)

// filesConfig is the job's files source (jsonl, csv, avro, entity-json)
// as the pipeline and its peeks read it: with the main table's name, the
// project entity keys must be in and, for CSV headers to hold, the key
// columns.
func filesConfig(j *migration.Job) source.FilesConfig {
	src := j.Source
	key := make([]string, len(j.SourceKey.Columns))
	for i, c := range j.SourceKey.Columns {
		key[i] = c.Name
	}
	return source.FilesConfig{Path: src.Path, Format: src.Type, Delimiter: src.Delimiter, Table: j.Spec.Table, Key: key, Project: src.Project}
}

// CheckFiles checks the job's files source before its pipeline is built
// (source.CheckFiles: files match the path; CSV headers name each column
// once and hold the key), so that a header that would dead-letter every
// row is one config error before any row is read. A redrive reads no
// source; a job only translated reads nothing. Runner.Migrate calls it.
func CheckFiles(ctx context.Context, j *migration.Job) error {
	if !j.Source.IsFile() || j.RedriveFrom != "" || j.TranslateOnly {
		return nil
	}
	if err := source.CheckFiles(ctx, filesConfig(j)); err != nil {
		return &migration.ConfigError{Err: fmt.Errorf("source.path: %w", err)}
	}
	return nil
}

// filesKind is a files source: JSON Lines, CSV, Avro or entity JSON (the
// format is source.type); avro for Avro files, whose count is estimated
// from their blocks.
type filesKind struct{ avro bool }

func (filesKind) read(s beam.Scope, j *migration.Job, o readOptions) (beam.PCollection, []beam.PCollection, error) {
	cfg := filesConfig(j)
	cfg.Interleave, cfg.Positions, cfg.SpareFields = o.interleave, o.positions, o.spare
	b, d := source.Files(s, cfg)
	return b, []beam.PCollection{d}, nil
}

// estimate counts JSON Lines, CSV and entity JSON files from their sizes
// (source.EstimateLines), Avro files from their sizes and their first
// blocks' counts (source.EstimateAvro).
func (k filesKind) estimate(ctx context.Context, j *migration.Job) (progress.Total, bool) {
	if k.avro {
		n, exact, err := source.EstimateAvro(ctx, filesConfig(j))
		return progress.Total{N: n, Exact: exact, From: "file sizes and Avro block counts"}, err == nil
	}
	n, exact, ok, err := source.EstimateLines(ctx, filesConfig(j))
	return progress.Total{N: n, Exact: exact, From: "file sizes"}, ok && err == nil
}

func (filesKind) peek(ctx context.Context, j *migration.Job, n int) ([]record.Record, error) {
	return source.PeekFiles(ctx, filesConfig(j), n)
}

func (filesKind) describe(e config.Endpoint) string { return strings.ToUpper(e.Type) + " " + e.Path }

// jsonlTarget writes JSON Lines files.
type jsonlTarget struct{}

func (jsonlTarget) write(s beam.Scope, w writes, batches beam.PCollection) ([]beam.PCollection, error) {
	sink.JSONL(s, w.endpoint().Path, batches)
	return nil, nil
}

func (jsonlTarget) describe(e config.Endpoint) string { return filesKind{}.describe(e) }

func (jsonlTarget) existing(t config.Endpoint) (string, string) {
	return t.Path, fmt.Sprintf("target.path %s exists and rekey does not replace it", t.Path)
}

func (jsonlTarget) removeParts(ctx context.Context, t config.Endpoint) {
	_, _ = sink.RemoveParts(ctx, t.Path)
}

// entityJSONTarget writes entity JSON files (Datastore's export shape).
type entityJSONTarget struct{ jsonlTarget }

func (entityJSONTarget) write(s beam.Scope, w writes, batches beam.PCollection) ([]beam.PCollection, error) {
	tgt := w.endpoint()
	_, dead := sink.EntityJSON(s, tgt.Path, tgt.Project, batches)
	return []beam.PCollection{dead}, nil
}

// exportTarget writes a Spanner export (Avro files and their manifests)
// that Spanner's import reads.
type exportTarget struct{}

func (exportTarget) write(s beam.Scope, w writes, batches beam.PCollection) ([]beam.PCollection, error) {
	sp := w.job.Spanner
	var indexes []spannerdb.Index
	if w.job.Write.Indexes != config.IndexesNone {
		indexes = sp.TargetIndexes
	}
	_, dead, err := sink.SpannerExport(s, w.endpoint().Path, sp.Targets, indexes, batches)
	return []beam.PCollection{dead}, err
}

func (exportTarget) describe(e config.Endpoint) string { return filesKind{}.describe(e) }

func (exportTarget) existing(t config.Endpoint) (string, string) {
	return strings.TrimSuffix(t.Path, "/") + "/" + spannerexport.ExportFile,
		fmt.Sprintf("target.path %s holds a Spanner export (%s), which rekey does not replace", t.Path, spannerexport.ExportFile)
}

func (exportTarget) removeParts(ctx context.Context, t config.Endpoint) {
	_, _ = sink.RemoveExportParts(ctx, t.Path, nil)
}
