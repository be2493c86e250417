package sink

import (
	"bufio"
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"   // gs:// paths
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // local paths
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/internal/record"
	"github.com/rekeyio/rekey/transforms"
)

func init() {
	register.DoFn3x0[context.Context, []byte, func(int, []byte)](&jsonlChunkFn{})
	register.DoFn2x0[string, func(int, []byte)](&lineChunkFn{})
	register.Function2x0(emptyChunk)
	register.Emitter2[int, []byte]()
	register.DoFn4x1[context.Context, int, func(*[]byte) bool, func(int), error](&writeFileFn{})
	register.Iter1[[]byte]()
	register.Emitter1[int]()
}

// JSONL writes record batches to one JSON Lines file at path (local or
// gs://), in the record format record.ParseJSON reads back. Lines are in no
// particular order. It returns a PCollection holding the number of lines
// written, which completes when the file is written.
func JSONL(s beam.Scope, path string, batches beam.PCollection) beam.PCollection {
	s = s.Scope("sink.JSONL")
	chunks := beam.ParDo(s, &jsonlChunkFn{}, batches)
	return beam.ParDo(s, &writeFileFn{Path: path}, beam.GroupByKey(s, chunks))
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

type jsonlChunkFn struct{}

func (f *jsonlChunkFn) ProcessElement(ctx context.Context, batch []byte, emit func(int, []byte)) {
	recs, err := record.DecodeBatch(batch)
	if err != nil {
		panic(fmt.Sprintf("sink.JSONL: %v", err)) // batches are made by rekey; corruption is a bug
	}
	out := make([]byte, 0, 256*len(recs))
	for i := range recs {
		out = record.AppendJSON(out, &recs[i], true)
		out = append(out, '\n')
	}
	transforms.CountWritten(ctx, int64(len(recs)))
	emit(0, out)
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
