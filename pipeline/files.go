package pipeline

import (
	"context"
	"fmt"

	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/transforms/source"
)

// filesConfig is the job's files source (jsonl, csv, avro, entity-json)
// as the pipeline and its peeks read it: with the main table's name, the
// project entity keys must be in and, for CSV headers to hold, the key
// columns.
func filesConfig(j *migration.Job) source.FilesConfig {
	src := j.Config.Source
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
	if !j.Config.Source.IsFile() || j.RedriveFrom != "" || j.TranslateOnly {
		return nil
	}
	if err := source.CheckFiles(ctx, filesConfig(j)); err != nil {
		return &migration.ConfigError{Err: fmt.Errorf("source.path: %w", err)}
	}
	return nil
}
