package operator

import (
	"strings"
	"testing"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/rewrite"
)

// TestCheckCleanup: a cleanup deletes from a Spanner table (with its
// children ON DELETE CASCADE) or a Datastore kind (with its descendants), keeps its phases at a Spanner or
// Datastore target, and must be able to tell each record's user; every
// problem is named at once, as a config error.
func TestCheckCleanup(t *testing.T) {
	key, _ := rewrite.ParseKeySchema("Logs", "UserId STRING(36), Seq INT64")
	logs := &spannerdb.Table{Name: "Logs", Key: key, Columns: []spannerdb.Column{{Name: "UserId", Type: "STRING(36)"}, {Name: "Seq", Type: "INT64"}}}
	job := func(src, tgt, user string) *migration.Job {
		j := &migration.Job{Config: &config.Config{Source: config.Endpoint{Type: src}, Target: config.Endpoint{Type: tgt}, Cohort: config.CohortConfig{User: user, Buckets: 100}}}
		if src == config.TypeSpanner {
			j.Spanner = &migration.SpannerSchemas{Source: logs}
		}
		return j
	}
	if err := CheckCleanup(job(config.TypeSpanner, config.TypeSpanner, "UserId")); err != nil {
		t.Errorf("spanner to spanner: %v", err)
	}
	if err := CheckCleanup(job(config.TypeDatastore, config.TypeDatastore, "key:User")); err != nil {
		t.Errorf("datastore to datastore: %v", err)
	}
	cascade := job(config.TypeSpanner, config.TypeSpanner, "UserId")
	cascade.Config.Interleaved = []string{"LogPages"}
	cascade.Spanner.Children = map[string]*spannerdb.Table{"LogPages": {Name: "LogPages", Parent: "Logs", OnDeleteCascade: true}}
	if err := CheckCleanup(cascade); err != nil {
		t.Errorf("spanner to spanner with a child ON DELETE CASCADE: %v", err)
	}
	descendants := job(config.TypeDatastore, config.TypeDatastore, "key:User")
	descendants.Config.Descendants = []string{"Page"}
	if err := CheckCleanup(descendants); err != nil {
		t.Errorf("datastore to datastore with descendants: %v", err)
	}
	children := job(config.TypeSpanner, config.TypeSpanner, "Owner")
	children.Config.Interleaved = []string{"LogPages"}
	children.Spanner.Children = map[string]*spannerdb.Table{"LogPages": {Name: "LogPages", Parent: "Logs"}}
	children.RedriveFrom = "dead.jsonl"
	for _, tc := range []struct {
		j    *migration.Job
		want []string
	}{
		{job(config.TypeJSONL, config.TypeJSONL, ""), []string{"source.type jsonl", "target.type jsonl", "cohort.user is not set"}},
		{children, []string{"cohort.user Owner is not a column of source table Logs", "interleaved tables LogPages are not ON DELETE CASCADE", "not a dead-letter file"}},
		{job(config.TypeSpanner, config.TypeDatastore, "key:User"), []string{"cohort.user key:User is not a column"}},
		{job(config.TypeDatastore, config.TypeJSONL, "key:User"), []string{"target.type jsonl"}},
	} {
		err := CheckCleanup(tc.j)
		if !migration.IsConfigError(err) {
			t.Errorf("%+v: %v, want a config error", tc.j.Config.Source, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("CheckCleanup = %v, want it to say %q", err, w)
			}
		}
	}
}

// TestCheckBackfillChildren: a backfill (a verify, a reverse backfill)
// carries interleaved tables whose rows hold the user id column, and
// refuses, naming them, those that do not.
func TestCheckBackfillChildren(t *testing.T) {
	key, _ := rewrite.ParseKeySchema("Customers", "CustomerId INT64")
	okey, _ := rewrite.ParseKeySchema("Orders", "CustomerId INT64, OrderId INT64")
	customers := &spannerdb.Table{Name: "Customers", Key: key, Columns: []spannerdb.Column{{Name: "CustomerId", Type: "INT64"}, {Name: "Region", Type: "STRING(MAX)"}}}
	orders := &spannerdb.Table{Name: "Orders", Parent: "Customers", Key: okey, Columns: []spannerdb.Column{{Name: "CustomerId", Type: "INT64"}, {Name: "OrderId", Type: "INT64"}}}
	job := func(user string) *migration.Job {
		return &migration.Job{
			Config:  &config.Config{Source: config.Endpoint{Type: config.TypeSpanner}, Target: config.Endpoint{Type: config.TypeSpanner}, Cohort: config.CohortConfig{User: user, Buckets: 100}, Interleaved: []string{"Orders"}},
			Spanner: &migration.SpannerSchemas{Source: customers, Children: map[string]*spannerdb.Table{"Orders": orders}},
		}
	}
	if err := CheckBackfill(job("CustomerId")); err != nil {
		t.Errorf("user CustomerId (in every child): %v", err)
	}
	for what, check := range map[string]func(*migration.Job) error{"verify": CheckVerify, "reverse backfill": CheckReverse} {
		if err := check(job("CustomerId")); err != nil {
			t.Errorf("%s of a job with Orders: %v", what, err)
		}
	}
	err := CheckBackfill(job("Region"))
	if !migration.IsConfigError(err) || !strings.Contains(err.Error(), "cohort.user Region is not a column of interleaved tables Orders") {
		t.Errorf("user Region (not in Orders): %v, want a config error naming Orders", err)
	}
}
