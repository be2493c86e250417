// Package earlysignal catches SIGINT and SIGTERM from the moment the
// process's packages are initialised, long before main runs: rekey's
// binary is large, and on a busy machine its packages take a few hundred
// milliseconds to start, during which a signal would end the process
// with nothing said and no --summary written. The CLI's main reads C;
// a process that does not (a worker, a test binary) calls Release.
//
// It imports nothing but the standard library's signal handling, so Go
// initialises it among the first packages.
package earlysignal

import (
	"os"
	"os/signal"
	"syscall"
)

// Signals are the signals caught.
var Signals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// C receives the first of Signals to come (it holds one).
var C = make(chan os.Signal, 1)

func init() { signal.Notify(C, Signals...) }

// Release gives Signals back their default action, for a process that
// will not read C: one that came already ends the process now, with the
// shell's code for it (128 + its number).
func Release() {
	signal.Stop(C)
	select {
	case s := <-C:
		if n, ok := s.(syscall.Signal); ok {
			os.Exit(128 + int(n))
		}
		os.Exit(1)
	default:
	}
}
