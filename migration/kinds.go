package migration

import (
	"context"
	"fmt"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/write/throttle"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
)

// The store kinds as a migration's resolution sees them, in one place:
// what each kind of endpoint (config.Type*) holds and can do. The rest of
// the package asks these properties instead of comparing types; a new
// kind is an entry here (and its read and write in pipeline/kinds.go, its
// staged cutover in cutover/operator/kinds.go, what the commands do with it in
// cmd/rekey/kinds.go).
type endpointKind struct {
	// shape is the record shape the kind holds: record.Spanner (rows) or
	// record.Datastore (entities); "" for a file that holds the shape of
	// the store at the other end.
	shape string
	// database: a live database of that shape, read at a time
	// (source.read_time), reached over the network at addr unless the
	// emulator variable env is set.
	database  bool
	addr, env string
	// tables: it holds Spanner tables (a database or an export); export:
	// a Spanner export (Avro files with their schemas).
	tables, export bool
	// ranges: a file a run can read in interleaved ranges from its start.
	ranges bool
	// prepare prepares it as a target (its DDL, manifest, ...).
	prepare func(ctx context.Context, j *Job, o Options) error
	// lease opens the ramp-up's shared state in a target t of the kind
	// (throttle.Lease) through this process's shared client of it, for
	// user (the client's variant name); nil for a kind that keeps none.
	lease func(t config.Endpoint, user string) (throttle.Lease, func(), error)
}

// kinds is filled in by init: prepare functions refer back to kindOf.
var kinds map[string]endpointKind

func init() {
	kinds = map[string]endpointKind{
		config.TypeSpanner: {shape: record.Spanner, database: true, tables: true,
			addr: "spanner.googleapis.com:443", env: "SPANNER_EMULATOR_HOST", prepare: prepareSpanner,
			lease: func(t config.Endpoint, user string) (throttle.Lease, func(), error) {
				db := spannerdb.DatabasePath(t.Project, t.Instance, t.Database)
				c, release, err := spannerdb.Shared(db, user, func(ctx context.Context) (*spanner.Client, error) { return spanner.NewClient(ctx, db) })
				return spannerdb.RampLease{Client: c}, release, err
			}},
		config.TypeDatastore: {shape: record.Datastore, database: true,
			addr: "datastore.googleapis.com:443", env: "DATASTORE_EMULATOR_HOST", prepare: prepareDatastore,
			lease: func(t config.Endpoint, _ string) (throttle.Lease, func(), error) {
				c, release, err := datastoredb.Shared(t.Project, t.Database, "", nil)
				return datastoredb.RampLease{Client: c, Namespace: t.Namespace}, release, err
			}},
		config.TypeAvro: {tables: true, export: true, prepare: func(_ context.Context, j *Job, o Options) error {
			j.sayDDL(o, "")
			return nil
		}},
		config.TypeEntityJSON: {shape: record.Datastore},
		config.TypeJSONL:      {ranges: true},
		config.TypeCSV:        {},
	}
}

// kindOf is the kind of endpoints of type t (the zero kind for an
// unknown type, which config validation refuses).
func kindOf(t string) endpointKind { return kinds[t] }

// RampLease opens the ramp-up's shared state in the job's target (a
// Spanner or Datastore database: where the staged cutover's phase store
// is too) through this process's shared client of it, named user;
// release releases the client.
func (j *Job) RampLease(user string) (lease throttle.Lease, release func(), err error) {
	k := kindOf(j.Target.Type)
	if k.lease == nil {
		return nil, nil, fmt.Errorf("no ramp-up lease in a %s target", j.Target.Type)
	}
	return k.lease(j.Target, user)
}

// spannerDB and datastoreDB report a Spanner or Datastore database.
func (k endpointKind) spannerDB() bool   { return k.database && k.shape == record.Spanner }
func (k endpointKind) datastoreDB() bool { return k.database && k.shape == record.Datastore }
