package pipeline

import (
	"testing"

	"github.com/rekeyio/rekey/internal/config"
	"github.com/rekeyio/rekey/internal/spannerdb"
	"github.com/rekeyio/rekey/rewrite"
	"github.com/rekeyio/rekey/transforms/plan"
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
	p := &Plan{Config: &config.Config{Target: config.Endpoint{Type: config.TypeSpanner}, Write: write},
		TargetKey: key("Customers", "CustomerId INT64")}
	p.spanner = &spannerPlan{targets: []*spannerdb.Table{
		{Name: "Customers", Key: p.TargetKey},
		{Name: "Orders", Key: key("Orders", "CustomerId INT64, OrderId INT64 DESC")},
	}}
	o, ok := p.PlanOptions()
	if !ok || o.Store != plan.StoreSpanner || o.Key != "CustomerId INT64" || o.Children["Orders"] != "CustomerId INT64, OrderId INT64 DESC" ||
		o.BatchRows != 200 || o.Shards != 8 || o.Buffer != 4000 || o.Seed != 0 {
		t.Errorf("spanner: %+v, %v", o, ok)
	}
	if err := o.WithDefaults().Validate(); err != nil {
		t.Error(err)
	}

	// Datastore: batches no larger than the sink's entity bound.
	p = &Plan{Config: &config.Config{Target: config.Endpoint{Type: config.TypeDatastore},
		Write: config.WriteConfig{BatchMutations: 100, BatchRows: 500}}}
	if o, ok := p.PlanOptions(); !ok || o.Store != plan.StoreDatastore || o.BatchRows != 100 || o.WithDefaults().Validate() != nil {
		t.Errorf("datastore: %+v, %v", o, ok)
	}

	// Files are written as they come.
	p = &Plan{Config: &config.Config{Target: config.Endpoint{Type: config.TypeJSONL}}}
	if _, ok := p.PlanOptions(); ok {
		t.Error("a JSON Lines target is planned")
	}
}
