package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

// VersionOptions are the parsed flags of `rekey version` (none).
type VersionOptions struct {
	IO stdio
}

func newCmdVersion(f *factory, runF func(*VersionOptions) error) *cobra.Command {
	opts := &VersionOptions{IO: f.IO}
	return &cobra.Command{
		Use:   "version",
		Short: "print rekey's version",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			_, err := fmt.Fprintln(opts.IO.out, versionString())
			return err
		},
	}
}

// versionString is what `rekey version` and `rekey --version` print.
func versionString() string {
	v := version
	if v == "" {
		v = "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			v = bi.Main.Version
		}
	}
	return fmt.Sprintf("rekey %s %s %s/%s", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
