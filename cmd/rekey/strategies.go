package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/rewrite"
)

// StrategiesOptions are the parsed flags of `rekey strategies` (none).
type StrategiesOptions struct {
	IO stdio
}

func newCmdStrategies(f *factory, runF func(*StrategiesOptions) error) *cobra.Command {
	opts := &StrategiesOptions{IO: f.IO}
	return &cobra.Command{
		Use:   "strategies",
		Short: "list the key-rewrite strategies",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runStrategies(opts)
		},
	}
}

func runStrategies(o *StrategiesOptions) error {
	tw := tabwriter.NewWriter(o.IO.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STRATEGY\tSTORES\tINVERTIBLE\tDESCRIPTION")
	for _, s := range rewrite.Strategies() {
		var stores []string
		if s.Spanner {
			stores = append(stores, "spanner")
		}
		if s.Datastore {
			stores = append(stores, "datastore")
		}
		inv := "yes"
		if !s.Invertible {
			inv = "no"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, strings.Join(stores, ","), inv, s.Summary)
	}
	return tw.Flush()
}
