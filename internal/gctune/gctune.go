// Package gctune sets the Go collector for rekey's processes: a larger
// collection target (GOGC 200) under a soft memory limit, each unless the
// environment sets it. The CLI calls Tune first, in its own process and
// in every worker process it is started as.
package gctune

import (
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// gcPercent is the Go collector's target rekey runs with unless GOGC is
// set: a collection starts when the heap has grown by twice the live
// heap, not once (Go's default, 100).
//
// A migration allocates at a steady rate (every record is parsed into
// fields, batched, encoded and written) while its live heap is the
// runner's state and the batches in flight: collecting half as often
// marks that live heap half as often, for a heap that peaks at three
// times it instead of two. On files to files (bench/cpu,
// 1,000,000 records) GOGC 200 took rekey's CPU from 4.85 to 3.98 s and
// its wall time from 3.65 to 3.22 s, for 10 MB more peak RSS (120 → 130
// MB); see BENCHMARKS.md.
const gcPercent = 200

// memoryRatio is the share of the memory the process may use (its
// cgroup's limit, else the machine's) that rekey sets as its soft memory
// limit unless GOMEMLIMIT (or AUTOMEMLIMIT) is set: near the limit the
// collector runs as often as it must to stay under it, so the larger
// target of gcPercent gives way before memory runs out instead of
// doubling a large live heap's peak (`rekey plan` of millions of keys,
// a shuffle held in the runner's memory).
const memoryRatio = 0.7

// Tune sets the collector's target and the soft memory limit, each
// unless the environment sets it (GOGC; GOMEMLIMIT or AUTOMEMLIMIT).
// It runs first in every rekey process: the CLI's and each worker's,
// where a migration's records are processed.
func Tune() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	// An error (no limit could be read) leaves Go's default: no limit.
	memlimit.Set(
		memlimit.WithRatio(memoryRatio),
		memlimit.WithProvider(memlimit.ApplyFallback(memlimit.FromCgroup, memlimit.FromSystem)),
	)
}
