package sink

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/linkedin/goavro/v2"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/store/spannerexport"
	"github.com/rekeyio/rekey/internal/write/retry"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms"
)

func init() {
	register.DoFn4x1[context.Context, record.Batch, func(string), func(string), error](&exportPartFn{})
	register.Function1x2(keyExportPart)
	register.Function2x0(emptyExportPart)
	register.DoFn4x1[context.Context, int, func(*string) bool, func(int), error](&finishExportFn{})
}

// SpannerExport writes record batches as a Spanner Avro export in the
// folder dir (local or gs://; see package spannerexport): one set of Avro
// files and a manifest per table of tables (parents first), indexes in
// the tables' schemas, and spanner-export.json last, so that `gcloud
// spanner databases import` or the "Avro Files on Cloud Storage to Cloud
// Spanner" template loads it. Each bundle writes one part file per table
// it sees (TABLE.avro.part-RANDOM in dir), with no shuffle of the records;
// a final step names the parts TABLE.avro-NNNNN-of-NNNNN, writes the
// manifests with their MD5s and removes parts no finished bundle owns
// (those of a bundle that failed and was retried). A record that table
// cannot hold (the checks of the Spanner sink, spannerdb.Normalize) is a
// dead letter. It returns the number of rows written (complete when the
// export is) and the dead letters.
func SpannerExport(s beam.Scope, dir string, tables []*spannerdb.Table, indexes []spannerdb.Index, batches beam.PCollection) (written, deadLetters beam.PCollection, err error) {
	s = s.Scope("sink.SpannerExport")
	dir = strings.TrimSuffix(dir, "/")
	fn := &exportPartFn{Dir: dir}
	for _, t := range tables {
		var ddl []string
		for _, ix := range indexes {
			if strings.EqualFold(ix.Table, t.Name) {
				ddl = append(ddl, ix.DDL())
			}
		}
		schema, err := spannerexport.Schema(t, ddl)
		if err != nil {
			return beam.PCollection{}, beam.PCollection{}, err
		}
		if _, err := goavro.NewCodec(schema); err != nil {
			return beam.PCollection{}, beam.PCollection{}, fmt.Errorf("the Avro schema of table %s: %w", t.Name, err)
		}
		fn.Tables = append(fn.Tables, t.CreateDDL(t.Name))
		fn.Schemas = append(fn.Schemas, schema)
	}
	parts, dead := beam.ParDo2(s, fn, batches)
	keyed := beam.ParDo(s, keyExportPart, parts)
	empty := beam.ParDo(s, emptyExportPart, beam.Impulse(s)) // the last step runs with no rows too
	done := beam.ParDo(s, &finishExportFn{Dir: dir, Tables: fn.Tables, Schemas: fn.Schemas}, beam.GroupByKey(s, beam.Flatten(s, keyed, empty)))
	return done, dead, nil
}

// exportPart is a finished part file, as exportPartFn emits it (JSON).
type exportPart struct {
	Table string `json:"table"`
	Name  string `json:"name"`
	MD5   string `json:"md5"`
	Rows  int    `json:"rows"`
}

func keyExportPart(part string) (int, string) { return 0, part }

func emptyExportPart(_ []byte, emit func(int, string)) { emit(0, "") }

// exportTables parses the tables' DDL and checks the schemas, for a
// worker.
func exportTables(ddl, schemas []string) ([]*spannerexport.Table, []*goavro.Codec, error) {
	tables := make([]*spannerexport.Table, len(ddl))
	codecs := make([]*goavro.Codec, len(ddl))
	for i, stmt := range ddl {
		parsed, err := spannerdb.ParseDDL(stmt)
		if err != nil || len(parsed) != 1 {
			return nil, nil, fmt.Errorf("sink.SpannerExport: table DDL %q: %v", stmt, err)
		}
		for _, t := range parsed {
			if tables[i], err = spannerexport.NewTable(t); err != nil {
				return nil, nil, fmt.Errorf("sink.SpannerExport: %w", err)
			}
		}
		if codecs[i], err = goavro.NewCodec(schemas[i]); err != nil {
			return nil, nil, fmt.Errorf("sink.SpannerExport: %w", err)
		}
	}
	return tables, codecs, nil
}

// exportPartFn writes a bundle's rows to one part file per table.
type exportPartFn struct {
	Dir     string   `json:"dir"`
	Tables  []string `json:"tables"`  // CREATE TABLE statements
	Schemas []string `json:"schemas"` // their Avro schemas

	tables []*spannerexport.Table
	codecs []*goavro.Codec
	fs     filesystem.Interface
	open   map[int]*partWriter
}

// partWriter is one open part file: its Avro writer over an MD5 of the
// bytes written.
type partWriter struct {
	name string
	wc   io.WriteCloser
	sum  hash.Hash
	ocf  *goavro.OCFWriter
	rows int
}

func (f *exportPartFn) Setup(ctx context.Context) error {
	var err error
	if f.tables, f.codecs, err = exportTables(f.Tables, f.Schemas); err != nil {
		return err
	}
	f.fs, err = filesystem.New(ctx, f.Dir)
	return err
}

func (f *exportPartFn) Teardown() error {
	if f.fs != nil {
		return f.fs.Close()
	}
	return nil
}

func (f *exportPartFn) table(name string) int {
	return slices.IndexFunc(f.tables, func(t *spannerexport.Table) bool { return strings.EqualFold(t.Name, name) })
}

func (f *exportPartFn) ProcessElement(ctx context.Context, batch record.Batch, _ func(string), dead func(string)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	recs := batch.Recs
	var err error
	byTable := map[int][]any{}
	for i := range recs {
		ti := f.table(recs[i].Table)
		var d map[string]any
		if ti < 0 {
			err = fmt.Errorf("table %s is not in the export (its tables: %s)", recs[i].Table, f.tableNames())
		} else {
			d, err = f.tables[ti].Datum(&recs[i])
		}
		if err != nil {
			transforms.CountDeadLettered(ctx, 1)
			dead(record.NewDeadLetter(record.StageWrite, f.Dir, &recs[i], err))
			continue
		}
		byTable[ti] = append(byTable[ti], d)
	}
	for ti, data := range byTable {
		w, err := f.writer(ctx, ti)
		if err != nil {
			return err
		}
		if err := w.ocf.Append(data); err != nil {
			return fmt.Errorf("writing %s: %w", w.name, err)
		}
		w.rows += len(data)
		transforms.CountWritten(ctx, int64(len(data)))
	}
	return nil
}

func (f *exportPartFn) tableNames() string {
	names := make([]string, len(f.tables))
	for i, t := range f.tables {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// writer is the bundle's part file of table ti, opened on first use.
func (f *exportPartFn) writer(ctx context.Context, ti int) (*partWriter, error) {
	if w := f.open[ti]; w != nil {
		return w, nil
	}
	if f.open == nil {
		f.open = map[int]*partWriter{}
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	w := &partWriter{name: fmt.Sprintf("%s/%s.avro.part-%x", f.Dir, f.tables[ti].Name, rnd), sum: md5.New()}
	var err error
	if w.wc, err = f.fs.OpenWrite(ctx, w.name); err != nil {
		return nil, fmt.Errorf("creating %s: %w", w.name, err)
	}
	if w.ocf, err = newOCF(io.MultiWriter(w.wc, w.sum), f.Schemas[ti]); err != nil {
		w.wc.Close()
		return nil, err
	}
	f.open[ti] = w
	return w, nil
}

func newOCF(w io.Writer, schema string) (*goavro.OCFWriter, error) {
	return goavro.NewOCFWriter(goavro.OCFConfig{W: w, Schema: schema, CompressionName: spannerexport.Codec})
}

func (f *exportPartFn) FinishBundle(ctx context.Context, emit func(string), _ func(string)) error {
	defer func() { f.open = nil }()
	var errs []error
	for ti, w := range f.open {
		if err := w.wc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing %s: %w", w.name, err))
			continue
		}
		b, _ := json.Marshal(exportPart{Table: f.tables[ti].Name, Name: w.name, MD5: base64.StdEncoding.EncodeToString(w.sum.Sum(nil)), Rows: w.rows})
		emit(string(b))
	}
	return errors.Join(errs...)
}

// finishExportFn names the parts, writes the manifests and then
// spanner-export.json.
type finishExportFn struct {
	Dir     string   `json:"dir"`
	Tables  []string `json:"tables"`
	Schemas []string `json:"schemas"`
}

func (f *finishExportFn) ProcessElement(ctx context.Context, _ int, elems func(*string) bool, emit func(int)) error {
	tables, _, err := exportTables(f.Tables, f.Schemas)
	if err != nil {
		return err
	}
	byTable := map[string][]exportPart{}
	owned := map[string]bool{}
	var s string
	for elems(&s) {
		if s == "" {
			continue
		}
		var p exportPart
		if err := json.Unmarshal([]byte(s), &p); err != nil {
			return fmt.Errorf("sink.SpannerExport: part %q: %w", s, err)
		}
		byTable[strings.ToLower(p.Table)] = append(byTable[strings.ToLower(p.Table)], p)
		owned[p.Name] = true
	}
	fs, err := filesystem.New(ctx, f.Dir)
	if err != nil {
		return err
	}
	defer fs.Close()
	rows := 0
	export := spannerexport.Export{Dialect: "GOOGLE_STANDARD_SQL"}
	dir := strings.TrimSuffix(f.Dir, "/")
	listed := map[string]bool{} // the data files the new manifests list
	for i, t := range tables {
		parts := byTable[strings.ToLower(t.Name)]
		sort.Slice(parts, func(a, b int) bool { return parts[a].Name < parts[b].Name })
		var m spannerexport.TableManifest
		if len(parts) == 0 {
			// The import reads a table's schema from its files: an empty
			// table gets one file with no rows.
			name := spannerexport.DataName(t.Name, 0, 1)
			sum, err := writeEmptyOCF(ctx, fs, dir+"/"+name, f.Schemas[i])
			if err != nil {
				return err
			}
			m.Files = append(m.Files, spannerexport.ManifestFile{Name: name, MD5: sum})
			listed[dir+"/"+name] = true
		}
		for j, p := range parts {
			name := spannerexport.DataName(t.Name, j, len(parts))
			if err := renameOnce(ctx, fs, p.Name, dir+"/"+name); err != nil {
				return err
			}
			listed[dir+"/"+name] = true
			m.Files = append(m.Files, spannerexport.ManifestFile{Name: name, MD5: p.MD5})
			rows += p.Rows
		}
		if err := writeFile(ctx, fs, dir+"/"+spannerexport.ManifestName(t.Name), spannerexport.Marshal(m)); err != nil {
			return err
		}
		// An export this one replaces (--overwrite) may have had more
		// files for the table; no manifest lists them now, and they go.
		if _, err := removeMatching(ctx, fs, dir+"/"+t.Name+".avro-*-of-*", listed); err != nil {
			return err
		}
		export.Tables = append(export.Tables, spannerexport.ExportTable{Name: t.Name, ManifestFile: spannerexport.ManifestName(t.Name)})
	}
	if _, err := RemoveExportParts(ctx, f.Dir, owned); err != nil {
		return err
	}
	if err := removeDroppedTables(ctx, fs, dir, export); err != nil {
		return err
	}
	if err := writeFile(ctx, fs, dir+"/"+spannerexport.ExportFile, spannerexport.Marshal(export)); err != nil {
		return err
	}
	emit(rows)
	return nil
}

// removeDroppedTables removes the manifests and data files of the
// tables an export this one replaces (--overwrite) listed and this one
// does not, so that the folder holds one export. A folder without an
// earlier spanner-export.json, or with one that cannot be read, is left
// as it is.
func removeDroppedTables(ctx context.Context, fs filesystem.Interface, dir string, export spannerexport.Export) error {
	path := dir + "/" + spannerexport.ExportFile
	if found, err := fs.List(ctx, path); err != nil || len(found) == 0 {
		return nil
	}
	rc, err := fs.OpenRead(ctx, path)
	if err != nil {
		return nil
	}
	var old spannerexport.Export
	err = json.NewDecoder(rc).Decode(&old)
	rc.Close()
	if err != nil {
		return nil
	}
	kept := map[string]bool{}
	for _, t := range export.Tables {
		kept[strings.ToLower(t.Name)] = true
	}
	for _, t := range old.Tables {
		if kept[strings.ToLower(t.Name)] || t.Name == "" || strings.ContainsAny(t.Name, "/*?[") {
			continue
		}
		for _, glob := range []string{dir + "/" + t.Name + ".avro-*-of-*", dir + "/" + spannerexport.ManifestName(t.Name)} {
			if _, err := removeMatching(ctx, fs, glob, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// renameOnce renames a part to its final name; a part already renamed (a
// retried final step) is left as it is.
func renameOnce(ctx context.Context, fs filesystem.Interface, from, to string) error {
	_, err := fileRetry.Do(ctx, func(ctx context.Context) error {
		if found, _ := fs.List(ctx, from); len(found) == 0 {
			if done, _ := fs.List(ctx, to); len(done) == 1 {
				return nil
			}
		}
		if err := filesystem.Rename(ctx, fs, from, to); err != nil {
			return fmt.Errorf("naming %s %s: %w", from, to, err)
		}
		return nil
	}, retry.Hooks{OnRetry: func(_ error, wait time.Duration) { transforms.CountRetry(ctx, wait) }})
	return err
}

func writeFile(ctx context.Context, fs filesystem.Interface, path string, data []byte) error {
	_, err := fileRetry.Do(ctx, func(ctx context.Context) error {
		if err := filesystem.Write(ctx, fs, path, data); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return nil
	}, retry.Hooks{OnRetry: func(_ error, wait time.Duration) { transforms.CountRetry(ctx, wait) }})
	return err
}

// writeEmptyOCF writes an Avro file with schema and no rows and returns
// the base64 of its MD5.
func writeEmptyOCF(ctx context.Context, fs filesystem.Interface, path, schema string) (string, error) {
	var buf bytes.Buffer
	if _, err := newOCF(&buf, schema); err != nil {
		return "", err
	}
	sum := md5.Sum(buf.Bytes())
	return base64.StdEncoding.EncodeToString(sum[:]), writeFile(ctx, fs, path, buf.Bytes())
}

// RemoveExportParts removes the part files in dir (*.avro.part-*) that
// are not in keep: those of bundles that failed, or of a run that did not
// finish. It returns how many it removed.
func RemoveExportParts(ctx context.Context, dir string, keep map[string]bool) (int, error) {
	fs, err := filesystem.New(ctx, dir)
	if err != nil {
		return 0, err
	}
	defer fs.Close()
	return removeMatching(ctx, fs, strings.TrimSuffix(dir, "/")+"/*.avro.part-*", keep)
}
