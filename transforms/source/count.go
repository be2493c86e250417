package source

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"cloud.google.com/go/datastore"
	pb "cloud.google.com/go/datastore/apiv1/datastorepb"
	"github.com/linkedin/goavro/v2"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
)

// Counts and estimates of a source's records outside a pipeline, for a
// run's progress (percent done, ETA). They read little: a COUNT, a
// kind's statistics or a count aggregation, file sizes and a file's
// first MiB.

// CountDatastore counts the entities of cfg's kind: from the kind's
// statistics when the database has them (the service updates them about
// daily, so they may be a day old; from is "kind statistics"), else with
// a count aggregation query (from "COUNT aggregation"), which the
// emulator answers too.
func CountDatastore(ctx context.Context, cfg DatastoreConfig) (n int64, from string, err error) {
	c, err := datastoredb.Client(ctx, cfg.Project, cfg.Database)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	if n, ok := kindCount(ctx, c, cfg); ok {
		return n, "kind statistics", nil
	}
	aq := datastore.NewQuery(cfg.Kind).Namespace(cfg.Namespace).NewAggregationQuery().WithCount("n")
	res, err := c.RunAggregationQuery(ctx, aq)
	if err != nil {
		return 0, "", fmt.Errorf("datastore source: counting the entities of %s: %w", cfg.Kind, err)
	}
	v, ok := res["n"].(*pb.Value)
	if !ok {
		return 0, "", fmt.Errorf("datastore source: counting the entities of %s: no count in the answer", cfg.Kind)
	}
	return v.GetIntegerValue(), "COUNT aggregation", nil
}

// EstimateLines estimates the records of a line-based files source
// (jsonl, csv, entity-json): the files' total size over the mean line
// size of the first file's first MiB, less one header line per CSV file.
// exact is set when that MiB held every file whole (the count is then
// the files' lines). Avro files have no cheap count: ok is false.
func EstimateLines(ctx context.Context, cfg FilesConfig) (n int64, exact, ok bool, err error) {
	switch strings.ToLower(cfg.Format) {
	case "", "jsonl", "csv", EntityJSON:
	default:
		return 0, false, false, nil
	}
	fs, files, err := listFiles(ctx, cfg.Path)
	if err != nil {
		return 0, false, false, err
	}
	defer fs.Close()
	var total int64
	for _, name := range files {
		size, err := fs.Size(ctx, name)
		if err != nil {
			return 0, false, false, err
		}
		total += size
	}
	rc, err := fs.OpenRead(ctx, files[0])
	if err != nil {
		return 0, false, false, err
	}
	head, err := io.ReadAll(io.LimitReader(rc, peekBytes))
	rc.Close()
	if err != nil {
		return 0, false, false, err
	}
	lines := int64(bytes.Count(head, []byte{'\n'}))
	if len(head) > 0 && head[len(head)-1] != '\n' {
		lines++ // a last line without its end, or a line longer than the MiB
	}
	if lines == 0 {
		return 0, true, true, nil
	}
	whole := len(files) == 1 && int64(len(head)) == total
	n = lines
	if !whole {
		n = int64(float64(total) * float64(lines) / float64(len(head)))
	}
	if strings.EqualFold(cfg.Format, "csv") {
		n = max(n-int64(len(files)), 0)
	}
	return n, whole, true, nil
}

// EstimateAvro estimates the records of Avro files from their sizes: the
// records per byte of the complete blocks in the first file's first MiB
// (their counts read from the block headers; blocks are skipped, not
// decoded) times the files' total size less their headers. exact is set
// when that MiB held every file whole (the count is then the files'
// records).
func EstimateAvro(ctx context.Context, cfg FilesConfig) (n int64, exact bool, err error) {
	fs, files, err := listFiles(ctx, cfg.Path)
	if err != nil {
		return 0, false, err
	}
	defer fs.Close()
	var total int64
	for _, name := range files {
		size, err := fs.Size(ctx, name)
		if err != nil {
			return 0, false, err
		}
		total += size
	}
	rc, err := fs.OpenRead(ctx, files[0])
	if err != nil {
		return 0, false, err
	}
	defer rc.Close()
	cr := &countingReader{r: io.LimitReader(rc, peekBytes)}
	ocf, err := goavro.NewOCFReader(cr)
	if err != nil {
		return 0, false, fmt.Errorf("avro source: %s: %w", files[0], err)
	}
	header := cr.n
	var records, spanned int64 // in the complete blocks, and their bytes
	for ocf.Scan() {
		records += ocf.RemainingBlockItems()
		spanned = cr.n - header
		ocf.SkipThisBlockAndReset()
	}
	whole := len(files) == 1 && cr.n == total && ocf.Err() == nil
	if whole || records == 0 || spanned == 0 {
		return records, whole, nil
	}
	data := total - header*int64(len(files))
	return int64(float64(data) * float64(records) / float64(spanned)), false, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}
