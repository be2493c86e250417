package cutover_test

import (
	"context"
	"log"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/record"
)

// An application keeps its client and its old keys; the library routes
// each call by the phase of the user's cohort (migration.yaml is the
// migration's config, with cohort: {user: UserId}).
func ExampleOpenSpanner() {
	ctx := context.Background()
	client, err := spanner.NewClient(ctx, "projects/p/instances/i/databases/app")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	lib, err := cutover.OpenSpanner(ctx, client, "migration.yaml", cutover.Options{Migration: "logs-v2"})
	if err != nil {
		log.Fatal(err)
	}
	defer lib.Close()

	row := record.Record{Table: "AccessLogs", Fields: []record.Field{
		{Name: "UserId", Value: record.String("alice")}, {Name: "Seq", Value: record.Int(1)}, {Name: "Page", Value: record.String("/home")}}}
	if err := lib.Write(ctx, row); err != nil { // old, new or both, by alice's phase
		log.Fatal(err)
	}
	key := record.Record{Table: "AccessLogs", Fields: row.Fields[:2]}
	got, found, err := lib.Read(ctx, key) // from the authoritative store, in old keys
	if err != nil {
		log.Fatal(err)
	}
	log.Println(found, got.Describe(), lib.Stats().Fallbacks)
}
