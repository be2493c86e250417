// Command rekey migrates and bulk-loads data into Cloud Spanner and Cloud
// Datastore while rewriting keys so that no server becomes a hotspot.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/internal/earlysignal"
	"github.com/rekeyio/rekey/internal/gctune"
)

func main() {
	gctune.Tune()
	if isWorker(os.Args[1:]) {
		// Started by a runner (Dataflow, a portable job server) as a worker:
		// Beam's hook runs the worker harness, and a signal ends it as
		// the runner expects.
		earlysignal.Release()
		flag.Parse()
		beam.Init()
		return
	}
	ctx, interrupted := interruptible()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	if sig := interrupted(); sig != nil {
		os.Exit(exitInterrupted(sig, os.Stderr))
	}
	os.Exit(exitCode(err, os.Stderr))
}

// stopping is set once a SIGINT or SIGTERM has come: the run is being
// cancelled, and the runner's logs of the bundles it cancels (prism's
// "Bundle Failed" errors) say nothing the user did not ask for.
var stopping atomic.Bool

// quietWhenStopping drops every log record once stopping is set (rekey's
// own lines do not go through slog).
type quietWhenStopping struct{ slog.Handler }

func (h quietWhenStopping) Enabled(ctx context.Context, l slog.Level) bool {
	return !stopping.Load() && h.Handler.Enabled(ctx, l)
}

func (h quietWhenStopping) WithAttrs(as []slog.Attr) slog.Handler {
	return quietWhenStopping{h.Handler.WithAttrs(as)}
}

func (h quietWhenStopping) WithGroup(name string) slog.Handler {
	return quietWhenStopping{h.Handler.WithGroup(name)}
}

// interruptible returns a context cancelled by the first SIGINT or
// SIGTERM, and a function that says which one came (nil: none). The
// signals are caught from the process's start (earlysignal): one that
// came before main ran cancels the context at once. A second signal
// ends the process at once, as the signal's default action does, saying
// first that nothing more will be said or written.
func interruptible() (context.Context, func() os.Signal) {
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan os.Signal, 1)
	go func() {
		s := <-earlysignal.C
		stopping.Store(true)
		got <- s
		cancel()
		again := <-earlysignal.C
		fmt.Fprintf(os.Stderr, "\nrekey: a second %s: stopped at once, without waiting for the job to stop; its counters are not printed and no --summary is written\n", signalName(again))
		signal.Reset(earlysignal.Signals...)
		if n, ok := again.(syscall.Signal); ok {
			_ = syscall.Kill(os.Getpid(), n)
		}
	}()
	return ctx, func() os.Signal {
		select {
		case s := <-got:
			return s
		default:
			return nil
		}
	}
}

func isWorker(args []string) bool {
	for _, a := range args {
		if a == "--worker" || a == "-worker" || strings.HasPrefix(a, "--worker=") || strings.HasPrefix(a, "-worker=") {
			return true
		}
	}
	return false
}
