package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/rewrite"
)

// RewriteOptions are the parsed flags of `rekey rewrite`.
type RewriteOptions struct {
	IO       stdio
	Strategy string
	Params   rewrite.Params
	Key      string // key schema, e.g. "LastAccess TIMESTAMP, UserId STRING(36)"
	Table    string
	Explain  bool
	Invert   bool
}

const rewriteLong = `Reads keys from stdin, one per line, and prints each rewritten key on one
line in the same notation:
  42  or  "Customer1"                       a one-column key
  [1700000000, "u1"]                        a composite Spanner key
  {"path": ["Customer", "Customer1", "Order", 5], "namespace": "ns"}
                                            a Datastore key
A line that cannot be read or rewritten is reported on stderr as
"line N: reason"; the others are still processed, and the exit status is 1.`

func newCmdRewrite(f *factory, runF func(*RewriteOptions) error) *cobra.Command {
	opts := &RewriteOptions{IO: f.IO}
	var params []string
	cmd := &cobra.Command{
		Use:   `rewrite --strategy NAME [--param key=value ...] [--key "Col TYPE, ..."] [--explain] [--invert] < keys`,
		Short: "rewrite keys read from stdin (one per line) and print the new keys",
		Long:  rewriteLong,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Strategy == "" {
				return usagef("rewrite: --strategy is required (see 'rekey strategies')")
			}
			opts.Params = rewrite.Params{}
			for _, p := range params {
				k, v, ok := strings.Cut(p, "=")
				if !ok || k == "" {
					return usagef("rewrite: --param %q: want key=value", p)
				}
				opts.Params[k] = v
			}
			if runF != nil {
				return runF(opts)
			}
			return rewriteKeys(cmd.Context(), opts, opts.IO)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Strategy, "strategy", "", "strategy name (see 'rekey strategies')")
	fl.StringArrayVar(&params, "param", nil, "strategy parameter key=value (repeatable)")
	fl.StringVar(&opts.Key, "key", "", `Spanner key schema, e.g. "LastAccess TIMESTAMP, UserId STRING(36) DESC" (default: inferred from each line)`)
	fl.StringVar(&opts.Table, "table", "T", "table name used in messages and DDL")
	fl.BoolVar(&opts.Explain, "explain", false, "print how the new key is computed (GoogleSQL for computed columns) and exit")
	fl.BoolVar(&opts.Invert, "invert", false, "map new keys back to old ones (invertible strategies only)")
	_ = cmd.RegisterFlagCompletionFunc("strategy", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var names []cobra.Completion
		for _, s := range rewrite.Strategies() {
			names = append(names, cobra.CompletionWithDesc(s.Name, s.Summary))
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// keyRewriter rewrites keys of any shape, binding the strategy once per key
// schema.
type keyRewriter struct {
	strategy rewrite.Strategy
	schema   *rewrite.KeySchema
	table    string
	invert   bool
	spanner  map[string]*rewrite.SpannerRewriter
	ds       *rewrite.DatastoreRewriter
	dsErr    error
}

func (kr *keyRewriter) spannerFor(s rewrite.KeySchema) (*rewrite.SpannerRewriter, error) {
	sig := s.String()
	for _, c := range s.Columns {
		sig += " " + c.SQLType()
	}
	if r, ok := kr.spanner[sig]; ok {
		return r, nil
	}
	r, err := kr.strategy.Spanner(s)
	if err != nil {
		return nil, err
	}
	kr.spanner[sig] = r
	return r, nil
}

// line rewrites one line of the notation.
func (kr *keyRewriter) line(text string) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("internal error: %v", p)
		}
	}()
	parseSchema := kr.schema
	if kr.invert && kr.schema != nil {
		r, err := kr.spannerFor(*kr.schema)
		if err != nil {
			return "", err
		}
		parseSchema = &rewrite.KeySchema{Table: kr.table, Columns: r.Out().Columns}
	}
	pk, err := rewrite.ParseKey(text, parseSchema)
	if err != nil {
		return "", err
	}
	if pk.IsDatastore {
		if kr.ds == nil && kr.dsErr == nil {
			kr.ds, kr.dsErr = kr.strategy.Datastore()
		}
		if kr.dsErr != nil {
			return "", kr.dsErr
		}
		var k rewrite.DatastoreKey
		if kr.invert {
			k, err = kr.ds.Invert(pk.Datastore)
		} else {
			if err := rewrite.ValidateDatastoreKey(pk.Datastore); err != nil {
				return "", err
			}
			k, err = kr.ds.Rewrite(pk.Datastore)
		}
		if err != nil {
			return "", err
		}
		return rewrite.FormatDatastoreKey(k), nil
	}
	if kr.invert && kr.schema == nil {
		return "", fmt.Errorf("--invert on Spanner keys needs --key with the source key schema")
	}
	schema := rewrite.InferSchema(kr.table, pk.Values)
	if kr.schema != nil {
		schema = *kr.schema
	}
	r, err := kr.spannerFor(schema)
	if err != nil {
		return "", err
	}
	var vals []rewrite.Value
	if kr.invert {
		vals, err = r.Invert(nil, pk.Values)
	} else {
		vals, err = r.Rewrite(nil, pk.Values)
	}
	if err != nil {
		return "", err
	}
	return rewrite.FormatKey(vals, pk.Bare), nil
}

func rewriteKeys(_ context.Context, o *RewriteOptions, io stdio) error {
	s, err := rewrite.New(rewrite.StepConfig{Strategy: o.Strategy, Params: o.Params})
	if err != nil {
		return usageError{fmt.Errorf("rewrite: %w", joinLines(err))}
	}
	kr := &keyRewriter{strategy: s, table: o.Table, invert: o.Invert, spanner: map[string]*rewrite.SpannerRewriter{}}
	if o.Key != "" {
		ks, err := rewrite.ParseKeySchema(o.Table, o.Key)
		if err != nil {
			return usagef("rewrite: --key: %v", err)
		}
		kr.schema = &ks
		if _, err := kr.spannerFor(ks); err != nil {
			return usagef("rewrite: %v", err)
		}
	}
	if o.Explain {
		return explain(io.out, s, kr.schema)
	}
	sc := bufio.NewScanner(io.in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	w := bufio.NewWriter(io.out)
	defer w.Flush()
	failed := 0
	n := 0
	for sc.Scan() {
		n++
		text := sc.Text()
		if strings.TrimSpace(text) == "" {
			continue
		}
		out, err := kr.line(text)
		if err != nil {
			failed++
			w.Flush()
			fmt.Fprintf(io.err, "line %d: %v\n", n, err)
			continue
		}
		w.WriteString(out)
		w.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading stdin after line %d: %w", n, err)
	}
	if failed > 0 {
		w.Flush()
		return fmt.Errorf("%d of %d lines failed: %w", failed, n, errPartial)
	}
	return nil
}

func explain(w io.Writer, s rewrite.Strategy, schema *rewrite.KeySchema) error {
	info := s.Info()
	fmt.Fprintf(w, "strategy:      %s\n", s.Spec())
	fmt.Fprintf(w, "invertible:    %t\n", info.Invertible)
	fmt.Fprintf(w, "deterministic: %t\n", info.Deterministic)
	if schema == nil {
		if info.Spanner {
			fmt.Fprintln(w, `spanner:       pass --key "Col TYPE, ..." to see the new key and its GoogleSQL`)
		}
		if info.Datastore {
			fmt.Fprintln(w, "datastore:     supported")
		}
		return nil
	}
	r, err := s.Spanner(*schema)
	if err != nil {
		return usagef("explain: %v", err)
	}
	fmt.Fprintf(w, "old key:       %s\n", "("+r.In().Text()+")")
	fmt.Fprintf(w, "new key:       %s\n", "("+r.Out().Text()+")")
	for _, e := range r.Explain() {
		fmt.Fprintf(w, "  %s\n", e)
	}
	return nil
}

// joinLines flattens an errors.Join tree into one error per line.
func joinLines(err error) error {
	var lines []string
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range j.Unwrap() {
				walk(c)
			}
			return
		}
		lines = append(lines, e.Error())
	}
	walk(err)
	if len(lines) == 1 {
		return errors.New(lines[0])
	}
	return errors.New("\n  " + strings.Join(lines, "\n  "))
}
