package main

import (
	"context"
	"fmt"

	"github.com/rekeyio/rekey/internal/config"
)

func runValidate(_ context.Context, args []string, io stdio) error {
	fs := newFlagSet("validate", "-c FILE", io.err)
	file := fs.String("c", "", "config file (YAML)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return usagef("validate: -c FILE is required")
	}
	cfg, err := loadConfig(*file)
	if err != nil {
		return err
	}
	fmt.Fprintf(io.out, "%s: ok (%s -> %s, rewrite %s)\n", *file, cfg.Source.Type, cfg.Target.Type, cfg.Rewrite.Strategy)
	return nil
}

// loadConfig reads, environment-overrides and validates a config file.
// Every problem is reported at once.
func loadConfig(file string) (*config.Config, error) {
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
	return cfg, nil
}
