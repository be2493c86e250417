package sink

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"   // gs:// paths
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // local paths
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/internal/write/retry"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms"
)

func init() {
	register.DoFn3x1[context.Context, record.Batch, func(string), error](&writePartFn{})
	register.DoFn3x1[context.Context, []byte, func(string), error](&writeLinesPartFn{})
	register.Function1x2(keyPart)
	register.Emitter1[string]()
	register.DoFn4x1[context.Context, int, func(*string) bool, func(int), error](&joinPartsFn{})
	register.Iter1[string]()
	register.DoFn2x0[string, func(int, []byte)](&lineChunkFn{})
	register.Function2x0(emptyChunk)
	register.Emitter2[int, []byte]()
	register.DoFn4x1[context.Context, int, func(*[]byte) bool, func(int), error](&writeFileFn{})
	register.Iter1[[]byte]()
	register.Emitter1[int]()
}

// JSONL writes record batches to one JSON Lines file at path (local or
// gs://), in the record format record.ParseJSON reads back. Lines are in no
// particular order. Each bundle writes its own part file next to path, with
// no shuffle of the records themselves; a final step joins the parts into
// path and removes them. It returns a PCollection holding the number of
// lines written, complete when the file is.
func JSONL(s beam.Scope, path string, batches beam.PCollection) beam.PCollection {
	s = s.Scope("sink.JSONL")
	parts := beam.ParDo(s, &writePartFn{Path: path}, batches)
	keyed := beam.ParDo(s, keyPart, parts)
	return beam.ParDo(s, &joinPartsFn{Path: path}, beam.GroupByKey(s, keyed))
}

// Lines writes strings, one per line, to one file at path (used for dead
// letters). Empty input still writes an empty file, so a run's dead-letter
// file always reflects that run.
func Lines(s beam.Scope, path string, lines beam.PCollection) beam.PCollection {
	s = s.Scope("sink.Lines")
	chunks := beam.ParDo(s, &lineChunkFn{}, lines)
	// An empty chunk on the same key makes the writer run when there are no lines.
	empty := beam.ParDo(s, emptyChunk, beam.Impulse(s))
	return beam.ParDo(s, &writeFileFn{Path: path}, beam.GroupByKey(s, beam.Flatten(s, chunks, empty)))
}

// writePartFn writes the record batches of a bundle to a part file and
// emits its name when the bundle finishes.
type writePartFn struct {
	Path string `json:"path"`

	part part
	buf  []byte
}

func (f *writePartFn) ProcessElement(ctx context.Context, batch record.Batch, _ func(string)) error {
	if err := ctx.Err(); err != nil {
		return err // the job was cancelled
	}
	if err := f.part.open(ctx, f.Path); err != nil {
		return err
	}
	recs := batch.Recs
	for i := range recs {
		f.buf = append(record.AppendJSON(f.buf[:0], &recs[i], true), '\n')
		if _, err := f.part.w.Write(f.buf); err != nil {
			return fmt.Errorf("writing %s: %w", f.part.name, err)
		}
	}
	f.part.lines += len(recs)
	transforms.CountWritten(ctx, int64(len(recs)))
	return nil
}

func (f *writePartFn) FinishBundle(ctx context.Context, emit func(string)) error {
	return f.part.finish(emit)
}

// writeLinesPartFn is writePartFn for elements of encoded lines
// (EntityJSON's), written as they are.
type writeLinesPartFn struct {
	Path string `json:"path"`

	part part
}

func (f *writeLinesPartFn) ProcessElement(ctx context.Context, lines []byte, _ func(string)) error {
	if err := ctx.Err(); err != nil {
		return err // the job was cancelled
	}
	if err := f.part.open(ctx, f.Path); err != nil {
		return err
	}
	if _, err := f.part.w.Write(lines); err != nil {
		return fmt.Errorf("writing %s: %w", f.part.name, err)
	}
	n := bytes.Count(lines, []byte{'\n'})
	f.part.lines += n
	transforms.CountWritten(ctx, int64(n))
	return nil
}

func (f *writeLinesPartFn) FinishBundle(ctx context.Context, emit func(string)) error {
	return f.part.finish(emit)
}

// part is a bundle's part file, next to the file at path.
type part struct {
	fs    filesystem.Interface
	wc    io.WriteCloser
	w     *bufio.Writer
	name  string
	lines int
}

// open creates the part file if the bundle has none yet.
func (p *part) open(ctx context.Context, path string) error {
	if p.w != nil {
		return nil
	}
	var err error
	if p.fs, err = filesystem.New(ctx, path); err != nil {
		return err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	p.name = fmt.Sprintf("%s.part-%x", path, rnd)
	if p.wc, err = p.fs.OpenWrite(ctx, p.name); err != nil {
		return fmt.Errorf("creating %s: %w", p.name, err)
	}
	p.w = bufio.NewWriterSize(p.wc, 1<<20)
	return nil
}

// finish closes the part file, if the bundle wrote one, and emits its
// name.
func (p *part) finish(emit func(string)) error {
	if p.w == nil {
		return nil
	}
	defer func() { p.w, p.wc, p.lines = nil, nil, 0; p.fs.Close() }()
	if err := p.w.Flush(); err != nil {
		p.wc.Close()
		return fmt.Errorf("writing %s: %w", p.name, err)
	}
	if err := p.wc.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", p.name, err)
	}
	emit(p.name)
	return nil
}

func keyPart(name string) (int, string) { return 0, name }

// Exists reports whether a file path exists (local or gs://).
func Exists(ctx context.Context, path string) (bool, error) {
	fs, err := filesystem.New(ctx, path)
	if err != nil {
		return false, err
	}
	defer fs.Close()
	files, err := fs.List(ctx, path)
	if err != nil {
		return false, err
	}
	return slices.Contains(files, path), nil
}

// RemoveParts removes the part files a JSONL or Lines sink left next to
// path (path.part-*) when its job did not finish: a re-run writes new ones.
// It returns how many it removed.
func RemoveParts(ctx context.Context, path string) (int, error) {
	fs, err := filesystem.New(ctx, path)
	if err != nil {
		return 0, err
	}
	defer fs.Close()
	return removeMatching(ctx, fs, path+".part-*", nil)
}

// removeMatching removes the files matching glob that are not in keep and
// returns how many it removed.
func removeMatching(ctx context.Context, fs filesystem.Interface, glob string, keep map[string]bool) (int, error) {
	files, err := fs.List(ctx, glob)
	if err != nil {
		return 0, err
	}
	rm, ok := fs.(filesystem.Remover)
	n := 0
	for _, p := range files {
		if keep[p] {
			continue
		}
		if !ok {
			return n, fmt.Errorf("cannot remove %s: the file system has no Remove", p)
		}
		if err := rm.Remove(ctx, p); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// joinPartsFn concatenates the part files into the final file, in name
// order, then removes them.
type joinPartsFn struct {
	Path string `json:"path"`
}

func (f *joinPartsFn) ProcessElement(ctx context.Context, _ int, names func(*string) bool, emit func(int)) error {
	var parts []string
	var name string
	for names(&name) {
		parts = append(parts, name)
	}
	sort.Strings(parts)
	fs, err := filesystem.New(ctx, f.Path)
	if err != nil {
		return err
	}
	defer fs.Close()
	// The parts stay until the join has succeeded, so a join that fails
	// with a transient error (HTTP 408, 429, 5xx) is simply done again.
	var lines int
	_, err = fileRetry.Do(ctx, func(ctx context.Context) error {
		n, err := joinParts(ctx, fs, f.Path, parts)
		lines = n
		return err
	}, retry.Hooks{OnRetry: func(_ error, wait time.Duration) { transforms.CountRetry(ctx, wait) }})
	if err != nil {
		return err
	}
	if rm, ok := fs.(filesystem.Remover); ok {
		for _, p := range parts {
			if err := rm.Remove(ctx, p); err != nil {
				return fmt.Errorf("removing %s: %w", p, err)
			}
		}
	}
	emit(lines)
	return nil
}

// fileRetry retries whole-file operations: the default backoff, with an
// hour for one attempt (a join copies every part).
var fileRetry = retry.Policy{Attempt: time.Hour}

// joinParts writes the parts, in order, into path and returns the lines
// written.
func joinParts(ctx context.Context, fs filesystem.Interface, path string, parts []string) (int, error) {
	wc, err := fs.OpenWrite(ctx, path)
	if err != nil {
		return 0, fmt.Errorf("creating %s: %w", path, err)
	}
	cw := &countingWriter{w: wc}
	for _, p := range parts {
		rc, err := fs.OpenRead(ctx, p)
		if err != nil {
			wc.Close()
			return 0, fmt.Errorf("reading %s: %w", p, err)
		}
		_, err = io.Copy(cw, rc)
		rc.Close()
		if err != nil {
			wc.Close()
			return 0, fmt.Errorf("joining %s into %s: %w", p, path, err)
		}
	}
	if err := wc.Close(); err != nil {
		return 0, fmt.Errorf("closing %s: %w", path, err)
	}
	return cw.lines, nil
}

type countingWriter struct {
	w     io.Writer
	lines int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.lines += bytes.Count(p, []byte{'\n'})
	return c.w.Write(p)
}

func emptyChunk(_ []byte, emit func(int, []byte)) { emit(0, nil) }

type lineChunkFn struct{}

func (f *lineChunkFn) ProcessElement(line string, emit func(int, []byte)) {
	emit(0, append([]byte(line), '\n'))
}

type writeFileFn struct {
	Path string `json:"path"`
}

func (f *writeFileFn) ProcessElement(ctx context.Context, _ int, chunks func(*[]byte) bool, emit func(int)) error {
	fs, err := filesystem.New(ctx, f.Path)
	if err != nil {
		return err
	}
	defer fs.Close()
	wc, err := fs.OpenWrite(ctx, f.Path)
	if err != nil {
		return fmt.Errorf("creating %s: %w", f.Path, err)
	}
	w := bufio.NewWriterSize(wc, 1<<20)
	lines := 0
	var chunk []byte
	for chunks(&chunk) {
		if _, err := w.Write(chunk); err != nil {
			wc.Close()
			return fmt.Errorf("writing %s: %w", f.Path, err)
		}
		for _, c := range chunk {
			if c == '\n' {
				lines++
			}
		}
	}
	if err := w.Flush(); err != nil {
		wc.Close()
		return fmt.Errorf("writing %s: %w", f.Path, err)
	}
	if err := wc.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", f.Path, err)
	}
	emit(lines)
	return nil
}
