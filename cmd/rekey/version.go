package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

func runVersion(_ context.Context, args []string, io stdio) error {
	fs := newFlagSet("version", "", io.err)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	v := version
	if v == "" {
		v = "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			v = bi.Main.Version
		}
	}
	_, err := fmt.Fprintf(io.out, "rekey %s %s %s/%s\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}
