package pipeline

import (
	"bufio"
	"context"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
)

// readLines reads a text file's lines, local or on a Beam filesystem
// (gs://...).
func readLines(ctx context.Context, path string) ([]string, error) {
	fs, err := filesystem.New(ctx, path)
	if err != nil {
		return nil, err
	}
	defer fs.Close()
	rc, err := fs.OpenRead(ctx, path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var out []string
	sc := bufio.NewScanner(rc)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

// writeLines replaces a text file with lines, one per line.
func writeLines(ctx context.Context, path string, lines []string) error {
	fs, err := filesystem.New(ctx, path)
	if err != nil {
		return err
	}
	defer fs.Close()
	wc, err := fs.OpenWrite(ctx, path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(wc)
	for _, l := range lines {
		w.WriteString(l)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		wc.Close()
		return err
	}
	return wc.Close()
}
