package main

import (
	"context"
	"flag"
	"log/slog"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/internal/demo"
)

// DemoOptions are the parsed flags of `rekey demo`.
type DemoOptions struct {
	IO       stdio
	Runner   string
	Files    bool
	KeysOnly bool
}

func newCmdDemo(f *factory, runF func(*DemoOptions) error) *cobra.Command {
	opts := &DemoOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "demo [--runner prism|direct] [--files] [--keys-only]",
		Short: "migrate the bundled sample data with rewritten keys on the local emulators (or files) and check it",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Runner != "prism" && opts.Runner != "direct" {
				return usagef("demo: --runner must be prism or direct")
			}
			if runF != nil {
				return runF(opts)
			}
			return runDemo(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Runner, "runner", "prism", "Beam runner for the migrations: prism or direct")
	fl.BoolVar(&opts.Files, "files", false, "skip the emulators: migrate files to files")
	fl.BoolVar(&opts.KeysOnly, "keys-only", false, "only show what the strategies do to the sample keys")
	_ = cmd.RegisterFlagCompletionFunc("runner", cobra.FixedCompletions([]cobra.Completion{"prism", "direct"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func runDemo(ctx context.Context, o *DemoOptions) error {
	io := o.IO
	if err := demo.Keys(io.out); err != nil || o.KeysOnly {
		return err
	}
	flag.CommandLine.Parse(nil)
	beam.Init()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.err, &slog.HandlerOptions{Level: slog.LevelWarn})))
	return demo.Migrate(ctx, io.out, o.Runner, o.Files)
}
