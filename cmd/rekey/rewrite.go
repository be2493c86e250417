package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
	"github.com/rekeyio/rekey/rewrite"
)

// RewriteOptions are the parsed flags of `rekey rewrite`.
type RewriteOptions struct {
	IO stdio
	// Config, if set, is a migration config whose rewrite, key schema and
	// stores are used (instead of Strategy, Params, Key, Store and Table).
	Config   string
	Strategy string
	Params   rewrite.Params
	Key      string // key schema, e.g. "LastAccess TIMESTAMP, UserId STRING(36)"
	// Store is the store of the keys, spanner or datastore; "" takes it
	// from each line's shape (--key implies spanner).
	Store     string
	Table     string
	Explain   bool
	Invert    bool
	KeepGoing bool
}

const rewriteLong = `Reads keys from stdin, one per line, and prints each rewritten key on one
line in the same notation:
  42  or  "Customer1"                       a one-column key
  [1700000000, "u1"]                        a composite Spanner key
  {"path": ["Customer", "Customer1", "Order", 5], "namespace": "ns"}
                                            a Datastore key
Each line goes through the rewrite 'rekey run' applies to a record with that
key, so a key is refused (and rewritten) exactly as the pipeline would.
With -c FILE the rewrite, the source key schema and the stores are the
config's (chains, ancestors, kind and namespace renames included); a
Spanner source's key is its source.key, so no store is asked, or else
source.schema's or the source database's.

Each input line gives one output line (an empty line for an empty one), so
input and output can be pasted side by side. A line that cannot be read or
rewritten is reported on stderr as "line N: reason" and stops the command
(exit status 1, the keys before it printed); with --keep-going its output
line is left empty, the other lines are still processed, and the exit
status is 1. A problem of the command itself (flags, the config, --invert
on a strategy without an inverse) is reported before any line is read,
with exit status 2.`

// rewriteFlagsOfConfig are the flags a config replaces.
var rewriteFlagsOfConfig = []string{"strategy", "param", "key", "store", "table"}

func newCmdRewrite(f *factory, runF func(*RewriteOptions) error) *cobra.Command {
	opts := &RewriteOptions{IO: f.IO}
	var params []string
	cmd := &cobra.Command{
		Use:   `rewrite (--strategy NAME [--param key=value ...] [--key "Col TYPE, ..."] [--store spanner|datastore] | -c FILE) [--explain] [--invert] [--keep-going] < keys`,
		Short: "rewrite keys read from stdin (one per line) and print the new keys",
		Long:  rewriteLong,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.check(cmd); err != nil {
				return err
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
	fl.StringVarP(&opts.Config, "config", "c", "", "migration config (YAML): rewrite keys with its rewrite, source key and stores")
	fl.StringVar(&opts.Strategy, "strategy", "", "strategy name (see 'rekey strategies')")
	fl.StringArrayVar(&params, "param", nil, "strategy parameter key=value (repeatable)")
	fl.StringVar(&opts.Key, "key", "", `Spanner key schema, e.g. "LastAccess TIMESTAMP, UserId STRING(36) DESC" (default: inferred from each line)`)
	fl.StringVar(&opts.Store, "store", "", "the keys' store, spanner or datastore (default: from each line; --key means spanner)")
	fl.StringVar(&opts.Table, "table", "T", "table name used in messages and DDL")
	fl.BoolVar(&opts.Explain, "explain", false, "print how the new key is computed (GoogleSQL for computed columns) and exit")
	fl.BoolVar(&opts.Invert, "invert", false, "map new keys back to old ones (invertible strategies only; needs --key, --store datastore or -c)")
	fl.BoolVar(&opts.KeepGoing, "keep-going", false, "go on after a line that fails, printing an empty line for it")
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
	_ = cmd.RegisterFlagCompletionFunc("strategy", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var names []cobra.Completion
		for _, s := range rewrite.Strategies() {
			names = append(names, cobra.CompletionWithDesc(s.Name, s.Summary))
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
	_ = cmd.RegisterFlagCompletionFunc("store", cobra.FixedCompletions([]cobra.Completion{record.Spanner, record.Datastore}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// check refuses flags that do not go together.
func (o *RewriteOptions) check(cmd *cobra.Command) error {
	if o.Config != "" {
		for _, name := range rewriteFlagsOfConfig {
			if cmd.Flags().Changed(name) {
				return usagef("rewrite: -c FILE and --%s together: the config gives the rewrite, its key and its stores", name)
			}
		}
		return nil
	}
	if o.Strategy == "" {
		return usagef("rewrite: --strategy is required, or -c FILE (see 'rekey strategies')")
	}
	switch o.Store {
	case "", record.Spanner:
	case record.Datastore:
		if o.Key != "" {
			return usagef("rewrite: --key is a Spanner key schema; it does not go with --store datastore")
		}
	default:
		return usagef("rewrite: --store must be %s or %s, got %q", record.Spanner, record.Datastore, o.Store)
	}
	return nil
}

// spec is the rewrite the flags describe, as the pipeline's rekeyer.Spec;
// its stores are "" when they come from each line.
func (o *RewriteOptions) spec() (rekeyer.Spec, error) {
	sp := rekeyer.Spec{
		Strategy:    rewrite.StepConfig{Strategy: o.Strategy, Params: o.Params},
		SourceStore: o.Store, TargetStore: o.Store,
		Table: o.Table,
	}
	if o.Key != "" {
		ks, err := rewrite.ParseKeySchema(o.Table, o.Key)
		if err != nil {
			return sp, usagef("rewrite: --key: %v", err)
		}
		sp.Key = ks.Text()
		sp.SourceStore, sp.TargetStore = record.Spanner, record.Spanner
	}
	return sp, nil
}

// configSpec is the rewrite of a migration config (a Spanner source's key
// from source.key, source.schema or the database; no target is read), and
// the source's Datastore namespace.
func configSpec(ctx context.Context, file string, warn io.Writer) (rekeyer.Spec, string, error) {
	cfg, err := loadConfig(file, warn)
	if err != nil {
		return rekeyer.Spec{}, "", err
	}
	job, err := migration.ResolveKeys(ctx, cfg)
	if migration.IsConfigError(err) {
		return rekeyer.Spec{}, "", usagef("%s: %w", file, err)
	}
	if err != nil {
		return rekeyer.Spec{}, "", fmt.Errorf("%s: %w", file, err)
	}
	return job.Spec, cfg.Source.Namespace, nil
}

func rewriteKeys(ctx context.Context, o *RewriteOptions, io stdio) error {
	var (
		spec     rekeyer.Spec
		sourceNS string
		err      error
	)
	if o.Config != "" {
		spec, sourceNS, err = configSpec(ctx, o.Config, io.err)
	} else {
		spec, err = o.spec()
	}
	if err != nil {
		return err
	}
	m, err := newKeyMapper(spec, o.Invert, sourceNS)
	if err != nil {
		return err
	}
	if o.Explain {
		return explain(io.out, m.strategy, m.explainSchema())
	}
	return m.run(io, o.KeepGoing)
}

// keyMapper rewrites (or inverts) keys one line at a time through the
// rekeyer the pipeline builds from the same rekeyer.Spec: a key becomes a
// record holding only that key, and the rewritten record's key is
// printed.
type keyMapper struct {
	spec     rekeyer.Spec
	strategy rewrite.Strategy
	invert   bool
	// sourceNamespace is restored on inverted Datastore keys when the
	// rewrite moves keys to another namespace.
	sourceNamespace string
	// fixed is the bound rewrite when the spec names the stores and the
	// key; otherwise each line's shape gives them, bound once per key
	// schema in inferred.
	fixed    *boundRewrite
	inferred map[string]*boundRewrite
}

// newKeyMapper checks everything about the rewrite that does not depend
// on a line: the strategy and its parameters, and, where the stores and
// key are known, the bound rewrite and its inverse. Its errors are usage
// errors.
func newKeyMapper(spec rekeyer.Spec, invert bool, sourceNS string) (*keyMapper, error) {
	st, err := rewrite.New(spec.Strategy)
	if err != nil {
		return nil, usageError{fmt.Errorf("rewrite: %w", joinLines(err))}
	}
	if invert {
		// A key alone carries no references: its inverse does not depend
		// on them, and the rekeyer inverts only records without them.
		spec.References, spec.ReferencesTo = nil, nil
	}
	m := &keyMapper{spec: spec, strategy: st, invert: invert, sourceNamespace: sourceNS, inferred: map[string]*boundRewrite{}}
	complete := spec.SourceStore != "" && (spec.Key != "" || !touchesSpanner(spec))
	if complete {
		if m.fixed, err = bindRewrite(spec); err != nil {
			return nil, usagef("rewrite: %v", err)
		}
	}
	if invert {
		if !complete {
			return nil, usagef(`rewrite: --invert needs to know the keys it reads: --key "Col TYPE, ..." (the source key schema) for Spanner keys, or --store datastore`)
		}
		if err := m.fixed.checkInvertible(st); err != nil {
			return nil, usagef("rewrite: --invert: %v", err)
		}
	}
	return m, nil
}

// explainSchema is the Spanner key the strategy is bound to (nil for
// Datastore keys, or when no key is known).
func (m *keyMapper) explainSchema() *rewrite.KeySchema {
	if m.fixed == nil || m.spec.TargetStore != record.Spanner {
		return nil
	}
	return &m.fixed.in
}

// maxKeyLine bounds one line of keys on stdin.
const maxKeyLine = 16 << 20

// run maps stdin to stdout, one output line per input line.
func (m *keyMapper) run(io stdio, keepGoing bool) error {
	sc := bufio.NewScanner(io.in)
	sc.Buffer(make([]byte, 0, 64<<10), maxKeyLine)
	w := bufio.NewWriter(io.out)
	defer w.Flush()
	failed, n := 0, 0
	for sc.Scan() {
		n++
		var out string
		var err error
		if text := sc.Text(); strings.TrimSpace(text) != "" {
			out, err = m.line(text)
		}
		if err != nil {
			failed++
			w.Flush()
			fmt.Fprintf(io.err, "line %d: %v\n", n, err)
			if !keepGoing {
				return fmt.Errorf("stopped at line %d (--keep-going goes on past lines that fail): %w", n, errPartial)
			}
		}
		w.WriteString(out)
		w.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		w.Flush()
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("stdin: line %d is longer than %d MiB, the most one key may take (one key per line)", n+1, maxKeyLine>>20)
		}
		return fmt.Errorf("reading stdin after line %d: %w", n, err)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d lines failed: %w", failed, n, errPartial)
	}
	return nil
}

// line rewrites one line of the notation.
func (m *keyMapper) line(text string) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("internal error: %v", p)
		}
	}()
	b := m.fixed
	var schema *rewrite.KeySchema
	if b != nil {
		if from, _ := b.ends(m.invert); from.store == record.Spanner {
			schema = &from.key
		}
	}
	pk, err := rewrite.ParseKey(text, schema)
	if err != nil {
		return "", err
	}
	if b == nil {
		if b, err = m.bindFor(pk); err != nil {
			return "", err
		}
	}
	from, to := b.ends(m.invert)
	if err := from.fits(pk); err != nil {
		return "", err
	}
	rec := from.record(pk)
	if m.invert {
		err = b.rk.Invert(&rec)
	} else {
		err = b.rk.Rewrite(&rec)
	}
	if err != nil {
		return "", err
	}
	if m.invert && to.store == record.Datastore && b.spec.TargetNamespace != "" {
		rec.Key.Namespace = m.sourceNamespace // as the pipeline's reverse backfill does
	}
	return to.format(rec, pk.Bare)
}

// bindFor binds the rewrite for a line when the spec leaves the store or
// the key to the lines: the store from the key's shape, a Spanner key
// schema inferred from its values.
func (m *keyMapper) bindFor(pk rewrite.ParsedKey) (*boundRewrite, error) {
	store := storeOfKey(pk)
	if m.spec.SourceStore != "" && m.spec.SourceStore != store {
		return nil, fmt.Errorf("a %s key, but --store is %s", store, m.spec.SourceStore)
	}
	spec := m.spec
	spec.SourceStore, spec.TargetStore = store, store
	if store == record.Spanner {
		spec.Key = rewrite.InferSchema(spec.Table, pk.Values).Text()
	}
	sig := store + " " + spec.Key
	if b, ok := m.inferred[sig]; ok {
		return b, nil
	}
	b, err := bindRewrite(spec)
	if err != nil {
		return nil, err
	}
	m.inferred[sig] = b
	return b, nil
}

func storeOfKey(pk rewrite.ParsedKey) string {
	if pk.IsDatastore {
		return record.Datastore
	}
	return record.Spanner
}

// touchesSpanner reports whether either end of the rewrite is Spanner
// (then it needs a key schema).
func touchesSpanner(sp rekeyer.Spec) bool {
	return sp.SourceStore == record.Spanner || sp.TargetStore == record.Spanner
}

// boundRewrite is a rekeyer built from a complete spec, with the Spanner
// keys before (in) and after (out) the rewrite.
type boundRewrite struct {
	spec    rekeyer.Spec
	rk      *rekeyer.Rekeyer
	in, out rewrite.KeySchema
}

func bindRewrite(spec rekeyer.Spec) (*boundRewrite, error) {
	rk, err := spec.Build()
	if err != nil {
		return nil, err
	}
	b := &boundRewrite{spec: spec, rk: rk, out: rk.SpannerOut()}
	if spec.Key != "" {
		if b.in, err = rewrite.ParseKeySchema(spec.Table, spec.Key); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// keyEnd is one side of a rewrite: the store of its keys and, for
// Spanner, their key schema.
type keyEnd struct {
	store string
	key   rewrite.KeySchema
}

// ends are the side keys are read from and the side they are printed
// for: source to target, or back when inverting.
func (b *boundRewrite) ends(invert bool) (from, to keyEnd) {
	src := keyEnd{store: b.spec.SourceStore}
	if src.store == record.Spanner {
		src.key = b.in
	}
	tgt := keyEnd{store: b.spec.TargetStore}
	if tgt.store == record.Spanner {
		tgt.key = b.out
	}
	if invert {
		return tgt, src
	}
	return src, tgt
}

// checkInvertible says why keys of this rewrite cannot be mapped back,
// if they cannot.
func (b *boundRewrite) checkInvertible(st rewrite.Strategy) error {
	if b.spec.SourceStore != b.spec.TargetStore {
		return fmt.Errorf("the rewrite goes from %s to %s; keys are inverted within one store only", b.spec.SourceStore, b.spec.TargetStore)
	}
	invertible := false
	if b.spec.TargetStore == record.Spanner {
		r, err := st.Spanner(b.in)
		invertible = err == nil && r.Invertible()
	} else {
		r, err := st.Datastore()
		invertible = err == nil && r.Invertible()
	}
	if invertible {
		return nil
	}
	err := fmt.Errorf("strategy %s is not invertible (see 'rekey strategies')", st.Info().Name)
	if b.spec.KeepOriginalKey != "" {
		err = fmt.Errorf("%w; the config keeps each record's old key in %s, which a key alone does not carry", err, b.spec.KeepOriginalKey)
	}
	return err
}

// fits refuses a key of the other store.
func (e keyEnd) fits(pk rewrite.ParsedKey) error {
	got := storeOfKey(pk)
	switch {
	case got == e.store:
		return nil
	case e.store == record.Spanner:
		return fmt.Errorf("a Datastore key, but the keys read are Spanner keys (%s)", e.key.Text())
	default:
		return errors.New("a Spanner key, but the keys read are Datastore keys")
	}
}

// record is a record holding only the key pk.
func (e keyEnd) record(pk rewrite.ParsedKey) record.Record {
	if e.store == record.Datastore {
		k := pk.Datastore
		return record.Record{Key: &k, Table: k.Leaf().Kind}
	}
	rec := record.Record{Fields: make([]record.Field, len(e.key.Columns))}
	for i, c := range e.key.Columns {
		rec.Fields[i] = record.Field{Name: c.Name, Value: record.FromKeyValue(pk.Values[i])}
	}
	return rec
}

// format prints the key of rec in the notation: a bare value if bare and
// the key has one column.
func (e keyEnd) format(rec record.Record, bare bool) (string, error) {
	if e.store == record.Datastore {
		if rec.Key == nil {
			return "", errors.New("the rewrite gave no key")
		}
		return rewrite.FormatDatastoreKey(*rec.Key), nil
	}
	vals := make([]rewrite.Value, len(e.key.Columns))
	for i, c := range e.key.Columns {
		v, _ := rec.Get(c.Name)
		kv, err := record.KeyValue(v, c.Type)
		if err != nil {
			return "", fmt.Errorf("key column %s: %w", c.Name, err)
		}
		vals[i] = kv
	}
	return rewrite.FormatKey(vals, bare), nil
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
