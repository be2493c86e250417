package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	"github.com/googleapis/gax-go/v2"
	"github.com/spf13/cobra"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/plan/splits"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// SplitsOptions are the flags of `rekey splits` besides those every
// pipeline command has (RunOptions; the pipeline samples the source when
// the rewrite does not spread keys uniformly).
type SplitsOptions struct {
	Nodes, PerNode int
	Expire         time.Duration
	Out            string
	Apply          bool
	Indexes        []string
	// Sample is how many rewritten keys the quantiles are taken from (0:
	// 100 a point, at least 10,000).
	Sample int
}

const splitsLong = `Computes split points for the target table of a migration to Spanner, to add
before the load so it starts on about --per-node splits a node instead of one.
For a rewrite that spreads the leading key column uniformly (hashprefix on the
first key column, shard, bitreverse on the first key column, uuid) the points
are evenly spaced over that column's values; for any other they are quantiles
of a uniform sample of the rewritten keys (a Beam job on --runner). Interleaved
child tables split with their parent: the points are for the root table.

The points are written in the format of 'gcloud spanner databases splits add
--splits-file' (to --out FILE, or standard output), at most 100 a file (more
go to FILE-1, FILE-2, ...); notes and the gcloud command go to standard error.
With --apply rekey also adds them itself (AddSplitPoints, 100 a request),
tagged with the initiator "rekey".`

// splitsEnv is what rekey splits reaches the world through; tests put
// fakes in.
type splitsEnv struct {
	resolve func(context.Context, *config.Config) (*migration.Job, error)
	sample  func(context.Context, *migration.Job, pipeline.Runner, int) ([]record.Record, error)
	// admin connects to the database admin API (options for tests).
	admin func(context.Context) (splitAdder, error)
	now   func() time.Time
}

// splitAdder is the part of the database admin client --apply uses.
type splitAdder interface {
	AddSplitPoints(context.Context, *databasepb.AddSplitPointsRequest, ...gax.CallOption) (*databasepb.AddSplitPointsResponse, error)
	Close() error
}

func newCmdSplits(f *factory) *cobra.Command {
	return splitsCommand(f, splitsEnv{
		resolve: migration.ResolveOffline, // the target need not exist yet: points are made before the load
		sample:  pipeline.PlanSample,
		admin:   adminClient(),
		now:     time.Now,
	})
}

// adminClient connects to the database admin API with opts; with
// SPANNER_EMULATOR_HOST set the client goes to the emulator.
func adminClient(opts ...option.ClientOption) func(context.Context) (splitAdder, error) {
	return func(ctx context.Context) (splitAdder, error) {
		return database.NewDatabaseAdminClient(ctx, opts...)
	}
}

func splitsCommand(f *factory, env splitsEnv) *cobra.Command {
	opts := &RunOptions{IO: f.IO}
	o := &SplitsOptions{}
	cmd := &cobra.Command{
		Use:   "splits -c FILE --nodes N [--per-node 10] [--expire 240h] [--out FILE] [--apply] [--runner ...] [Beam flags]",
		Short: "compute Spanner split points for the target table (gcloud's splits file; --apply adds them)",
		Long:  splitsLong,
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Nodes, "nodes", 0, "the target instance's nodes (1,000 processing units are a node)")
	fl.IntVar(&o.PerNode, "per-node", 10, "split points a node")
	fl.DurationVar(&o.Expire, "expire", splits.DefaultExpiry, "how long the points last (at most 720h, 30 days)")
	fl.StringVarP(&o.Out, "out", "o", "", "write the splits file here (more than 100 points: FILE-1, FILE-2, ...); default standard output")
	fl.BoolVar(&o.Apply, "apply", false, "also add the points to the target database (AddSplitPoints)")
	fl.StringSliceVar(&o.Indexes, "index", nil, "also split these indexes (not supported yet)")
	fl.IntVar(&o.Sample, "sample", 0, "rewritten keys to take quantiles of, for a rewrite that does not spread keys uniformly (default 100 a point, at least 10000)")
	return pipelineCommand(cmd, opts, func(cmd *cobra.Command) error {
		if err := o.check(); err != nil {
			return err
		}
		beamFlagErrorsReturn()
		return runSplits(cmd.Context(), opts, o, env)
	})
}

// check refuses flags that ask for what cannot be done.
func (o *SplitsOptions) check() error {
	switch {
	case o.Nodes < 1:
		return usagef("splits: --nodes N is required: the target instance's node count (at least 1)")
	case o.PerNode < 1:
		return usagef("splits: --per-node must be at least 1, got %d", o.PerNode)
	case o.Expire <= 0:
		return usagef("splits: --expire must be positive, got %s", o.Expire)
	case o.Expire > splits.MaxExpiry:
		return usagef("splits: --expire %s is more than Spanner allows for split points: at most 720h (30 days)", o.Expire)
	case o.Sample < 0:
		return usagef("splits: --sample must be 0 (the default) or more, got %d", o.Sample)
	case len(o.Indexes) > 0:
		return usagef("splits: --index %s: split points for indexes are not supported yet: the sample keeps the key columns only, and an index's points need its own columns' values; write INDEX lines for gcloud by hand (INDEX NAME (VALUE, ...))", strings.Join(o.Indexes, ","))
	}
	return nil
}

// sampleSize is how many keys the quantiles of n points are taken from.
func (o *SplitsOptions) sampleSize(n int) int {
	if o.Sample > 0 {
		return o.Sample
	}
	return max(10_000, 100*n)
}

func runSplits(ctx context.Context, opts *RunOptions, o *SplitsOptions, env splitsEnv) error {
	b, done, err := startBeam(opts, opts.IO)
	defer done()
	if err != nil {
		return err
	}
	cfg := b.cfg
	if !storeKindOf(cfg.Target.Type).spannerDB {
		return usagef("splits: %s: the target is %s: split points are a Spanner feature (they pre-split a Spanner table's key range)", opts.Config, cfg.Target.Type)
	}
	j, err := env.resolve(ctx, cfg)
	if migration.IsConfigError(err) {
		return usagef("%s: %w", opts.Config, err)
	}
	if err != nil {
		return err
	}
	table, children := targetTables(j)
	ks := j.TargetKey.Clone()
	ks.Table = table
	n := o.Nodes * o.PerNode
	pts, how, err := computePoints(ctx, j, ks, n, o, env, b.runner)
	if err != nil {
		return err
	}
	if len(pts) == 0 {
		return fmt.Errorf("splits: no split points for %s: %s gives a single key", table, how)
	}
	errw := opts.IO.err
	fmt.Fprintf(errw, "rekey: %d split points for %s (%d nodes × %d), %s\n", len(pts), table, o.Nodes, o.PerNode, how)
	expire := env.now().Add(o.Expire)
	for _, a := range splits.Advice(table, children, expire) {
		fmt.Fprintf(errw, "rekey: note: %s\n", a)
	}
	if f := splits.HasFalse(pts); len(f) > 0 {
		fmt.Fprintf(errw, "rekey: warning: %d points have a BOOL key part false, which gcloud's splits-file parser reads as true; add them with --apply to get them exact\n", len(f))
	}
	if err := writeSplits(opts.IO, o.Out, pts, cfg.Target, expire); err != nil {
		return err
	}
	if !o.Apply {
		return nil
	}
	return applySplits(ctx, opts.IO, env, cfg.Target, pts, expire)
}

// targetTables names the target's root table and its interleaved children.
func targetTables(j *migration.Job) (string, []string) {
	table := j.Config.Target.Table
	if table == "" {
		table = j.Spec.Table
	}
	var children []string
	if j.Spanner != nil && len(j.Spanner.Targets) > 0 {
		table = j.Spanner.Targets[0].Name
		for _, t := range j.Spanner.Targets[1:] {
			children = append(children, t.Name)
		}
	}
	return table, children
}

// computePoints places n points over the target key ks: evenly for a
// rewrite that fills the leading column uniformly, else at the quantiles
// of a sample. how says which, for people.
func computePoints(ctx context.Context, j *migration.Job, ks rewrite.KeySchema, n int, o *SplitsOptions, env splitsEnv, runner pipeline.Runner) ([]splits.Point, string, error) {
	st, err := rewrite.New(j.Spec.Strategy)
	if err != nil {
		return nil, "", usagef("rewrite: %v", err)
	}
	if sp, ok := splits.UniformSpace(st, j.SourceKey); ok {
		pts, err := sp.Points(ks, n)
		return pts, "evenly spaced over " + sp.Desc, err
	}
	size := o.sampleSize(n)
	recs, err := env.sample(ctx, j, runner, size)
	if err != nil {
		return nil, "", fmt.Errorf("splits: %s does not spread keys uniformly, so the points are quantiles of a sample of rewritten keys: %w", j.Spec.Strategy.Strategy, err)
	}
	pts, err := splits.Quantiles(ks, recs, n)
	return pts, fmt.Sprintf("quantiles of a sample of %d rewritten keys (%s does not spread keys uniformly)", len(recs), j.Spec.Strategy.Strategy), err
}

// writeSplits writes the splits file(s) (stdout when out is "") and says
// how to add them with gcloud.
func writeSplits(io stdio, out string, pts []splits.Point, tgt config.Endpoint, expire time.Time) error {
	gcloud := func(file string) string {
		return fmt.Sprintf("gcloud spanner databases splits add %s --instance=%s --project=%s --splits-file=%s --split-expiration-date=%s --initiator=%s",
			tgt.Database, tgt.Instance, tgt.Project, file, expire.UTC().Format(time.RFC3339), splits.Initiator)
	}
	if out == "" {
		if err := splits.Write(io.out, pts); err != nil {
			return err
		}
		if len(pts) > splits.MaxPerRequest {
			fmt.Fprintf(io.err, "rekey: note: gcloud takes at most %d points a file: split the output (split -l %d) or use --out FILE\n", splits.MaxPerRequest, splits.MaxPerRequest)
		}
		fmt.Fprintf(io.err, "rekey: add them with: %s\n", gcloud("FILE"))
		return nil
	}
	parts := (len(pts) + splits.MaxPerRequest - 1) / splits.MaxPerRequest
	for i := range parts {
		path := partPath(out, i+1, parts)
		if err := writeSplitsFile(path, pts[i*splits.MaxPerRequest:min((i+1)*splits.MaxPerRequest, len(pts))]); err != nil {
			return err
		}
		fmt.Fprintf(io.err, "rekey: wrote %s; add them with: %s\n", path, gcloud(path))
	}
	return nil
}

// partPath is the i-th of n files for out: out itself when n is 1, else
// with -i before its extension (splits.txt: splits-1.txt, splits-2.txt).
func partPath(out string, i, n int) string {
	if n == 1 {
		return out
	}
	ext := filepath.Ext(out)
	return fmt.Sprintf("%s-%d%s", strings.TrimSuffix(out, ext), i, ext)
}

func writeSplitsFile(path string, pts []splits.Point) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("splits: %w", err)
	}
	if err := splits.Write(f, pts); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("splits: %w", err)
	}
	return nil
}

// errEmulatorSplits is what --apply says when the server does not
// implement AddSplitPoints, as the Spanner emulator does not.
const errEmulatorSplits = "the Spanner emulator does not support split points (AddSplitPoints is Unimplemented); the points were not applied; use the splits file with gcloud against a real instance"

// applySplits adds the points to the target database, 100 a request.
func applySplits(ctx context.Context, io stdio, env splitsEnv, tgt config.Endpoint, pts []splits.Point, expire time.Time) error {
	db := spannerdb.DatabasePath(tgt.Project, tgt.Instance, tgt.Database)
	reqs, err := splits.Requests(db, pts, expire)
	if err != nil {
		return err
	}
	c, err := env.admin(ctx)
	if err != nil {
		return fmt.Errorf("splits: connecting to the database admin API: %w", err)
	}
	defer c.Close()
	added := 0
	for i, req := range reqs {
		if _, err := c.AddSplitPoints(ctx, req); err != nil {
			if status.Code(err) == codes.Unimplemented {
				return errors.New(errEmulatorSplits)
			}
			return fmt.Errorf("splits: adding split points to %s (request %d of %d): %w; %d of %d points were added before it", db, i+1, len(reqs), err, added, len(pts))
		}
		added += countKeys(req)
	}
	fmt.Fprintf(io.err, "rekey: added %d split points to %s in %d requests; they expire at %s\n", added, db, len(reqs), expire.UTC().Format(time.RFC3339))
	return nil
}

func countKeys(req *databasepb.AddSplitPointsRequest) int {
	n := 0
	for _, sp := range req.SplitPoints {
		n += len(sp.Keys)
	}
	return n
}
