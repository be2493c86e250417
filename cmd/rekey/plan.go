package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/plan/sim"
)

// PlanOptions are the flags of `rekey plan` besides those every pipeline
// command has (RunOptions).
type PlanOptions struct {
	Out, Keys     string
	KeepKeys, All bool
	Sample        int
	Rows          int64
	Nodes         int
	MultiRegion   bool
	SplitWrites   float64
	SplitDelay    time.Duration
	PreSplit      int
}

const planLong = `Shows, before one row is written, where the source's keys make hotspots and
that the rewritten keys remove them. A Beam job (prism by default; Dataflow for
big sources) reads a uniform random sample of the source (--sample N, or --all),
rewrites every key as the migration would and plans the writes with the same
write planner; instead of writing, it records each record's old and new key.
Nothing reaches the target: no DDL, no manifest, no commit.

Then, in this process:
  - the keys are checked against the rules of key design (monotonic keys,
    timestamps or sequences first, Name1, Name2, ... names, low-cardinality
    first columns, common prefixes, long keys, Datastore ids <= 0 or names with
    '/', UUID v1), each finding with its evidence, the rule and the fix;
  - the load is simulated on a model of a range-partitioned store (splits by
    size and by load, per-split and per-node capacity, N nodes, optional
    pre-split points, the config's ramp-up) twice: the old keys in their
    natural order, and the new keys in rekey's planned write order;
  - the report is written to --out: report.html (self-contained, opens
    offline), heatmap.png (Key Visualizer style, before and after at one
    colour scale), spread.png, rate.png and plan.json.

Defaults are published figures where they exist (Spanner: 3,500 writes/s per
node regional, 2,700 multi-region; Firestore: 500 ops/s for a new key range,
x1.5 every 5 minutes) and stated assumptions otherwise; the report lists them.`

func newCmdPlan(f *factory) *cobra.Command {
	opts := &RunOptions{IO: f.IO}
	o := &PlanOptions{}
	cmd := &cobra.Command{
		Use:   "plan -c FILE [--sample N | --all] [--out DIR] [--nodes N] [--runner ...] [Beam flags]",
		Short: "find the hotspots in the real keys and simulate the load before and after the rewrite (writes nothing)",
		Long:  planLong,
		Example: `  rekey plan -c migration.yaml
  rekey plan -c migration.yaml --sample 1000000 --nodes 10 --presplit 10 --out plan/
  rekey plan -c migration.yaml --runner dataflow --project P --region R --keys gs://bucket/plan-keys`,
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Out, "out", "rekey-plan", "directory for the report (created; a previous plan's files in it are replaced)")
	fl.IntVar(&o.Sample, "sample", 100_000, "records to sample uniformly from the source")
	fl.BoolVar(&o.All, "all", false, "read every record instead of a sample")
	fl.Int64Var(&o.Rows, "rows", 0, "records the simulated table holds, if more than the source (the sample stands for them)")
	fl.IntVar(&o.Nodes, "nodes", 3, "nodes (servers) of the simulated store")
	fl.BoolVar(&o.MultiRegion, "multi-region", false, "a dual- or multi-region Spanner instance (2,700 writes/s per node instead of 3,500)")
	fl.Float64Var(&o.SplitWrites, "split-writes", 0, "writes/s one split takes (default: the store's assumption, see the report)")
	fl.DurationVar(&o.SplitDelay, "split-delay", 0, "how long a split's load must last before it is split (default 5m, Firestore 4m)")
	fl.IntVar(&o.PreSplit, "presplit", 0, "give the rewritten load this many split points per node before it starts (as 'rekey splits' would)")
	fl.StringVar(&o.Keys, "keys", "", "directory for the sampled keys (local or gs://; needed on Dataflow); default: a directory in --out, removed afterwards")
	fl.BoolVar(&o.KeepKeys, "keep-keys", false, "keep the sampled keys' directory")
	return pipelineCommand(cmd, opts, func(cmd *cobra.Command) error {
		if err := o.check(cmd, opts.Runner); err != nil {
			return err
		}
		beamFlagErrorsReturn()
		opts.WorkerPaths = map[string]*string{"--keys": &o.Keys}
		return runPlan(cmd, opts, o)
	})
}

func (o *PlanOptions) check(cmd *cobra.Command, runner string) error {
	switch {
	case o.All && cmd.Flags().Changed("sample"):
		return usagef("plan: give --sample N or --all, not both")
	case !o.All && o.Sample < 1:
		return usagef("plan: --sample must be at least 1 (or give --all)")
	case o.Nodes < 1:
		return usagef("plan: --nodes must be at least 1")
	case o.Rows < 0 || o.SplitWrites < 0 || o.SplitDelay < 0 || o.PreSplit < 0:
		return usagef("plan: --rows, --split-writes, --split-delay and --presplit cannot be negative")
	case runner == "dataflow" && !strings.HasPrefix(o.Keys, "gs://"):
		return usagef("plan: on Dataflow the workers write the sampled keys: give --keys gs://BUCKET/DIR")
	}
	if o.All {
		o.Sample = 0
	}
	return keepUserFiles(o.Out)
}

// keepUserFiles refuses an --out directory that holds files but no
// earlier plan: a plan replaces only its own files.
func keepUserFiles(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return usagef("plan: --out %s: %v", dir, err)
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "plan.json")); err != nil {
		return usagef("plan: --out %s holds files that are not a plan's; give an empty or new directory", dir)
	}
	return nil
}

func runPlan(cmd *cobra.Command, opts *RunOptions, o *PlanOptions) error {
	b, done, err := startBeam(opts, opts.IO)
	defer done()
	if err != nil {
		return err
	}
	// The workers write the sampled keys, by default into a folder in
	// --out: a path they must find from their own working folders, on a
	// disk they see.
	if abs, err := filepath.Abs(o.Out); err == nil {
		o.Out = abs
	}
	if o.Keys == "" && !pipeline.InProcess(opts.Runner) && (!opts.SharedDisk || opts.Runner == "dataflow") {
		hint := ""
		if opts.Runner != "dataflow" {
			hint = ", or pass --shared-disk if every worker sees this machine's files at the same paths"
		}
		return usagef("plan: the job's workers are not this process and write the sampled keys: give --keys gs://BUCKET/DIR%s", hint)
	}
	params := sim.Params{Nodes: o.Nodes, SplitWrites: o.SplitWrites, LoadSplitDelay: o.SplitDelay}
	if o.MultiRegion {
		params.NodeWrites = sim.SpannerMultiRegionNodeWrites
	}
	req := pipeline.PlanRequest{Out: o.Out, KeysDir: o.Keys, KeepKeys: o.KeepKeys, Sample: o.Sample, Rows: o.Rows, Sim: params, PreSplitPerNode: o.PreSplit}
	p, files, err := pipeline.Plan(cmd.Context(), b.cfg, req, b.runner)
	if migration.IsConfigError(err) {
		return usagef("%s: %w", opts.Config, err)
	}
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	p.Summary(opts.IO.out, files)
	return nil
}
