package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/plan"
	"github.com/rekeyio/rekey/plan/detect"
	"github.com/rekeyio/rekey/plan/keys"
	"github.com/rekeyio/rekey/plan/sim"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
	"github.com/rekeyio/rekey/transforms/source"
)

// PlanRequest is what `rekey plan` asks for.
type PlanRequest struct {
	// Out is the report's directory (local).
	Out string
	// KeysDir is where the plan pipeline's keys go (local or gs://; ""
	// for a fresh directory in Out, removed afterwards unless KeepKeys).
	KeysDir  string
	KeepKeys bool
	// Sample is the number of records to sample (0: all).
	Sample int
	// Rows, if more than the source holds, is the number of records the
	// simulation loads (the sample stands for that many).
	Rows int64
	// Sim are the simulation's parameters (zero fields take the target
	// store's defaults); PreSplitPerNode as plan.Input.
	Sim             sim.Params
	PreSplitPerNode int
}

// Plan runs the plan pipeline (RunPlan) for the config, analyses what it
// sampled (package plan) and writes the report into req.Out.
func Plan(ctx context.Context, cfg *config.Config, req PlanRequest, r Runner) (*plan.Plan, plan.Files, error) {
	if err := migration.Reach(ctx, cfg); err != nil {
		return nil, plan.Files{}, err
	}
	j, err := migration.ResolveOffline(ctx, cfg)
	if err != nil {
		return nil, plan.Files{}, err
	}
	keysDir, cleanup := req.KeysDir, func() {}
	if keysDir == "" {
		keysDir = filepath.Join(req.Out, "keys-"+uuid.NewString()[:8])
		if !req.KeepKeys {
			cleanup = func() { os.RemoveAll(keysDir) }
		}
	}
	defer cleanup()
	// Workers write the dead letters: next to the keys when those are
	// remote (Dataflow's workers cannot write the local report directory).
	dead := keys.Join(req.Out, "dead-letters.jsonl")
	if strings.Contains(keysDir, "://") {
		dead = keys.Join(keysDir, "dead-letters.jsonl")
	}
	run, err := RunPlan(ctx, j, r, PlanOptions{KeysDir: keysDir, DeadLetters: dead, Sample: req.Sample, Rows: req.Rows})
	if err != nil {
		return nil, plan.Files{}, err
	}
	in, err := planInput(j, run, req)
	if err != nil {
		return nil, plan.Files{}, err
	}
	defer lowerGC(analysisGC)()
	set, err := keys.Load(ctx, run.KeysDir)
	if err != nil {
		return nil, plan.Files{}, err
	}
	if err := nameFiles(ctx, j, set); err != nil {
		return nil, plan.Files{}, err
	}
	if r.Progress != nil {
		fmt.Fprintln(r.Progress, run.readLine(set.Len()))
	}
	in.Keys = set
	p, err := plan.Build(in)
	if err != nil {
		return nil, plan.Files{}, err
	}
	files, err := p.Write(req.Out)
	return p, files, err
}

// readLine closes the plan pipeline's progress with what it read: the
// last progress line can be older than the run's end (off a terminal, a
// line every 10 seconds: one second in, "0 read"). sampled is the number
// of keys the plan sink recorded, which the records read are at least
// (a runner may lose counter updates).
func (run *PlanRun) readLine(sampled int) string {
	read := max(run.Read, run.Sampled, int64(sampled))
	line := fmt.Sprintf("rekey: plan: %s read", detect.Count(read, "record"))
	if int64(sampled) < read {
		line += fmt.Sprintf(", %s sampled", detect.Thousands(int64(sampled)))
	}
	line += fmt.Sprintf(", %s dead-lettered", detect.Thousands(run.DeadLettered))
	if run.Elapsed > 0 {
		line += ", in " + run.Elapsed.Round(time.Second).String()
	}
	return line + "; nothing written to the target; analysing and simulating the load"
}

// analysisGC is the GC percentage of the analysis (Go's default: 100).
// The sampled keys stay live through it and are nearly all pointer-free
// (plan/keys), so collecting when the heap has grown by a quarter
// instead of doubled costs little time: over 10,000,000 keys the
// analysis peaked at 2.5 GB instead of 3.3 GB, in no more time.
const analysisGC = 25

// lowerGC sets the GC percentage to percent, if it is higher, until the
// returned function restores it (GOGC=off stays off).
func lowerGC(percent int) (restore func()) {
	old := debug.SetGCPercent(percent)
	if old <= percent {
		debug.SetGCPercent(old)
	}
	return func() { debug.SetGCPercent(old) }
}

// planInput describes the job and the run for the analysis.
func planInput(j *migration.Job, run *PlanRun, req PlanRequest) (plan.Input, error) {
	src, tgt := j.Source, j.Target
	in := plan.Input{
		Source: describe(src), Target: describe(tgt),
		Datastore: entities(j), SourceDatastore: j.Spec.SourceStore == record.Datastore,
		Table: firstOf(tgt.Table, tgt.Kind, j.Spec.Table), SourceTable: firstOf(src.Table, src.Kind, j.Spec.Table),
		SourceKey: j.SourceKey.Text(), TargetKey: j.TargetKey.Text(), Strategy: stepText(j.Strategy),
		Method: run.Method, Rows: max(run.Rows, req.Rows), DeadLettered: run.DeadLettered,
		PreSplitPerNode: req.PreSplitPerNode,
	}
	if in.SourceDatastore {
		in.SourceKey = "Datastore key of kind " + in.SourceTable
	}
	if in.Datastore {
		in.TargetKey = "Datastore key of kind " + in.Table
	}
	for _, c := range j.SourceKey.Columns {
		in.SourceKeyColumns = append(in.SourceKeyColumns, c.Name)
	}
	for _, c := range j.TargetKey.Columns {
		in.TargetKeyColumns = append(in.TargetKeyColumns, c.Name)
	}
	if len(in.SourceKeyColumns) > 0 {
		in.SourceColumn = in.SourceKeyColumns[0]
	}
	if len(in.TargetKeyColumns) > 0 {
		in.TargetColumn = in.TargetKeyColumns[0]
	}
	if st, err := rewrite.New(j.Strategy); err == nil {
		if sh, ok := st.(*rewrite.Shard); ok {
			in.ShardColumn, in.Shards, in.SignedShards = sh.Name, sh.N, sh.Mode != "abs"
		}
	}
	if req.Rows > run.Read {
		in.Method += fmt.Sprintf("; the simulation loads a table of %s records (--rows), each sampled record standing for %.4g", detect.Thousands(req.Rows), float64(req.Rows)/float64(max(run.Sampled, 1)))
	}
	var err error
	in.Sim, err = simParams(j, req.Sim)
	return in, err
}

// simParams are the store's defaults (Spanner regional or Firestore)
// overridden by the request's non-zero fields, with the config's ramp-up
// as the loader's schedule.
func simParams(j *migration.Job, o sim.Params) (sim.Params, error) {
	d, ok := databaseOf(j)
	if !ok {
		return sim.Params{}, &migration.ConfigError{Err: fmt.Errorf("plan: target.type is %s; a plan simulates a Spanner or Datastore target", j.Target.Type)}
	}
	p := d.simDefaults(o.Nodes)
	if o.NodeWrites > 0 {
		p.NodeWrites = o.NodeWrites
	}
	if o.SplitWrites > 0 {
		p.SplitWrites = o.SplitWrites
		p.LoadThreshold = o.SplitWrites / 2
	}
	if o.LoadThreshold > 0 {
		p.LoadThreshold = o.LoadThreshold
	}
	if o.LoadSplitDelay > 0 {
		p.LoadSplitDelay = o.LoadSplitDelay
	}
	if o.SplitBytes > 0 {
		p.SplitBytes = o.SplitBytes
	}
	sched, err := j.Ramp("").Schedule(time.Unix(0, 0))
	if err != nil {
		return p, &migration.ConfigError{Err: fmt.Errorf("ramp: %w", err)}
	}
	p.Ramp = nil
	if !sched.Unlimited() {
		p.Ramp = func(d time.Duration) float64 { return sched.Rate(time.Unix(0, 0).Add(d)) }
	}
	return p, nil
}

// stepText is a rewrite step as a line: its strategy and parameters.
func stepText(st rewrite.StepConfig) string {
	if len(st.Steps) > 0 {
		parts := make([]string, len(st.Steps))
		for i, s := range st.Steps {
			parts[i] = stepText(s)
		}
		return st.Strategy + "(" + strings.Join(parts, " → ") + ")"
	}
	if len(st.Params) == 0 {
		return st.Strategy
	}
	b, err := json.Marshal(st.Params)
	if err != nil {
		return st.Strategy
	}
	return st.Strategy + " " + string(b)
}

// entities reports whether the job's target keys entities (Datastore).
func entities(j *migration.Job) bool {
	d, ok := databaseOf(j)
	return ok && d.entities()
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// PlanSample reads a uniform random sample of n records of the job's
// source through the plan pipeline (RunPlan) and returns their new keys
// as records of the target's key columns (Spanner targets), for split
// points at quantiles of the rewritten keys.
func PlanSample(ctx context.Context, j *migration.Job, r Runner, n int) ([]record.Record, error) {
	dir, err := os.MkdirTemp("", "rekey-sample-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	run, err := RunPlan(ctx, j, r, PlanOptions{KeysDir: filepath.Join(dir, "keys"), DeadLetters: filepath.Join(dir, "dead-letters.jsonl"), Sample: n, AllParts: true})
	if err != nil {
		return nil, err
	}
	streams, err := keys.Read(ctx, run.KeysDir)
	if err != nil {
		return nil, err
	}
	var out []record.Record
	for _, s := range streams {
		for _, k := range s {
			rec, err := keyRecord(k, j.TargetKey)
			if err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
	}
	return out, nil
}

// keyRecord rebuilds a record of the new key's columns from k.NewParts.
func keyRecord(k keys.Key, ks rewrite.KeySchema) (record.Record, error) {
	rec := record.Record{Table: k.Table}
	if len(k.NewParts) != len(ks.Columns) {
		return rec, fmt.Errorf("plan keys: %s has %d key parts, the target key %d columns", k.NewText, len(k.NewParts), len(ks.Columns))
	}
	for i, c := range ks.Columns {
		rec.Fields = append(rec.Fields, record.Field{Name: c.Name, Value: partValue(k.NewParts[i], c.Type)})
	}
	return rec, nil
}

// partValue is the record value of a key part of column type t.
func partValue(p keys.Part, t rewrite.Type) record.Value {
	switch p.Kind {
	case "null":
		return record.Value{}
	case "time":
		return record.Time(time.Unix(0, p.Int))
	case "bytes":
		return record.Bytes(p.Bytes)
	case "bool":
		return record.Bool(p.Int != 0)
	case "int":
		if t == rewrite.TypeDate {
			return record.Value{Kind: record.KindDate, Int: p.Int}
		}
		return record.Int(p.Int)
	}
	if t == rewrite.TypeNumeric {
		return record.Value{Kind: record.KindNumeric, Str: p.Text}
	}
	return record.String(p.Text)
}

// nameFiles sets the File of the keys read from a files source: the name
// of the file their Pos numbers (the files listed again, in the order the
// source numbered them).
func nameFiles(ctx context.Context, j *migration.Job, set *keys.Set) error {
	if !j.Source.IsFile() {
		return nil
	}
	names, err := source.ListFiles(ctx, filesConfig(j).Path)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	return set.NameFiles(func(pos int64) (string, error) {
		f := source.PosFile(pos)
		if f >= len(names) {
			return "", fmt.Errorf("plan: a key read from file %d of %s, which matches %d files now", f, filesConfig(j).Path, len(names))
		}
		return names[f], nil
	})
}
