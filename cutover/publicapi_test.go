package cutover_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// TestOpenSpannerConfig opens the library as an application outside the
// module would: the migration's config a Go value, the client of new the
// application's own. A client of another database than the target is
// refused, a config without cohort.user too; the library writes new
// through the given client in dual_write and leaves it open on Close.
func TestOpenSpannerConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	oldC := emulator.TestDB(t, logsDDL)
	newC := emulator.TestDB(t, append([]string{logsV2DDL}, phases.SpannerDDL...)...)
	dbID := func(c *spanner.Client) string { return c.DatabaseName()[strings.LastIndex(c.DatabaseName(), "/")+1:] }
	cfg := config.Config{
		Source:  config.Endpoint{Type: config.TypeSpanner, Project: emulator.SpannerProject(), Instance: emulator.SpannerInstance(), Database: dbID(oldC), Table: "Logs"},
		Target:  config.Endpoint{Type: config.TypeSpanner, Project: emulator.SpannerProject(), Instance: emulator.SpannerInstance(), Database: dbID(newC), Table: "LogsV2"},
		Rewrite: config.RewriteConfig{Strategy: "shard", Params: map[string]any{"n": 8, "mode": "abs"}},
		Cohort:  config.CohortConfig{User: "UserId"},
	}
	mig := fmt.Sprintf("logs-%d", time.Now().UnixNano())
	o := cutover.Options{Migration: mig, CacheTTL: envTTL, Skew: envSkew}

	wrong := o
	wrong.NewSpannerClient = oldC
	if lib, err := cutover.OpenSpannerConfig(ctx, oldC, cfg, wrong); err == nil || !strings.Contains(err.Error(), "not of the migration's target") {
		if lib != nil {
			lib.Close()
		}
		t.Errorf("a client of the source database as new's: got %v, want it refused", err)
	}
	noUser := cfg
	noUser.Cohort.User = ""
	if lib, err := cutover.OpenSpannerConfig(ctx, oldC, noUser, o); err == nil || !strings.Contains(err.Error(), "set cohort.user") {
		if lib != nil {
			lib.Close()
		}
		t.Errorf("no cohort.user: got %v, want it refused", err)
	}

	o.NewSpannerClient = newC
	lib, err := cutover.OpenSpannerConfig(ctx, oldC, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	e := &spannerEnv{lib: lib, old: oldC, new: newC, store: phases.SpannerStore{Client: newC}, migration: mig}
	e.setPhase(t, "alice", phases.DualWrite)
	if err := lib.Write(ctx, logRow("alice", 1, "v1")); err != nil {
		t.Fatal(err)
	}
	if got := pages(t, newC, "LogsV2", "alice"); len(got) != 1 || got[0] != "v1" {
		t.Errorf("new holds %q, want [v1] written through the given client", got)
	}
	lib.Close()
	if got := pages(t, newC, "LogsV2", "alice"); len(got) != 1 {
		t.Errorf("after Close, the application's client of new reads %q", got)
	}
}

// TestDatastoreReferences: with references: [Prev] and keep_original_key,
// a write in read_new stores Prev as the referenced entity's new key and
// the old key in OldKey, and a read (of new) gives the entity back as the
// application wrote it: Prev the old key, no OldKey.
func TestDatastoreReferences(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := emulator.TestDatastore(t)
	oldNS, newNS := emulator.UniqueNamespace("refs-old"), emulator.UniqueNamespace("refs-new")
	cfg := config.Config{
		Source:          config.Endpoint{Type: config.TypeDatastore, Project: emulator.DatastoreProject(), Namespace: oldNS, Kind: "Log"},
		Target:          config.Endpoint{Type: config.TypeDatastore, Project: emulator.DatastoreProject(), Namespace: newNS, Kind: "Log"},
		Rewrite:         config.RewriteConfig{Strategy: "hashprefix"},
		References:      []string{"Prev"},
		KeepOriginalKey: "OldKey",
		Cohort:          config.CohortConfig{User: "User"},
	}
	mig := fmt.Sprintf("refs-%d", time.Now().UnixNano())
	lib, err := cutover.OpenDatastoreConfig(ctx, c, cfg, cutover.Options{Migration: mig, CacheTTL: envTTL, Skew: envSkew})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	e := &dsEnv{lib: lib, c: c, newC: c, store: phases.DatastoreStore{Client: c, Namespace: newNS}, migration: mig, oldNS: oldNS, newNS: newNS}
	e.setPhase(t, "alice", phases.ReadNew)
	prev := rewrite.DatastoreKey{Namespace: oldNS, Path: []rewrite.PathElement{{Kind: "Log", Name: "alice.0"}}}
	rec := e.entity("alice", 1, "v1")
	rec.Fields = append(rec.Fields, record.Field{Name: "Prev", Value: record.Key(prev)})
	if err := lib.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	var stored []struct {
		User, Page   string
		Prev, OldKey *datastore.Key
	}
	if _, err := c.GetAll(ctx, datastore.NewQuery("Log").Namespace(newNS), &stored); err != nil || len(stored) != 1 {
		t.Fatalf("new holds %d entities (%v), want 1", len(stored), err)
	}
	if p := stored[0].Prev; p == nil || p.Namespace != newNS || p.Name == "alice.0" {
		t.Errorf("new's Prev is %v; want alice.0's new key, in namespace %s", p, newNS)
	}
	if k := stored[0].OldKey; k == nil || k.Name != "alice.1" || k.Namespace != oldNS {
		t.Errorf("new's OldKey is %v; want alice.1's old key", k)
	}
	got, found, err := lib.Read(ctx, e.key("alice", 1))
	if err != nil || !found {
		t.Fatalf("read: found %v, %v", found, err)
	}
	if v, _ := got.Get("Prev"); v.Key == nil || v.Key.String() != prev.String() {
		t.Errorf("read gives Prev %v, want the old key %s", v.Key, prev.String())
	}
	if _, ok := got.Get("OldKey"); ok {
		t.Errorf("read gives the kept key OldKey too: %s", got.Describe())
	}
}

// TestDatastoreReferencesTo: with references_to another run's kind
// (Customer, rewritten by hashprefix and moved to that run's target
// namespace), a write in read_new stores the customer reference as the
// customer's new key there, and a read of new gives back the key the
// application wrote. A strategy without an inverse is refused when the
// library opens: a read of new could not give the key back.
func TestDatastoreReferencesTo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := emulator.TestDatastore(t)
	oldNS, newNS := emulator.UniqueNamespace("refsto-old"), emulator.UniqueNamespace("refsto-new")
	crm, crm2 := emulator.UniqueNamespace("crm"), emulator.UniqueNamespace("crm2")
	otherPath := filepath.Join(t.TempDir(), "customers.yaml")
	if err := os.WriteFile(otherPath, []byte(fmt.Sprintf("source: {type: datastore, project: %s, namespace: %s, kind: Customer}\ntarget: {type: datastore, project: %s, namespace: %s, kind: Customer}\nrewrite: {strategy: hashprefix}\n",
		emulator.DatastoreProject(), crm, emulator.DatastoreProject(), crm2)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{
		Source:       config.Endpoint{Type: config.TypeDatastore, Project: emulator.DatastoreProject(), Namespace: oldNS, Kind: "Log"},
		Target:       config.Endpoint{Type: config.TypeDatastore, Project: emulator.DatastoreProject(), Namespace: newNS, Kind: "Log"},
		Rewrite:      config.RewriteConfig{Strategy: "hashprefix"},
		ReferencesTo: []config.ReferenceTo{{Property: "Customer", Config: otherPath}},
		Cohort:       config.CohortConfig{User: "User"},
	}
	mig := fmt.Sprintf("refsto-%d", time.Now().UnixNano())
	lib, err := cutover.OpenDatastoreConfig(ctx, c, cfg, cutover.Options{Migration: mig, CacheTTL: envTTL, Skew: envSkew})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	e := &dsEnv{lib: lib, c: c, newC: c, store: phases.DatastoreStore{Client: c, Namespace: newNS}, migration: mig, oldNS: oldNS, newNS: newNS}
	e.setPhase(t, "alice", phases.ReadNew)
	cust := rewrite.DatastoreKey{Namespace: crm, Path: []rewrite.PathElement{{Kind: "Customer", Name: "acme"}}}
	rec := e.entity("alice", 1, "v1")
	rec.Fields = append(rec.Fields, record.Field{Name: "Customer", Value: record.Key(cust)})
	if err := lib.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	var stored []struct {
		User, Page string
		Customer   *datastore.Key
	}
	if _, err := c.GetAll(ctx, datastore.NewQuery("Log").Namespace(newNS), &stored); err != nil || len(stored) != 1 {
		t.Fatalf("new holds %d entities (%v), want 1", len(stored), err)
	}
	if k := stored[0].Customer; k == nil || k.Namespace != crm2 || k.Name == "acme" {
		t.Errorf("new's Customer is %v; want acme's new key, in namespace %s", k, crm2)
	}
	got, found, err := lib.Read(ctx, e.key("alice", 1))
	if err != nil || !found {
		t.Fatalf("read: found %v, %v", found, err)
	}
	if v, _ := got.Get("Customer"); v.Key == nil || v.Key.String() != cust.String() {
		t.Errorf("read gives Customer %v, want the old key %s", v.Key, cust.String())
	}

	cfg.ReferencesTo = []config.ReferenceTo{{Property: "Customer", Kind: "Customer", Rewrite: config.RewriteConfig{Strategy: "uuid"}}}
	if lib, err := cutover.OpenDatastoreConfig(ctx, c, cfg, cutover.Options{Migration: mig}); err == nil || !strings.Contains(err.Error(), "inverse") {
		if lib != nil {
			lib.Close()
		}
		t.Errorf("references_to rewritten to UUIDs: got %v, want it refused for want of an inverse", err)
	}
}
