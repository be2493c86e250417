package integration

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/record"
)

// runners are the local Beam runners every migration test runs on.
var runners = []string{"prism", "direct"}

// full runs what CI leaves out to keep within its time (about 5 minutes
// more on a 2-core machine): the second soak seed of TestSoakSpanner and
// TestSoakDatastore, and every staged shape on the worker pool
// (TestOnWorkerPool), not only the first.
var full = flag.Bool("full", false, "also run the soak seeds and worker-pool shapes CI leaves out")

func TestMain(m *testing.M) {
	flag.Parse()
	beam.Init()
	// prism logs every job step at INFO.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	os.Exit(m.Run())
}

// loadYAML writes a config to a temp file and loads and validates it as
// `rekey run -c` does.
func loadYAML(t *testing.T, yaml string) *config.Config {
	t.Helper()
	path := writeConfig(t, yaml)
	v, err := config.NewViper(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config:\n%s\n%v", yaml, err)
	}
	return cfg
}

// writeConfig writes a config to a temp file and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rekey.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// migrate resolves and runs a migration on runner.
func migrate(t *testing.T, cfg *config.Config, runner string) *migration.Result {
	t.Helper()
	ctx := context.Background()
	_, res, err := migration.Run(ctx, cfg, migration.Options{CreateTarget: true}, pipeline.Runner{Runner: runner})
	if err != nil {
		t.Fatalf("run on %s: %v", runner, err)
	}
	return res
}

// readJSONL reads a JSON Lines record file.
func readJSONL(t *testing.T, path string) []record.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []record.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		r, err := record.ParseJSON(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// readDeadLetters reads a dead-letter file.
func readDeadLetters(t *testing.T, path string) []record.DeadLetter {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []record.DeadLetter
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		// A dead letter whose record a redrive cannot take (not in UTF-8)
		// is one all the same.
		d, _, err := record.ParseDeadLetter([]byte(line))
		if errors.Is(err, record.ErrNotDeadLetter) {
			t.Fatalf("dead letter %q: %v", line, err)
		}
		out = append(out, d)
	}
	return out
}

// writeLines writes lines to a new temp file.
func writeLines(t *testing.T, name string, lines []string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// redrive re-submits a dead-letter file with the config of the run that
// wrote it.
func redrive(t *testing.T, cfg *config.Config, runner, from string) *migration.Result {
	t.Helper()
	ctx := context.Background()
	_, res, err := migration.Run(ctx, cfg, migration.Options{RedriveFrom: from}, pipeline.Runner{Runner: runner})
	if err != nil {
		t.Fatalf("redrive on %s: %v", runner, err)
	}
	return res
}
