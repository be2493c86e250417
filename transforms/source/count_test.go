package source

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cloud.google.com/go/datastore"
	"github.com/linkedin/goavro/v2"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
)

func writeLinesFile(t *testing.T, path string, n int, line func(i int) string) {
	t.Helper()
	var b strings.Builder
	for i := range n {
		b.WriteString(line(i) + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestEstimateLines: a small file is counted exactly; files beyond the
// first MiB are estimated from their sizes, within 2% for lines of
// similar length; a CSV file's header is no record; Avro gives none.
func TestEstimateLines(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	small := filepath.Join(dir, "small.jsonl")
	writeLinesFile(t, small, 37, func(i int) string { return fmt.Sprintf(`{"Id":%d}`, i) })
	if n, exact, ok, err := EstimateLines(ctx, FilesConfig{Path: small, Format: "jsonl"}); err != nil || !ok || !exact || n != 37 {
		t.Errorf("small file: %d exact=%v ok=%v err=%v, want 37 exact", n, exact, ok, err)
	}
	for _, name := range []string{"big-1.jsonl", "big-2.jsonl"} {
		writeLinesFile(t, filepath.Join(dir, name), 30000, func(i int) string { return fmt.Sprintf(`{"Id":%d,"Page":"%s"}`, i, strings.Repeat("p", 40+i%17)) })
	}
	n, exact, ok, err := EstimateLines(ctx, FilesConfig{Path: filepath.Join(dir, "big-*.jsonl"), Format: "jsonl"})
	if err != nil || !ok || exact || math.Abs(float64(n)-60000)/60000 > 0.02 {
		t.Errorf("big files: %d exact=%v ok=%v err=%v, want about 60000, estimated", n, exact, ok, err)
	}
	csv := filepath.Join(dir, "a.csv")
	writeLinesFile(t, csv, 11, func(i int) string {
		if i == 0 {
			return "Id,Name"
		}
		return fmt.Sprintf("%d,n%d", i, i)
	})
	if n, _, _, _ := EstimateLines(ctx, FilesConfig{Path: csv, Format: "csv"}); n != 10 {
		t.Errorf("CSV rows %d, want 10 (the header is none)", n)
	}
	if _, _, ok, _ := EstimateLines(ctx, FilesConfig{Path: csv, Format: "avro"}); ok {
		t.Error("a line estimate for Avro files (EstimateAvro makes theirs)")
	}
	if _, _, _, err := EstimateLines(ctx, FilesConfig{Path: filepath.Join(dir, "none-*"), Format: "jsonl"}); err == nil {
		t.Error("no error for a path that matches no file")
	}
}

// writeAvroFile writes n records of a two-field schema to an Avro file
// (deflate, as Spanner's export writes), in blocks of block records.
func writeAvroFile(t *testing.T, path string, n, block int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := goavro.NewOCFWriter(goavro.OCFConfig{W: f, CompressionName: goavro.CompressionDeflateLabel,
		Schema: `{"type": "record", "name": "T", "fields": [{"name": "Id", "type": "long"}, {"name": "Page", "type": "string"}]}`})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += block {
		var recs []any
		for j := i; j < min(i+block, n); j++ {
			// Pages that do not compress to nothing: the block sizes vary.
			recs = append(recs, map[string]any{"Id": int64(j), "Page": fmt.Sprintf("%x/%d", j*2654435761, j%97)})
		}
		if err := w.Append(recs); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEstimateAvro: a small file is counted exactly from its block
// headers; files beyond the first MiB are estimated from their sizes,
// within 5%; a file that is not Avro is an error.
func TestEstimateAvro(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	small := filepath.Join(dir, "small.avro")
	writeAvroFile(t, small, 1234, 100)
	if n, exact, err := EstimateAvro(ctx, FilesConfig{Path: small, Format: "avro"}); err != nil || !exact || n != 1234 {
		t.Errorf("small file: %d exact=%v err=%v, want 1234 exact", n, exact, err)
	}
	for _, name := range []string{"big.avro-00000-of-00002", "big.avro-00001-of-00002"} {
		writeAvroFile(t, filepath.Join(dir, name), 150000, 1000)
	}
	n, exact, err := EstimateAvro(ctx, FilesConfig{Path: filepath.Join(dir, "big.avro-*"), Format: "avro"})
	if err != nil || exact || math.Abs(float64(n)-300000)/300000 > 0.05 {
		t.Errorf("big files: %d exact=%v err=%v, want about 300000, estimated", n, exact, err)
	}
	notAvro := filepath.Join(dir, "a.jsonl")
	writeLinesFile(t, notAvro, 3, func(i int) string { return "{}" })
	if _, _, err := EstimateAvro(ctx, FilesConfig{Path: notAvro, Format: "avro"}); err == nil {
		t.Error("no error for a file that is not Avro")
	}
}

// TestCountDatastore counts a kind in a namespace on the emulator (which
// has no statistics: a count aggregation).
func TestCountDatastore(t *testing.T) {
	emulator.RequireDatastore(t)
	ctx := context.Background()
	ns := emulator.UniqueNamespace(t.Name())
	c, err := datastoredb.Client(ctx, emulator.DatastoreProject(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var keys []*datastore.Key
	var pls []datastore.PropertyList
	for i := int64(1); i <= 25; i++ {
		keys = append(keys, &datastore.Key{Kind: "Counted", ID: i, Namespace: ns})
		pls = append(pls, datastore.PropertyList{{Name: "n", Value: i}})
	}
	if _, err := c.PutMulti(ctx, keys, pls); err != nil {
		t.Fatal(err)
	}
	n, from, err := CountDatastore(ctx, DatastoreConfig{Project: emulator.DatastoreProject(), Namespace: ns, Kind: "Counted"})
	if err != nil || n != 25 || from != "COUNT aggregation" {
		t.Errorf("count %d from %q (%v), want 25 from a COUNT aggregation", n, from, err)
	}
}
