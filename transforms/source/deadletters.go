package source

import (
	"bufio"
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms"
)

func init() {
	register.DoFn5x1[context.Context, []byte, func([]byte), func([]byte), func(string), error](&readDeadLettersFn{})
}

// DeadLetters reads a dead-letter file written by a run (record.DeadLetter
// lines) for `rekey redrive`. It returns the records to rewrite again
// (refused at the read or rewrite stage: their records are the originals),
// the records to write again (refused at the write stage: already
// rewritten), and dead letters for lines that hold no usable record (a read
// failure whose raw line still does not parse, or a line that is not a dead
// letter), each as before plus why it could not be redriven.
func DeadLetters(s beam.Scope, path string) (toRewrite, toWrite, stillDead beam.PCollection) {
	s = s.Scope("source.DeadLetters")
	return beam.ParDo3(s, &readDeadLettersFn{Path: path}, beam.Impulse(s))
}

type readDeadLettersFn struct {
	Path string `json:"path"`
}

func (f *readDeadLettersFn) ProcessElement(ctx context.Context, _ []byte, rewrite, write func([]byte), dead func(string)) error {
	fs, err := filesystem.New(ctx, f.Path)
	if err != nil {
		return err
	}
	defer fs.Close()
	rc, err := fs.OpenRead(ctx, f.Path)
	if err != nil {
		return fmt.Errorf("opening %s: %w", f.Path, err)
	}
	defer rc.Close()
	toRewrite, toWrite := batcher{emit: rewrite}, batcher{emit: write}
	br := bufio.NewReaderSize(rc, 1<<20)
	for n := 1; ; n++ {
		line, err := readLine(br)
		if len(line) > 0 {
			where := fmt.Sprintf("%s:%d", f.Path, n)
			d, rec, perr := record.ParseDeadLetter(line)
			switch {
			case perr != nil:
				transforms.CountDeadLettered(ctx, 1)
				dead(record.RawDeadLetter(record.StageRead, where, string(line), perr))
			case rec == nil && d.Raw != "":
				// A line the source could not parse: try it again.
				r, err := record.ParseJSON([]byte(d.Raw))
				if err != nil {
					transforms.CountDeadLettered(ctx, 1)
					dead(record.DeadLetter{Stage: d.Stage, Reason: d.Reason + "; redrive: " + err.Error(), Source: d.Source, Raw: d.Raw}.Line())
					continue
				}
				transforms.CountRead(ctx, 1)
				toRewrite.add(r)
			case rec == nil:
				transforms.CountDeadLettered(ctx, 1)
				dead(record.DeadLetter{Stage: d.Stage, Reason: d.Reason + "; redrive: the dead letter holds no record", Source: d.Source}.Line())
			case d.Stage == record.StageWrite:
				transforms.CountRead(ctx, 1)
				toWrite.add(*rec)
			default:
				transforms.CountRead(ctx, 1)
				toRewrite.add(*rec)
			}
		}
		if err != nil {
			break
		}
	}
	toRewrite.flush()
	toWrite.flush()
	return nil
}
