package source

import (
	"context"
	"fmt"
	"io"
	"strings"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"google.golang.org/api/iterator"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/record"
)

// Peeks read the first records of a source outside a pipeline, as the
// sources read them, for a dry run's sample of old and new keys. They read
// little (n records; of a file, its first MiB) and nothing else.

// peekBytes is how much of the first file PeekFiles reads.
const peekBytes = 1 << 20

// PeekFiles returns up to n records from the start of the first file of
// cfg.Path. Lines that cannot be read are skipped (the pipeline
// dead-letters them).
func PeekFiles(ctx context.Context, cfg FilesConfig, n int) ([]record.Record, error) {
	fs, err := filesystem.New(ctx, cfg.Path)
	if err != nil {
		return nil, err
	}
	defer fs.Close()
	files, err := fs.List(ctx, cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", cfg.Path, err)
	}
	if len(files) == 0 {
		return nil, nil
	}
	rc, err := fs.OpenRead(ctx, files[0])
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", files[0], err)
	}
	defer rc.Close()
	var out []record.Record
	ok := func(rec record.Record) {
		if len(out) < n {
			if rec.Table == "" {
				rec.Table = cfg.Table
			}
			out = append(out, rec)
		}
	}
	skip := func(int, string, error) {}
	switch strings.ToLower(cfg.Format) {
	case "csv":
		err = readCSV(io.LimitReader(rc, peekBytes), cfg, ok, skip)
	case "avro":
		err = readAvro(rc, files[0], ok, skip) // a container file is read whole
	case EntityJSON:
		err = readEntityJSON(io.LimitReader(rc, peekBytes), cfg.Project, ok, skip)
	default:
		var r io.Reader
		if r, err = seekRange(io.LimitReader(rc, peekBytes), fileRange{Name: files[0], End: -1}); err == nil {
			err = readJSONL(r, 0, ok, skip)
		}
	}
	if len(out) > 0 {
		return out, nil // a cut-off last line or block is no error here
	}
	return out, err
}

// PeekSpanner returns up to n rows of the source table, as the source's
// query selects them.
func PeekSpanner(ctx context.Context, cfg SpannerConfig, n int) ([]record.Record, error) {
	c, err := newClient(ctx, cfg.DatabasePath())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	t, err := spannerdb.ReadTable(ctx, c, cfg.Table)
	if err != nil {
		return nil, err
	}
	sql, err := SelectSQL(t, cfg)
	if err != nil {
		return nil, err
	}
	it := c.Single().Query(ctx, spanner.Statement{SQL: fmt.Sprintf("%s LIMIT %d", sql, n)})
	defer it.Stop()
	var out []record.Record
	for {
		row, err := it.Next()
		if err == iterator.Done {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		rec, err := spannerdb.RowToRecord(row, t)
		if err != nil {
			continue
		}
		out = append(out, rec)
	}
}

// PeekDatastore returns up to n entities of the source kind.
func PeekDatastore(ctx context.Context, cfg DatastoreConfig, n int) ([]record.Record, error) {
	c, err := datastoredb.Client(ctx, cfg.Project, cfg.Database)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var props []datastore.PropertyList
	keys, err := c.GetAll(ctx, datastore.NewQuery(cfg.Kind).Namespace(cfg.Namespace).Limit(n), &props)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", cfg.source(), err)
	}
	var out []record.Record
	for i, k := range keys {
		if rec, err := datastoredb.FromEntity(k, props[i]); err == nil {
			out = append(out, rec)
		}
	}
	return out, nil
}
