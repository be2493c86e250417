package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/migration/config"
)

// ConfigShowOptions are the parsed flags of `rekey config show`.
type ConfigShowOptions struct {
	IO     stdio
	Config string
	Format string // yaml or json
	// Sets are --set KEY=VALUE overrides, applied over the file and the
	// environment.
	Sets []string
}

const configShowLong = `Prints the effective config of FILE: every value a run uses, after the
REKEY_* environment overrides, the --set flags and the defaults, each with
where it came from:

  file     the config file, with the line ("rekey.yaml:12")
  env      an environment variable (REKEY_WRITE_BATCH_ROWS)
  flag     a --set flag
  default  filled in by rekey (docs/config.md lists every default)

As YAML (the default) the output is itself a config with the same values,
each followed by a comment naming its source; as JSON it is a list of
{"key", "value", "source", "from"} objects. The config's problems, if any,
follow on standard error, all of them at once, and the exit code is 2.`

func newCmdConfig(f *factory, runShow func(*ConfigShowOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "inspect a config: rekey config show -c FILE",
		Args:  unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Help()
			return usagef("config: no subcommand given")
		},
	}
	cmd.SuggestionsMinimumDistance = 2
	cmd.AddCommand(newCmdConfigShow(f, runShow))
	return cmd
}

func newCmdConfigShow(f *factory, runF func(*ConfigShowOptions) error) *cobra.Command {
	opts := &ConfigShowOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "show -c FILE [--format yaml|json] [--set KEY=VALUE]...",
		Short: "print the effective config, each value with where it came from",
		Long:  configShowLong,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Config == "" {
				return usagef("config show: -c FILE is required")
			}
			if opts.Format != "yaml" && opts.Format != "json" {
				return usagef("config show: --format must be yaml or json, got %q", opts.Format)
			}
			if runF != nil {
				return runF(opts)
			}
			return runConfigShow(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.Config, "config", "c", "", "config file (YAML)")
	fl.StringVar(&opts.Format, "format", "yaml", "output format: yaml or json")
	fl.StringArrayVar(&opts.Sets, "set", nil, "override a key, e.g. --set write.batch_rows=100 (repeatable)")
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"yaml", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func runConfigShow(o *ConfigShowOptions) error {
	v, err := config.NewViper(o.Config)
	if err != nil {
		return usagef("%w", err)
	}
	flags, err := config.ApplySets(v, "--set", o.Sets)
	if err != nil {
		return usagef("config show: %w", joinLines(err))
	}
	eff, err := config.Explain(v, flags)
	if err != nil {
		return usagef("%s: %w", o.Config, err)
	}
	if o.Format == "json" {
		err = config.WriteJSON(o.IO.out, eff.Settings)
	} else {
		err = config.WriteYAML(o.IO.out, eff.Settings, fmt.Sprintf("effective config of %s: each value is followed by where it came from", o.Config))
	}
	if err != nil {
		return err
	}
	if eff.Problems != nil {
		return usagef("%s: %w", o.Config, joinLines(eff.Problems))
	}
	return nil
}
