package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran, but some input failed or an operation failed
	exitUsage   = 2 // bad flags, parameters or config: nothing was done
)

// usageError marks errors in what the user asked for (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// errPartial reports that some inputs failed; each was already reported.
var errPartial = errors.New("some inputs failed")

// exitCode maps a command's error to an exit code, printing it.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	fmt.Fprintln(stderr, "rekey:", err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFailure
}

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, io stdio) error
}

type stdio struct {
	in       io.Reader
	out, err io.Writer
}

func commands() map[string]command {
	cs := []command{
		{"demo", "migrate the bundled sample data with rewritten keys on the local emulators (or files) and check it", runDemo},
		{"strategies", "list the key-rewrite strategies", runStrategies},
		{"rewrite", "rewrite keys read from stdin (one per line) and print the new keys", runRewrite},
		{"run", "migrate: read the source, rewrite every key, write the target (a Beam pipeline)", runRun},
		{"redrive", "re-submit the records of a dead-letter file after fixing the cause", runRedrive},
		{"validate", "validate a config file", runValidate},
		{"version", "print rekey's version", runVersion},
	}
	m := map[string]command{}
	for _, c := range cs {
		m[c.name] = c
	}
	return m
}

func run(ctx context.Context, args []string, in io.Reader, out, errw io.Writer) error {
	cmds := commands()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printUsage(out, cmds)
		if len(args) == 0 {
			return usagef("no command given")
		}
		return nil
	}
	c, ok := cmds[args[0]]
	if !ok {
		printUsage(errw, cmds)
		return usagef("unknown command %q", args[0])
	}
	return c.run(ctx, args[1:], stdio{in: in, out: out, err: errw})
}

func printUsage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "rekey rewrites keys while migrating data into Cloud Spanner and Cloud Datastore.")
	fmt.Fprintln(w, "\nUsage: rekey COMMAND [flags]\n\nCommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'rekey COMMAND -h' for a command's flags.")
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name, usage string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintf(w, "Usage: rekey %s %s\n\nFlags:\n", name, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, turning flag errors into usage errors.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected arguments: %s", fs.Name(), strings.Join(fs.Args(), " "))
	}
	return nil
}

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
