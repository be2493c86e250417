package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
)

// ValidateOptions are the parsed flags of `rekey validate`.
type ValidateOptions struct {
	IO     stdio
	Config string
	// Connect also checks the stores: reachable, tables and kinds there.
	Connect bool
}

func newCmdValidate(f *factory, runF func(*ValidateOptions) error) *cobra.Command {
	opts := &ValidateOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "validate -c FILE",
		Short: "validate a config file",
		Long:  "Validates a config file, reporting every problem at once, each with its path.",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Config == "" {
				return usagef("validate: -c FILE is required")
			}
			if runF != nil {
				return runF(opts)
			}
			return runValidate(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Config, "config", "c", "", "config file (YAML)")
	cmd.Flags().BoolVar(&opts.Connect, "connect", false, "also check that the source and target can be reached and their tables or kinds exist")
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
	return cmd
}

func runValidate(ctx context.Context, o *ValidateOptions) error {
	cfg, err := loadConfig(o.Config, o.IO.err)
	if err != nil {
		return err
	}
	if err := checkInputFiles(cfg); err != nil {
		return usagef("%s: %w", o.Config, err)
	}
	if o.Connect {
		if err := checkConnect(ctx, cfg); err != nil {
			if migration.IsConfigError(err) {
				return usagef("%s: %w", o.Config, err)
			}
			return fmt.Errorf("%s: %w", o.Config, err)
		}
	}
	unchecked := "; not checked against the stores: add --connect"
	if o.Connect {
		unchecked = ""
	}
	fmt.Fprintf(o.IO.out, "%s: ok (%s -> %s, rewrite %s%s)\n", o.Config, cfg.Source.Type, cfg.Target.Type, cfg.Rewrite.Strategy, unchecked)
	return nil
}

// checkInputFiles refuses a local source path that matches no file, as
// run would (a gs:// path is checked with --connect).
func checkInputFiles(cfg *config.Config) error {
	src := cfg.Source
	if !src.IsFile() || strings.Contains(src.Path, "://") {
		return nil
	}
	if m, err := filepath.Glob(src.Path); err != nil || len(m) == 0 {
		return fmt.Errorf("source.path: %s matches no file (a relative path is the config file's folder's)", src.Path)
	}
	return nil
}

// checkConnect is migration.Check, then, for a files source, the check a
// run makes before it reads (pipeline.CheckFiles: CSV headers).
func checkConnect(ctx context.Context, cfg *config.Config) error {
	if err := migration.Check(ctx, cfg); err != nil || !cfg.Source.IsFile() {
		return err
	}
	j, err := migration.Resolve(ctx, cfg)
	if err != nil {
		return err
	}
	return pipeline.CheckFiles(ctx, j)
}

// loadConfig reads, environment-overrides and validates a config file.
// Every problem is reported at once; settings in an older form are
// reported on warn.
func loadConfig(file string, warn io.Writer) (*config.Config, error) {
	cfg, err := config.LoadFile(file)
	if err != nil {
		return nil, usagef("%s: %w", file, joinLines(err))
	}
	for _, d := range cfg.Deprecations() {
		fmt.Fprintf(warn, "rekey: %s: warning: %s\n", file, d)
	}
	return cfg, nil
}
