package pipeline

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/google/uuid"

	"github.com/rekeyio/rekey/internal/write/writeorder"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/plan/detect"
	"github.com/rekeyio/rekey/plan/keys"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
	"github.com/rekeyio/rekey/transforms"
	"github.com/rekeyio/rekey/transforms/sink"
	"github.com/rekeyio/rekey/transforms/source"
)

func init() {
	register.DoFn2x1[context.Context, record.Batch, error](&planKeysFn{})
}

// Planned counts the records the plan sink recorded.
var planned = beam.NewCounter(namespace, "planned")

// PlanOptions say what RunPlan reads and where its keys go.
type PlanOptions struct {
	// KeysDir is the directory (local or gs://) the plan sink writes its
	// part files to (plan/keys); it is created if missing.
	KeysDir string
	// DeadLetters is the file the run's dead letters go to (never the
	// config's dead-letter file: a plan touches nothing of the
	// migration's).
	DeadLetters string
	// Sample is the number of records to sample uniformly; 0 reads all.
	Sample int
	// AllParts records the value of every new key column (PlanSample),
	// not only the first (what the analysis uses).
	AllParts bool
	// Rows, if known, is the number of records the sample stands for
	// (more than the source holds, for a plan of a bigger table).
	Rows int64
}

// PlanRun is what RunPlan did.
type PlanRun struct {
	Job    *migration.Job
	Result *migration.Result
	// Method says how the sample was taken, for the report.
	Method string
	// Read counts the records read from the source, Sampled those kept,
	// Planned those the plan sink recorded, DeadLettered those refused.
	Read, Sampled, Planned, DeadLettered int64
	// Rows is the number of records the source holds, as far as known
	// (counted by the Spanner source, else Read).
	Rows int64
	// KeysDir is the directory in PlanOptions.KeysDir holding the keys.
	KeysDir string
	// Elapsed is the time the pipeline ran (every attempt).
	Elapsed time.Duration
	// BatchRows is the rows of a planned batch of the sample (the
	// configured rows times the fraction sampled).
	BatchRows int
}

// RunPlan runs `rekey plan`'s pipeline on r: the source is read (a
// uniform sample of o.Sample records, or all), every key rewritten as the
// migration would and the writes planned by the same write planner
// (transforms/writeplan), and then, instead of a sink, every record's old
// and new key is written to o.KeysDir in planned order (plan/keys).
// Nothing reaches the target: the graph has no sink of it, no DDL is run
// and no manifest written.
//
// A Spanner source with more rows than o.Sample is sampled in its query:
// the rows whose key's FARM_FINGERPRINT falls in a fraction of its range
// (a little more than o.Sample/rows, so the uniform sample that follows
// has enough to choose from); other sources are read whole and sampled
// as they are read (transforms.Sample, which spills the records it may
// keep to files beside the keys, removed after the run).
func RunPlan(ctx context.Context, j *migration.Job, r Runner, o PlanOptions) (*PlanRun, error) {
	if _, ok := databaseOf(j); !ok {
		return nil, &migration.ConfigError{Err: fmt.Errorf("plan: target.type is %s; a plan simulates a Spanner or Datastore target", j.Target.Type)}
	}
	if !strings.Contains(o.KeysDir, "://") {
		if err := os.MkdirAll(o.KeysDir, 0o755); err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
	}
	pr := &PlanRun{Job: j, Method: "all records read", Rows: o.Rows}
	filter := ""
	if o.Sample > 0 {
		pr.Method = fmt.Sprintf("uniform random sample of %s records (bottom-k of random priorities over everything read)", detect.Thousands(int64(o.Sample)))
		if ps, ok := sources[j.Source.Type].(planSampler); ok {
			f, rows, method, err := ps.planFilter(ctx, j, o.Sample)
			if err != nil {
				return nil, err
			}
			pr.Rows = max(pr.Rows, rows)
			if f != "" {
				filter, pr.Method = f, method
			}
		}
	}
	// A sample of fraction f of the records is planned in batches of f
	// times the configured rows, so that each batch covers as narrow a
	// part of the key space as a real one does and the sample's write
	// order stands for the real one. Where the number of records is not
	// known before the read (files, Datastore), the first run plans with
	// whole batches and is run again with the fraction it measured.
	fraction := 1.0
	if pr.Rows > int64(o.Sample) {
		fraction = float64(max(o.Sample, 1)) / float64(pr.Rows)
		if o.Sample == 0 {
			fraction = 0 // set from what was read: below
		}
	}
	r.counts = countsPlan
	var err error
	for attempt := 0; ; attempt++ {
		var res *migration.Result
		run := o
		run.KeysDir = keys.Join(o.KeysDir, fmt.Sprintf("run-%d", attempt+1))
		pr.KeysDir = run.KeysDir
		res, err = Run(ctx, planJob(j, fraction), r, planGraph(run, filter))
		if o.Sample > 0 {
			if rerr := removeSpill(ctx, run.KeysDir); err == nil {
				err = rerr
			}
		}
		pr.Result = res
		if res != nil {
			pr.Elapsed += res.Elapsed
			c := res.Counters
			pr.Read, pr.Sampled, pr.Planned, pr.DeadLettered = c["read"], c["sampled"], c["planned"], c["dead_lettered"]
		}
		if o.Sample == 0 {
			pr.Sampled = pr.Read
		}
		if res != nil {
			pr.Rows = max(pr.Rows, res.Counters["datastore_sample_of"])
		}
		measured := 1.0
		if rows := max(pr.Read, pr.Rows); rows > 0 && pr.Sampled < rows {
			measured = float64(pr.Sampled) / float64(rows)
		}
		if err != nil || attempt > 0 || (measured >= fraction/2 && measured <= 2*fraction) {
			break
		}
		fraction = measured
		pr.Method += fmt.Sprintf("; planned again with batches scaled to the %.3g%% sampled", 100*measured)
	}
	if sampledByKeys(j, o.Sample) && pr.Result != nil {
		how := "the kind's __scatter__ index"
		if pr.Result.Counters["datastore_sample_scanned"] > 0 {
			how = "a reservoir sample of a keys-only scan (no __scatter__ values: the emulator, or a small kind)"
		}
		pr.Method = fmt.Sprintf("random sample of up to %s entities by key, from %s, read with GetMulti", detect.Thousands(int64(o.Sample)), how)
	} else if o.Sample > 0 && pr.Sampled >= pr.Read && pr.Read > 0 {
		pr.Method = fmt.Sprintf("all %s records read: the source holds no more than the sample size, %s", detect.Thousands(pr.Read), detect.Thousands(int64(o.Sample)))
	}
	pr.Rows = max(pr.Rows, pr.Read)
	pr.BatchRows = planJob(j, fraction).Write.BatchRows
	return pr, err
}

// planJob is j as a dry run whose write planner cuts batches of fraction
// of the configured rows (at least 1).
func planJob(j *migration.Job, fraction float64) *migration.Job {
	dry := *j
	dry.DryRun = true
	opts, _ := newWrites(j, "").planOptions()
	dry.Write.BatchRows = max(1, int(math.Round(float64(opts.WithDefaults().BatchRows)*fraction)))
	return &dry
}

// planGraph is the plan pipeline (RunPlan), with filter ("" for none) a
// condition on the main Spanner table's rows.
func planGraph(o PlanOptions, filter string) Graph {
	return func(s beam.Scope, j *migration.Job) error {
		w := newWrites(j, newRun())
		var batches beam.PCollection
		var deads []beam.PCollection
		var err error
		batches, deads, err = readSource(s, j, readOptions{filter: filter, positions: true, sample: o.Sample})
		if err != nil {
			return err
		}
		if o.Sample > 0 {
			batches = transforms.Sample(s, o.Sample, spillDir(o.KeysDir), batches)
		}
		rewritten, rewriteDead := transforms.RewriteKeepingOld(s, j.Spec, batches)
		deads = append(deads, rewriteDead)
		opts, _ := w.planOptions()
		keysFn := newPlanKeysFn(j, opts, o.KeysDir)
		keysFn.AllParts = o.AllParts
		beam.ParDo0(s, keysFn, w.plan(s, rewritten))
		sink.Lines(s, o.DeadLetters, beam.Flatten(s, deads...))
		return nil
	}
}

// spillDir is where the sample (transforms.Sample) of a plan writing its
// keys to keysDir spills the records it reads: beside the keys, which
// every worker reaches (a worker's own temporary directory may be in
// another process or on another machine).
func spillDir(keysDir string) string { return keys.Join(keysDir, "sample") }

// removeSpill removes the sample's spill files of a plan run (and their
// directory, if local).
func removeSpill(ctx context.Context, keysDir string) error {
	dir := spillDir(keysDir)
	if err := transforms.RemoveSpill(ctx, dir); err != nil {
		return fmt.Errorf("plan: removing the sample's files: %w", err)
	}
	if !strings.Contains(dir, "://") {
		if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("plan: %w", err)
		}
	}
	return nil
}

// sampledByKeys reports whether the plan samples the source by its keys
// (keySampler), rather than as it reads.
func sampledByKeys(j *migration.Job, n int) bool {
	ks, ok := sources[j.Source.Type].(keySampler)
	return ok && ks.samplesByKeys(j, n)
}

// sampleFilter is a condition that holds for about fraction of the rows,
// chosen by the FARM_FINGERPRINT of their key columns' text: uniform over
// the key space, and pushed into the partitioned query.
func sampleFilter(ks rewrite.KeySchema, fraction float64) string {
	parts := make([]string, len(ks.Columns))
	for i, c := range ks.Columns {
		col := rewrite.QuoteIdent(c.Name)
		text := "CAST(" + col + " AS STRING)"
		if c.Type == rewrite.TypeBytes {
			text = "TO_BASE64(" + col + ")"
		}
		parts[i] = "IFNULL(" + text + ", '')"
	}
	const scale = 1_000_000
	return fmt.Sprintf("ABS(MOD(FARM_FINGERPRINT(CONCAT(%s)), %d)) < %d", strings.Join(parts, ", '|', "), scale, int64(math.Ceil(fraction*scale)))
}

// planKeysFn is the plan's sink: it writes the old and new key of every
// planned record to a part file of its bundle (plan/keys), the planned
// batches numbered in the order they come.
type planKeysFn struct {
	Dir string `json:"dir"`
	// AllParts records every new key column's value (keys.Key.NewParts),
	// not only the first.
	AllParts bool `json:"all_parts,omitempty"`
	// Old and New are the key orders of the source and the target (store
	// and key schemas, as writeorder.Options; Old's Children by table).
	Old writeorder.Options `json:"old"`
	New writeorder.Options `json:"new"`

	oldKeyer, newKeyer *writeorder.Keyer
	oldKeys, newKeys   map[string]rewrite.KeySchema
	w                  *keys.Writer
	batch              int
}

func newPlanKeysFn(j *migration.Job, target writeorder.Options, dir string) *planKeysFn {
	old := writeorder.Options{Store: j.Spec.SourceStore, Key: j.SourceKey.Text()}
	if j.Spanner != nil && len(j.Spanner.Children) > 0 {
		old.Children = map[string]string{}
		for name, t := range j.Spanner.Children {
			old.Children[name] = t.Key.Text()
		}
	}
	return &planKeysFn{Dir: dir, Old: old, New: target}
}

func (f *planKeysFn) Setup() error {
	var err error
	if f.oldKeyer, err = writeorder.NewKeyer(f.Old); err != nil {
		return err
	}
	if f.newKeyer, err = writeorder.NewKeyer(f.New); err != nil {
		return err
	}
	if f.oldKeys, err = keySchemas(f.Old); err != nil {
		return err
	}
	f.newKeys, err = keySchemas(f.New)
	return err
}

// keySchemas are the key schemas of o's tables by lower-case name ("" for
// the main table); none for Datastore.
func keySchemas(o writeorder.Options) (map[string]rewrite.KeySchema, error) {
	out := map[string]rewrite.KeySchema{}
	if o.Store != record.Spanner {
		return out, nil
	}
	main, err := rewrite.ParseKeySchema("", o.Key)
	if err != nil {
		return nil, err
	}
	out[""] = main
	for name, text := range o.Children {
		ks, err := rewrite.ParseKeySchema(name, text)
		if err != nil {
			return nil, err
		}
		out[strings.ToLower(name)] = ks
	}
	return out, nil
}

func schemaOf(m map[string]rewrite.KeySchema, table string) rewrite.KeySchema {
	if ks, ok := m[strings.ToLower(table)]; ok {
		return ks
	}
	return m[""]
}

func (f *planKeysFn) StartBundle(ctx context.Context) error {
	w, err := keys.Create(ctx, f.Dir, uuid.NewString())
	f.w, f.batch = w, 0
	return err
}

func (f *planKeysFn) ProcessElement(ctx context.Context, batch record.Batch) error {
	recs := batch.Recs
	for i := range recs {
		// The old record's size is that of its encoding, which the
		// rewrite stage made already (transforms.OldField).
		size := 0
		if j := recs[i].Index(transforms.OldField); j >= 0 {
			size = len(recs[i].Fields[j].Value.Bytes)
		}
		rec := recs[i] // TakeOld changes it; the batch is read-only (record.Batch)
		old, err := transforms.TakeOld(&rec)
		if err != nil {
			return err
		}
		k := f.key(&old, &rec)
		k.Bytes = size
		k.Batch = f.batch
		if err := f.w.Write(&k); err != nil {
			return fmt.Errorf("plan keys: %w", err)
		}
	}
	f.batch++
	planned.Inc(ctx, int64(len(recs)))
	return nil
}

func (f *planKeysFn) FinishBundle(ctx context.Context) error {
	w := f.w
	f.w = nil
	if w == nil {
		return nil
	}
	return w.Close()
}

// key describes one record's key before and after.
func (f *planKeysFn) key(old, rec *record.Record) keys.Key {
	oks := schemaOf(f.oldKeys, old.Table)
	k := keys.Key{
		Table:   rec.Table,
		Old:     f.oldKeyer.Append(nil, old),
		New:     f.newKeyer.Append(nil, rec),
		OldText: typedKeyText(old, oks),
		NewText: typedKeyText(rec, schemaOf(f.newKeys, rec.Table)),
	}
	if rec.Key != nil {
		k.NewParts = []keys.Part{leafPart(rec.Key.Leaf())}
	}
	cols := schemaOf(f.newKeys, rec.Table).Columns
	k.NewColumns = max(len(cols), len(k.NewParts))
	for i, c := range cols {
		if i > 0 && !f.AllParts {
			break // the analysis needs the first; PlanSample all
		}
		v, _ := rec.Get(c.Name)
		k.NewParts = append(k.NewParts, part(typed(v, c.Type)))
	}
	first := ""
	if old.Key != nil {
		k.Columns = len(old.Key.Path)
		k.First = leafPart(old.Key.Leaf())
	} else if len(oks.Columns) > 0 {
		k.Columns = len(oks.Columns)
		first = oks.Columns[0].Name
		if v, ok := old.Get(first); ok {
			k.First = part(typed(v, oks.Columns[0].Type))
		}
	}
	if v, ok := old.Get(source.PosField); ok {
		k.Pos = v.Int
	}
	for _, fl := range old.Fields {
		if fl.Value.Kind == record.KindTimestamp && !strings.EqualFold(fl.Name, first) {
			t := fl.Value.Time
			k.Time, k.TimeField = &t, fl.Name
			break
		}
	}
	return k
}

// typed is v as a value of key column type t (a file's records hold
// timestamps as text until they are written), or v if it is not one.
func typed(v record.Value, t rewrite.Type) record.Value {
	if cv, err := record.Coerce(v, t); err == nil {
		return cv
	}
	return v
}

// typedKeyText is keyText with the key values typed as their columns.
func typedKeyText(r *record.Record, ks rewrite.KeySchema) string {
	if r.Key != nil || len(ks.Columns) == 0 {
		return keyText(r, ks)
	}
	vals := make([]string, len(ks.Columns))
	for i, c := range ks.Columns {
		v, _ := r.Get(c.Name)
		vals[i] = typed(v, c.Type).String()
	}
	return "(" + strings.Join(vals, ", ") + ")"
}

// leafPart is a Datastore key's leaf element as plan/keys holds it.
func leafPart(e rewrite.PathElement) keys.Part {
	if e.IsName() {
		return keys.Part{Kind: "string", Text: e.Name, Datastore: true}
	}
	return keys.Part{Kind: "int", Int: e.ID, Text: fmt.Sprint(e.ID), Datastore: true}
}

// part is a key value as plan/keys holds it.
func part(v record.Value) keys.Part {
	switch v.Kind {
	case record.KindInt, record.KindDate:
		return keys.Part{Kind: "int", Int: v.Int, Text: v.String()}
	case record.KindString, record.KindNumeric:
		return keys.Part{Kind: "string", Text: v.Str}
	case record.KindTimestamp:
		return keys.Part{Kind: "time", Int: v.Time.UnixNano(), Text: v.String()}
	case record.KindFloat:
		return keys.Part{Kind: "float", Text: v.String()}
	case record.KindBool:
		return keys.Part{Kind: "bool", Int: v.Int, Text: v.String()}
	case record.KindBytes:
		return keys.Part{Kind: "bytes", Bytes: v.Bytes, Text: v.String()}
	case record.KindNull:
		return keys.Part{Kind: "null"}
	}
	return keys.Part{Kind: "other", Text: v.String()}
}
