package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// jobPrinter is Beam's logger during a Dataflow dry run: the translated
// job, which Beam's Dataflow runner logs as one JSON message, is written
// to out as the indented JSON it is (readable, and parseable by tools);
// every other message goes on to next.
type jobPrinter struct {
	out  io.Writer
	next beamlog.Logger
}

func (p jobPrinter) Log(ctx context.Context, sev beamlog.Severity, calldepth int, msg string) {
	if t := strings.TrimSpace(msg); strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		fmt.Fprintln(p.out, t)
		return
	}
	p.next.Log(ctx, sev, calldepth+1, msg)
}
