package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// Beam's flags (--project, --region, --staging_location, ...) are
// registered on the standard library's global flag set by Beam's packages
// and runners, which read them from there; workers are started with them.
// rekey run and redrive accept them beside their own: each is declared on
// the command, hidden from its help, and records what it is given, to be
// parsed into flag.CommandLine before the pipeline runs.

// beamValue records the arguments given to one Beam flag.
type beamValue struct {
	name, def, typ string
	args           *[]string
}

func (v *beamValue) String() string { return v.def }
func (v *beamValue) Type() string   { return v.typ }
func (v *beamValue) Set(s string) error {
	*v.args = append(*v.args, "--"+v.name+"="+s)
	return nil
}

// beamFlagSet returns Beam's flags, less those named in skip, as a flag set
// whose flags append what they are given to *args.
func beamFlagSet(args *[]string, skip *pflag.FlagSet) *pflag.FlagSet {
	fs := pflag.NewFlagSet("beam", pflag.ContinueOnError)
	flag.CommandLine.VisitAll(func(gf *flag.Flag) {
		// test.*: the testing package's flags, in test binaries.
		if strings.HasPrefix(gf.Name, "test.") || skip.Lookup(gf.Name) != nil {
			return
		}
		typ, usage := flag.UnquoteUsage(gf)
		isBool := false
		if b, ok := gf.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			typ, isBool = "bool", true
		}
		f := fs.VarPF(&beamValue{name: gf.Name, def: gf.DefValue, typ: typ, args: args}, gf.Name, "", usage)
		if isBool {
			f.NoOptDefVal = "true"
		}
	})
	return fs
}

// addHidden adds the flags of from to fs, hidden from help.
func addHidden(fs, from *pflag.FlagSet) {
	from.VisitAll(func(f *pflag.Flag) {
		c := *f
		c.Hidden = true
		fs.AddFlag(&c)
	})
}

func printBeamFlags(w io.Writer, cmd string, beamFlags *pflag.FlagSet) error {
	_, err := fmt.Fprintf(w, "Beam's flags, passed by rekey %s to Beam and its runners:\n\n%s", cmd, beamFlags.FlagUsages())
	return err
}

// beamFlagErrorsReturn makes flag.CommandLine return its errors (a bad
// value for a Beam flag) instead of printing every flag and exiting: they
// are reported once, as usage errors.
func beamFlagErrorsReturn() {
	flag.CommandLine.Init(flag.CommandLine.Name(), flag.ContinueOnError)
	flag.CommandLine.SetOutput(io.Discard)
}
