// Command configvalue is an application that opens rekey's cutover
// library from code alone: the migration's config is a Go value (no YAML
// file) and the clients of both databases are the application's own
// (its credentials, pool and interceptors). It writes a user's record
// through the library, reads it back and prints where the user's cohort
// is.
//
//	configvalue -project P -old-namespace logs -new-namespace logs-v2 \
//	    -new-database rekey-new -migration logs-v2 -user alice -page /home
//
// It imports only rekey's public packages, and it is built as a module of
// its own in the tests, as code outside rekey's module is.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

func main() {
	project := flag.String("project", "rekey-demo", "the Datastore project")
	oldNS := flag.String("old-namespace", "logs", "the application's namespace, where old entities are")
	newNS := flag.String("new-namespace", "logs-v2", "where the new entities go")
	newDB := flag.String("new-database", "", `the database of the new entities ("": the application's)`)
	name := flag.String("migration", "logs-v2", "the migration's name in the phase store")
	user := flag.String("user", "alice", "whose record to write")
	page := flag.String("page", "/home", "the record's Page")
	ttl := flag.Duration("cache-ttl", cutover.DefaultCacheTTL, "the phase cache's TTL (every instance and the operator's config must agree)")
	skew := flag.Duration("skew", 2*time.Second, "the skew margin (as -cache-ttl)")
	flag.Parse()
	ctx := context.Background()

	// The application's clients: of its own database, and of the new one.
	oldC, err := datastore.NewClient(ctx, *project)
	if err != nil {
		log.Fatal(err)
	}
	defer oldC.Close()
	newC := oldC
	if *newDB != "" {
		if newC, err = datastore.NewClientWithDatabase(ctx, *project, *newDB); err != nil {
			log.Fatal(err)
		}
		defer newC.Close()
	}

	// The migration as `rekey run -c` would read it from YAML.
	cfg := config.Config{
		Source:  config.Endpoint{Type: config.TypeDatastore, Project: *project, Namespace: *oldNS, Kind: "Log"},
		Target:  config.Endpoint{Type: config.TypeDatastore, Project: *project, Database: *newDB, Namespace: *newNS, Kind: "Log"},
		Rewrite: config.RewriteConfig{Strategy: "hashprefix"},
		Cohort:  config.CohortConfig{User: "User", CacheTTL: *ttl, Skew: *skew},
	}
	lib, err := cutover.OpenDatastoreConfig(ctx, oldC, cfg, cutover.Options{Migration: *name, NewDatastoreClient: newC})
	if err != nil {
		log.Fatal(err)
	}
	defer lib.Close()

	key := rewrite.DatastoreKey{Namespace: *oldNS, Path: []rewrite.PathElement{{Kind: "Log", Name: *user + ".1"}}}
	rec := record.Record{Table: "Log", Key: &key, Fields: []record.Field{
		{Name: "User", Value: record.String(*user)},
		{Name: "Page", Value: record.String(*page)},
	}}
	if err := lib.Write(ctx, rec); err != nil {
		log.Fatal(err)
	}
	got, found, err := lib.Read(ctx, record.Record{Table: "Log", Key: &key, Fields: rec.Fields[:1]})
	if err != nil {
		log.Fatal(err)
	}
	p, _ := got.Get("Page")
	k := cohort.Of(*user, cohort.DefaultBuckets)
	fmt.Printf("wrote %s; read it back: found %v, Page %q; cohort %d is %s\n", key.String(), found, p.Str, k, lib.Phases().Phase(k))
}
