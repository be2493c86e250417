// Command rekey migrates and bulk-loads data into Cloud Spanner and Cloud
// Datastore while rewriting keys so that no server becomes a hotspot.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

func main() {
	if isWorker(os.Args[1:]) {
		// Started by a runner (Dataflow, a portable job server) as a worker:
		// Beam's hook runs the worker harness.
		flag.Parse()
		beam.Init()
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

func isWorker(args []string) bool {
	for _, a := range args {
		if a == "--worker" || a == "-worker" || strings.HasPrefix(a, "--worker=") || strings.HasPrefix(a, "-worker=") {
			return true
		}
	}
	return false
}
