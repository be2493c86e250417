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
	bi, _ := debug.ReadBuildInfo()
	return fmt.Sprintf("rekey %s %s %s/%s", versionOf(version, bi), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// versionOf names the build: the linker's version if one was set, else
// the module's (go install …@v1.2.3), else, for a build from a checkout,
// the commit and its time from the build's VCS stamp ("+dirty" when the
// tree had changes), so two builds can be told apart.
func versionOf(linked string, bi *debug.BuildInfo) string {
	if linked != "" {
		return linked
	}
	if bi == nil {
		return "(unknown)"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	rev := vcs["vcs.revision"]
	if rev == "" {
		return "(devel)"
	}
	v := "devel-" + rev[:min(12, len(rev))]
	if t := vcs["vcs.time"]; t != "" {
		v += " " + t
	}
	if vcs["vcs.modified"] == "true" {
		v += " +dirty"
	}
	return v
}
