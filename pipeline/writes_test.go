package pipeline

import (
	"strings"
	"testing"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/write/writeorder"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
	"github.com/rekeyio/rekey/rewrite"
)

func TestPlanOptions(t *testing.T) {
	key := func(table, text string) rewrite.KeySchema {
		ks, err := rewrite.ParseKeySchema(table, text)
		if err != nil {
			t.Fatal(err)
		}
		return ks
	}
	write := config.WriteConfig{BatchMutations: 5000, BatchRows: 200, Shards: 8, Buffer: 4000}

	// Spanner, with an interleaved child: every table's key.
	p := resolved(&migration.Job{Config: &config.Config{Target: config.Endpoint{Type: config.TypeSpanner}, Write: write},
		TargetKey: key("Customers", "CustomerId INT64")})
	p.Spanner = &migration.SpannerSchemas{Targets: []*spannerdb.Table{
		{Name: "Customers", Key: p.TargetKey},
		{Name: "Orders", Key: key("Orders", "CustomerId INT64, OrderId INT64 DESC")},
	}}
	o, ok := writes{job: p}.planOptions()
	if !ok || o.Store != record.Spanner || o.Key != "CustomerId INT64" || o.Children["Orders"] != "CustomerId INT64, OrderId INT64 DESC" ||
		o.BatchRows != 200 || o.Shards != 8 || o.Buffer != 4000 || o.Seed != 0 {
		t.Errorf("spanner: %+v, %v", o, ok)
	}
	if err := o.WithDefaults().Validate(); err != nil {
		t.Error(err)
	}

	// Datastore: batches no larger than the sink's entity bound.
	p = resolved(&migration.Job{Config: &config.Config{Target: config.Endpoint{Type: config.TypeDatastore},
		Write: config.WriteConfig{BatchMutations: 100, BatchRows: 500}}})
	if o, ok := newWrites(p, "run").planOptions(); !ok || o.Store != record.Datastore || o.BatchRows != 100 || o.WithDefaults().Validate() != nil {
		t.Errorf("datastore: %+v, %v", o, ok)
	}

	// Files are written as they come.
	p = resolved(&migration.Job{Config: &config.Config{Target: config.Endpoint{Type: config.TypeJSONL}}})
	if _, ok := newWrites(p, "run").planOptions(); ok {
		t.Error("a JSON Lines target is planned")
	}
}

func TestPlanShuffle(t *testing.T) {
	key, err := rewrite.ParseKeySchema("Accounts", "AccountId STRING(36), Seq INT64")
	if err != nil {
		t.Fatal(err)
	}
	spanner := func(strategy rewrite.StepConfig, shuffle, ramp string) *migration.Job {
		return resolved(&migration.Job{
			Config: &config.Config{Target: config.Endpoint{Type: config.TypeSpanner},
				Write: config.WriteConfig{BatchRows: 500, Shuffle: shuffle}, Ramp: config.RampConfig{Profile: ramp}},
			Spec:      rekeyer.Spec{Strategy: strategy, SourceStore: record.Spanner, TargetStore: record.Spanner},
			SourceKey: key, TargetKey: key,
		})
	}
	// jsonl reads j's source from a JSON Lines file, or with redrive set,
	// re-submits that dead-letter file.
	jsonl := func(j *migration.Job, redrive string) *migration.Job {
		j.Source.Type, j.RedriveFrom = config.TypeJSONL, redrive
		return j
	}
	hash := rewrite.StepConfig{Strategy: "hashprefix"}
	swap := rewrite.StepConfig{Strategy: "swap", Params: rewrite.Params{"order": []any{"Seq"}}}
	for _, tc := range []struct {
		name string
		p    *migration.Job
		want bool // local planning
	}{
		{"auto, hashprefix", spanner(hash, config.ShuffleAuto, config.RampNone), true},
		{"auto, hashprefix, ramp-up", spanner(hash, config.ShuffleAuto, config.RampDatastore), true}, // the sinks pace commits wherever they are planned
		{"auto, swap", spanner(swap, config.ShuffleAuto, config.RampNone), false},
		{"always, hashprefix", spanner(hash, config.ShuffleAlways, config.RampNone), false},
		{"never, swap", spanner(swap, config.ShuffleNever, config.RampNone), true},
		{"auto, hashprefix, Datastore source to Spanner", func() *migration.Job {
			p := spanner(hash, config.ShuffleAuto, config.RampNone)
			p.Spec.SourceStore = record.Datastore
			return p
		}(), false},
		{"auto, swap, JSON Lines source", jsonl(spanner(swap, config.ShuffleAuto, config.RampNone), ""), true},
		{"auto, swap, JSON Lines source, ramp-up", jsonl(spanner(swap, config.ShuffleAuto, config.RampDatastore), ""), true},
		{"always, swap, JSON Lines source", jsonl(spanner(swap, config.ShuffleAlways, config.RampNone), ""), false},
		{"auto, swap, redrive", jsonl(spanner(swap, config.ShuffleAuto, config.RampNone), "dead.jsonl"), false},
		{"auto, hashprefix, Datastore", resolved(&migration.Job{
			Config: &config.Config{Target: config.Endpoint{Type: config.TypeDatastore},
				Write: config.WriteConfig{BatchRows: 500, Shuffle: config.ShuffleAuto}, Ramp: config.RampConfig{Profile: config.RampNone}},
			Spec: rekeyer.Spec{Strategy: hash, SourceStore: record.Datastore, TargetStore: record.Datastore},
		}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.p.TargetKey.Columns == nil {
				tc.p.TargetKey = key
			}
			tc.p.ScratchDir = "/scratch"
			o, ok := newWrites(tc.p, "run").planOptions()
			if !ok {
				t.Fatal("not planned")
			}
			if o.Local != tc.want {
				t.Errorf("Local = %v, want %v", o.Local, tc.want)
			}
			if spills := o.Spill == tc.p.ScratchDir; spills == o.Local {
				t.Errorf("Spill = %q with Local = %v: want the scratch directory for the shuffle only", o.Spill, o.Local)
			}
			if wp := DescribeWrites(tc.p); strings.Contains(wp, "no global shuffle") != tc.want {
				t.Errorf("WritePlanning() = %q; want it to say whether there is a global shuffle", wp)
			}
			if err := o.WithDefaults().Validate(); err != nil {
				t.Error(err)
			}
			interleaved := tc.want && tc.p.Source.Type == config.TypeJSONL && !tc.p.Scatters()
			if got := newWrites(tc.p, "run").interleave(); (got > 0) != interleaved || interleaved && got != writeorder.DefaultBuffer {
				t.Errorf("interleave() = %d, want %v (the planner's buffer)", got, interleaved)
			}
			if wp := DescribeWrites(tc.p); strings.Contains(wp, "interleaved") != interleaved {
				t.Errorf("DescribeWrites() = %q; want it to say whether the source is read interleaved", wp)
			}
		})
	}
}

// TestPlanDeletes: a cohort cleanup's deletes are planned for the source
// by its key (old keys, never scattered by the rewrite: a global shuffle
// unless write.shuffle says never), a Datastore source's within the
// sink's entity bound.
func TestPlanDeletes(t *testing.T) {
	old, _ := rewrite.ParseKeySchema("Logs", "UserId STRING(36), Seq INT64")
	shard, _ := rewrite.ParseKeySchema("LogsV2", "ShardId INT64, UserId STRING(36), Seq INT64")
	hash := rewrite.StepConfig{Strategy: "hashprefix"}
	for _, shuffle := range []string{config.ShuffleAuto, config.ShuffleAlways, config.ShuffleNever} {
		j := resolved(&migration.Job{
			Config: &config.Config{Source: config.Endpoint{Type: config.TypeSpanner}, Target: config.Endpoint{Type: config.TypeSpanner},
				Write: config.WriteConfig{BatchRows: 50, Shuffle: shuffle}},
			Spec:      rekeyer.Spec{Strategy: hash, SourceStore: record.Spanner, TargetStore: record.Spanner},
			SourceKey: old, TargetKey: shard,
		})
		w := newWrites(j, "run")
		w.deletes = true
		o, ok := w.planOptions()
		if !ok || o.Store != record.Spanner || o.Key != old.Text() || o.BatchRows != 50 || o.Local != (shuffle == config.ShuffleNever) {
			t.Errorf("shuffle %s: %+v, %v; want the source's key, Local only for never", shuffle, o, ok)
		}
		if d := w.describe(); !strings.HasPrefix(d, "delete planning: ") {
			t.Errorf("describe() = %q", d)
		}
	}
	j := resolved(&migration.Job{Config: &config.Config{Source: config.Endpoint{Type: config.TypeDatastore}, Target: config.Endpoint{Type: config.TypeJSONL},
		Write: config.WriteConfig{BatchMutations: 100, BatchRows: 500}}})
	w := newWrites(j, "run")
	w.deletes = true
	if o, ok := w.planOptions(); !ok || o.Store != record.Datastore || o.BatchRows != 100 {
		t.Errorf("datastore source: %+v, %v", o, ok)
	}
}

// resolved fills in j's resolved settings from j.Config, as
// migration.FromConfig does for a job it makes.
func resolved(j *migration.Job) *migration.Job {
	f := migration.FromConfig(j.Config)
	j.Source, j.Target, j.Cohort, j.Write, j.Descendants, j.Strategy = f.Source, f.Target, f.Cohort, f.Write, f.Descendants, f.Strategy
	return j
}
