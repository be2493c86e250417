package main

import (
	"context"
	"io"

	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
)

// storeKinds is where a new store kind's command-side behaviour goes:
// what the commands (emulators up and --seed, lint, splits) do with an
// endpoint of each kind (config.Type*) beyond running it, which
// migration/kinds.go, pipeline/kinds.go and cutover/operator/kinds.go cover. The
// commands ask these entries instead of comparing types. A kind without
// an entry, and a field an entry leaves out, get the files' behaviour
// (the zero storeKind): nothing on the emulators, nothing to seed, no
// schema to lint, no split points.
var storeKinds = map[string]storeKind{
	config.TypeSpanner:   {spannerDB: true, note: spannerNote, seed: seedSpannerSource},
	config.TypeDatastore: {datastoreDB: true, note: datastoreNote, seed: seedDatastoreSource},
	config.TypeJSONL:     {seed: localRecords},
}

// storeKind is what the commands do with the endpoints of one kind.
type storeKind struct {
	// spannerDB: a Spanner database. `emulators up` creates its instance
	// and database; --seed creates a Spanner target's table unless the
	// source is a Spanner database too (from which 'rekey run
	// --create-target' derives it); lint reads its schema (a source's
	// DDL file, else the database) and, as the target, the shards of the
	// config's rewrite; splits takes it as the target.
	spannerDB bool
	// datastoreDB: a Datastore database. `emulators up` exports its
	// project as DATASTORE_PROJECT_ID; lint samples a source's kinds.
	datastoreDB bool
	// note says what `emulators up` did for an endpoint and what it still
	// needs (storeNote); nil: files, nothing to do on the emulators.
	note func(n upNote)
	// seed fills a source for `emulators up --seed`, saying so on w, and
	// returns the records a Spanner target's table is made from (nil
	// when the run derives it); nil: nothing to seed, no records.
	seed func(ctx context.Context, src config.Endpoint, w io.Writer) ([]record.Record, error)
}

// storeKindOf is the command's kind of endpoints of type t, with the
// files' behaviour where its entry says nothing.
func storeKindOf(t string) storeKind {
	k := storeKinds[t]
	if k.note == nil {
		k.note = filesNote
	}
	if k.seed == nil {
		k.seed = noSeed
	}
	return k
}

// noSeed is the seed of files that give no records: nothing.
func noSeed(context.Context, config.Endpoint, io.Writer) ([]record.Record, error) { return nil, nil }
