package source

import (
	"bufio"
	"context"
	"errors"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms"
)

func init() {
	register.DoFn5x1[context.Context, []byte, func(record.Batch), func(record.Batch), func(string), error](&readDeadLettersFn{})
}

// DeadLetters reads a dead-letter file written by a run (record.DeadLetter
// lines) for `rekey redrive`. It returns the records to rewrite again
// (refused at the read or rewrite stage: their records are the originals),
// the records to write again (refused at the write stage: already
// rewritten), and dead letters for lines that hold no usable record (a read
// failure whose raw line still does not parse, or a line that is not a dead
// letter), each as before plus why it could not be redriven. A dead
// letter is dead-lettered again exactly as it was (record.DeadLetter keeps
// bytes that are not valid UTF-8 in raw_base64 or record_base64, which
// parse no better on a redrive), never written with other bytes. Every
// line is counted read, and dead_lettered if it goes to stillDead.
func DeadLetters(s beam.Scope, path string) (toRewrite, toWrite, stillDead beam.PCollection) {
	s = s.Scope("source.DeadLetters")
	return beam.ParDo3(s, &readDeadLettersFn{Path: path}, beam.Impulse(s))
}

type readDeadLettersFn struct {
	Path string `json:"path"`
}

func (f *readDeadLettersFn) ProcessElement(ctx context.Context, _ []byte, rewrite, write func(record.Batch), dead func(string)) error {
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
			transforms.CountRead(ctx, 1)
			d, rec, perr := record.ParseDeadLetter(line)
			// again dead-letters d as it is (its bytes kept exactly: a
			// redrive never writes what it could not read), plus why.
			again := func(why string) {
				transforms.CountDeadLettered(ctx, 1)
				d.Reason += "; redrive: " + why
				dead(d.Line())
			}
			switch {
			case errors.Is(perr, record.ErrNotDeadLetter):
				transforms.CountDeadLettered(ctx, 1)
				dead(record.RawDeadLetter(record.StageRead, where, string(line), perr))
			case perr != nil:
				again(perr.Error())
			case rec == nil && d.RawBytes() != nil:
				// A line the source could not parse: try it again.
				if r, err := record.ParseJSON(d.RawBytes()); err != nil {
					again(err.Error())
				} else {
					toRewrite.add(r)
				}
			case rec == nil:
				again("the dead letter holds no record")
			case d.Stage == record.StageWrite:
				toWrite.add(*rec)
			default:
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
