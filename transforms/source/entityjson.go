package source

import (
	"bufio"
	"errors"
	"io"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/record"
)

// EntityJSON is the FilesConfig.Format of Datastore entities as Google's
// Dataflow templates write them (datastoredb.ParseEntityJSON), one a line.
// Such files are read whole, one worker a file (the templates write an
// export as many shards), so a dead letter names the line in the file.
const EntityJSON = "entity-json"

// readEntityJSON reads entity JSON lines from r, at the start of a file
// (a UTF-8 byte order mark is skipped, see skipBOM): each a record to ok,
// or with its line number and why to bad; blank lines are skipped, CRLF
// line ends accepted. project, if set, is the project the entities' keys
// must be in.
func readEntityJSON(r io.Reader, project string, ok func(record.Record), bad func(int, string, error)) error {
	r, _, err := skipBOM(r)
	if err != nil {
		return err
	}
	br := bufio.NewReaderSize(r, 1<<20)
	for n := 1; ; n++ {
		line, err := readLine(br)
		if len(line) > 0 {
			if rec, perr := datastoredb.ParseEntityJSON(line, project); perr != nil {
				bad(n, string(line), perr)
			} else {
				ok(rec)
			}
		}
		switch {
		case err == io.EOF:
			return nil
		case errors.Is(err, errLineTooLong):
			bad(n, "", err)
		case err != nil:
			return err
		}
	}
}
