package sink

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"google.golang.org/api/googleapi"
)

// flakyFS is an in-memory file system whose first failWrites closes of a
// written file fail with an HTTP error, as a busy object store's would.
type flakyFS struct {
	mu         sync.Mutex
	files      map[string][]byte
	failWrites int
	code       int
}

var flaky = &flakyFS{files: map[string][]byte{}}

func init() {
	filesystem.Register("flaky", func(context.Context) filesystem.Interface { return flaky })
}

func (f *flakyFS) Close() error { return nil }

func (f *flakyFS) List(context.Context, string) ([]string, error) { return nil, nil }

func (f *flakyFS) OpenRead(_ context.Context, name string) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return io.NopCloser(bytes.NewReader(f.files[name])), nil
}

func (f *flakyFS) OpenWrite(_ context.Context, name string) (io.WriteCloser, error) {
	return &flakyFile{fs: f, name: name}, nil
}

func (f *flakyFS) Size(_ context.Context, name string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(len(f.files[name])), nil
}

func (f *flakyFS) Remove(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.files, name)
	return nil
}

type flakyFile struct {
	fs   *flakyFS
	name string
	buf  bytes.Buffer
}

func (w *flakyFile) Write(p []byte) (int, error) { return w.buf.Write(p) }

func (w *flakyFile) Close() error {
	w.fs.mu.Lock()
	defer w.fs.mu.Unlock()
	if w.fs.failWrites > 0 {
		w.fs.failWrites--
		return &googleapi.Error{Code: w.fs.code, Message: "backend busy"}
	}
	w.fs.files[w.name] = bytes.Clone(w.buf.Bytes())
	return nil
}

// TestJoinRetriesTransientFileErrors: joining part files that fails with
// HTTP 503 or 429 is done again; the parts are removed only after the
// join succeeded. A 403 is not retried.
func TestJoinRetriesTransientFileErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		code  int
		retry bool
	}{{503, true}, {429, true}, {403, false}} {
		flaky.mu.Lock()
		flaky.files = map[string][]byte{"flaky://out.part-1": []byte("a\nb\n"), "flaky://out.part-2": []byte("c\n")}
		flaky.failWrites, flaky.code = 1, tc.code
		flaky.mu.Unlock()
		parts := []string{"flaky://out.part-2", "flaky://out.part-1"}
		var lines []int
		err := (&joinPartsFn{Path: "flaky://out"}).ProcessElement(ctx, 0, func(s *string) bool {
			if len(parts) == 0 {
				return false
			}
			*s, parts = parts[0], parts[1:]
			return true
		}, func(n int) { lines = append(lines, n) })
		flaky.mu.Lock()
		got, left := string(flaky.files["flaky://out"]), len(flaky.files)
		flaky.mu.Unlock()
		if tc.retry {
			if err != nil || got != "a\nb\nc\n" || left != 1 || len(lines) != 1 || lines[0] != 3 {
				t.Errorf("HTTP %d: err %v, file %q, %d files left, lines %v; want the join done again", tc.code, err, got, left, lines)
			}
		} else if err == nil || !strings.Contains(err.Error(), "403") || left != 2 {
			t.Errorf("HTTP %d: err %v, %d files left; want the error at once and the parts kept", tc.code, err, left)
		}
	}
}
