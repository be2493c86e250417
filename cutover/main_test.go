package cutover_test

import (
	"flag"
	"log/slog"
	"os"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// TestMain initializes Beam (the concurrent cutover tests run the
// operator's repair, a pipeline on prism) and runs up to 4 of this package's parallel tests at once unless
// -parallel says otherwise: they spend most of their time waiting for
// phase caches to turn, not on the cores (go test's default is one per
// core, 2 on the CI machine).
func TestMain(m *testing.M) {
	flag.Parse()
	beam.Init()
	// prism logs every job step at INFO.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", "4"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
