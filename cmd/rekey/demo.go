package main

import (
	"context"
	"flag"
	"log/slog"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/cmd/rekey/internal/demo"
)

// DemoOptions are the parsed flags of `rekey demo`.
type DemoOptions struct {
	IO       stdio
	Runner   string
	Files    bool
	KeysOnly bool
	// Out and KeepConfigs are the folders of --out and --keep-configs.
	Out         string
	KeepConfigs string
}

func newCmdDemo(f *factory, runF func(*DemoOptions) error) *cobra.Command {
	opts := &DemoOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "demo [--runner prism|direct] [--files] [--out DIR] [--keep-configs DIR] [--keys-only]",
		Short: "migrate the bundled sample data with rewritten keys on the local emulators (or files) and check it",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Runner != "prism" && opts.Runner != "direct" {
				return usagef("demo: --runner must be prism or direct")
			}
			if opts.KeysOnly && (opts.Out != "" || opts.KeepConfigs != "") {
				return usagef("demo: --keys-only runs no migration, so it writes nothing to --out or --keep-configs")
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
	fl.StringVar(&opts.Out, "out", "", "folder for the demo's files: the file migration's input and output, dead letters, the plan's report (default: rekey-demo-files in the temporary directory)")
	fl.StringVar(&opts.KeepConfigs, "keep-configs", "", "write each migration's config into this folder, to run it again with rekey run -c FILE")
	fl.BoolVar(&opts.KeysOnly, "keys-only", false, "only show what the strategies do to the sample keys")
	_ = cmd.MarkFlagDirname("out")
	_ = cmd.MarkFlagDirname("keep-configs")
	_ = cmd.RegisterFlagCompletionFunc("runner", cobra.FixedCompletions([]cobra.Completion{"prism", "direct"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func runDemo(ctx context.Context, o *DemoOptions) error {
	io := o.IO
	if o.KeysOnly {
		return demo.Keys(io.out)
	}
	// The folders first: one holding the user's files is refused before
	// anything is printed.
	d, err := demo.Prepare(io.out, demo.Options{Runner: o.Runner, FilesOnly: o.Files, Out: o.Out, KeepConfigs: o.KeepConfigs})
	if err != nil {
		return err
	}
	if err := demo.Keys(io.out); err != nil {
		return err
	}
	flag.CommandLine.Parse(nil)
	beam.Init()
	slog.SetDefault(slog.New(quietWhenStopping{slog.NewTextHandler(io.err, &slog.HandlerOptions{Level: slog.LevelWarn})}))
	return d.Migrate(ctx)
}
