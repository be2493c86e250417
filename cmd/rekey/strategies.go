package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/rekeyio/rekey/rewrite"
)

func runStrategies(_ context.Context, args []string, io stdio) error {
	fs := newFlagSet("strategies", "", io.err)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(io.out, 0, 4, 2, ' ', 0)
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
