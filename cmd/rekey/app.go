package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
	fmt.Fprintln(stderr, "rekey:", err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	// An error may choose its own code (lint's findings: exitFindings).
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return exitFailure
}

// exitInterrupted reports a command stopped by a signal and returns the
// shell's exit code for it: 128 + the signal's number (130 for SIGINT, 143
// for SIGTERM).
func exitInterrupted(sig os.Signal, stderr io.Writer) int {
	code := 128 + int(syscall.SIGINT)
	if sig == syscall.SIGTERM {
		code = 128 + int(syscall.SIGTERM)
	}
	fmt.Fprintf(stderr, "rekey: stopped by %s: what was committed stays, unfinished files were removed; a re-run of the same config converges (upserts rewrite the same values, inserts recognise their own earlier writes)\n", signalName(sig))
	return code
}

// signalName is SIGTERM for SIGTERM, SIGINT for the others caught.
func signalName(sig os.Signal) string {
	if sig == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}

type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// factory holds what every command is built with.
type factory struct {
	IO stdio
}

// run executes the command line args (without the program name).
func run(ctx context.Context, args []string, in io.Reader, out, errw io.Writer) error {
	f := &factory{IO: stdio{in: in, out: out, err: errw}}
	root := newCmdRoot(f)
	if len(args) == 0 {
		root.SetArgs([]string{"help"})
		_ = root.Execute()
		return usagef("no command given")
	}
	root.SetArgs(args)
	return execute(ctx, root)
}

// execute runs a command tree. What fails before a command's own code runs
// (an unknown command or flag, a stray argument) is a usage error.
func execute(ctx context.Context, root *cobra.Command) error {
	started := false
	root.PersistentPreRun = func(*cobra.Command, []string) { started = true }
	err := root.ExecuteContext(ctx)
	var ue usageError
	if err != nil && !started && !errors.As(err, &ue) {
		return usageError{errors.New(strings.TrimSpace(err.Error()))}
	}
	return err
}

func newCmdRoot(f *factory) *cobra.Command {
	root := &cobra.Command{
		Use:           "rekey",
		Short:         "rewrite keys while migrating data into Cloud Spanner and Cloud Datastore",
		Long:          "rekey rewrites keys while migrating data into Cloud Spanner and Cloud Datastore.",
		Version:       versionString(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(f.IO.in)
	root.SetOut(f.IO.out)
	root.SetErr(f.IO.err)
	root.SetVersionTemplate("{{.Version}}\n")
	// --version without cobra's -v shorthand: -v is --verbose where a
	// command has it (run), and one letter should not mean two things.
	root.Flags().Bool("version", false, "print rekey's version")
	root.SetFlagErrorFunc(flagError)
	root.SuggestionsMinimumDistance = 2
	root.AddCommand(
		newCmdDemo(f, nil),
		newCmdRun(f, nil),
		newCmdRedrive(f, nil),
		newCmdVerify(f, false),
		newCmdVerify(f, true),
		newCmdLoad(f),
		newCmdPlan(f),
		newCmdStrategies(f, nil),
		newCmdRewrite(f, nil),
		newCmdValidate(f, nil),
		newCmdConfig(f, nil),
		newCmdCohort(f, nil),
		newCmdSplits(f),
		newCmdLint(f),
		newCmdVersion(f, nil),
		newCmdEmulators(f),
	)
	// cobra's help and completion commands; an unknown topic or shell is a
	// usage error.
	root.InitDefaultHelpCmd()
	if c, _, err := root.Find([]string{"help"}); err == nil && c != root {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if _, _, err := cmd.Root().Find(args); err != nil {
				return usageError{errors.New(strings.TrimSpace(err.Error()))}
			}
			return nil
		}
	}
	root.InitDefaultCompletionCmd()
	if c, _, err := root.Find([]string{"completion"}); err == nil && c != root {
		c.SuggestionsMinimumDistance = root.SuggestionsMinimumDistance
		c.Args = unknownSubcommand
		c.RunE = func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Help()
			return usagef("completion: no shell given")
		}
	}
	return root
}

// unknownSubcommand refuses an argument that names none of cmd's
// subcommands, suggesting the nearest.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return usageError{errors.New(msg)}
}

// noArgs refuses positional arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s: unexpected arguments: %s", cmd.Name(), strings.Join(args, " "))
	}
	return nil
}

// flagError turns a flag parsing error into a short usage error, with the
// nearest known flag for one that does not exist.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	var ne *pflag.NotExistError
	if errors.As(err, &ne) {
		typed := "--" + ne.GetSpecifiedName()
		if s := ne.GetSpecifiedShortnames(); s != "" {
			typed = "-" + s
		}
		msg = "flag provided but not defined: " + typed
		if s := suggestFlag(cmd, strings.TrimLeft(typed, "-")); s != "" {
			msg += " (did you mean --" + s + "?)"
		}
	}
	prefix := ""
	if cmd.HasParent() {
		prefix = cmd.Name() + ": "
	}
	return usagef("%s%s\nRun '%s --help' for usage.", prefix, msg, cmd.CommandPath())
}

// suggestFlag returns the name of cmd's flag (hidden ones included) nearest
// to typed, or "" if none is near.
func suggestFlag(cmd *cobra.Command, typed string) string {
	maxDist := cmd.Root().SuggestionsMinimumDistance
	if maxDist <= 0 {
		maxDist = 2
	}
	typed = strings.ToLower(typed)
	var names []string
	visit := func(fl *pflag.Flag) { names = append(names, fl.Name) }
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	sort.Strings(names)
	best, bestDist := "", maxDist+1
	for _, n := range names {
		d := editDistance(typed, strings.ToLower(n))
		if d < bestDist || (best == "" && len(typed) > 2 && strings.HasPrefix(n, typed)) {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance is the number of single-character insertions, deletions,
// substitutions and transpositions of neighbours that turn a into b (the
// optimal string alignment distance).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
