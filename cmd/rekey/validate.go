package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/internal/config"
)

// ValidateOptions are the parsed flags of `rekey validate`.
type ValidateOptions struct {
	IO     stdio
	Config string
}

func newCmdValidate(f *factory, runF func(*ValidateOptions) error) *cobra.Command {
	opts := &ValidateOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "validate -c FILE",
		Short: "validate a config file",
		Long:  "Validates a config file, reporting every problem at once, each with its path.",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			if opts.Config == "" {
				return usagef("validate: -c FILE is required")
			}
			if runF != nil {
				return runF(opts)
			}
			return runValidate(opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Config, "config", "c", "", "config file (YAML)")
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
	return cmd
}

func runValidate(o *ValidateOptions) error {
	cfg, err := loadConfig(o.Config, o.IO.err)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.IO.out, "%s: ok (%s -> %s, rewrite %s)\n", o.Config, cfg.Source.Type, cfg.Target.Type, cfg.Rewrite.Strategy)
	return nil
}

// loadConfig reads, environment-overrides and validates a config file.
// Every problem is reported at once; settings in an older form are
// reported on warn.
func loadConfig(file string, warn io.Writer) (*config.Config, error) {
	v, err := config.NewViper(file)
	if err != nil {
		return nil, usagef("%s: %v", file, err)
	}
	cfg, err := config.Load(v)
	if err != nil {
		return nil, usagef("%s: %w", file, joinLines(err))
	}
	if err := cfg.Validate(); err != nil {
		return nil, usagef("%s: %w", file, joinLines(err))
	}
	for _, d := range cfg.Deprecations() {
		fmt.Fprintf(warn, "rekey: %s: warning: %s\n", file, d)
	}
	return cfg, nil
}
