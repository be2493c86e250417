package operator

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
)

// The store kinds of the staged cutover, in one place: which kinds keep
// the phase store (at a migration's target), which pairs of old and new
// the application library routes, and how the operator's jobs open each
// from the environment. The operator's checks, the cohort jobs' DoFns
// (transforms/staged) and the CLI ask here (KeepsPhases, Routes,
// OpenLibrary, OpenStore) instead of comparing store types. A new kind,
// or a cross-store pair, is an entry in phaseKinds or pairKinds plus its
// library in package cutover. (The application library itself needs none
// of this: an application gives it its clients.)

// A phaseKind is a kind of target that keeps a migration's phase store,
// its touched marks and its repair log.
type phaseKind struct {
	// open opens the phase store at t (create: make what a first move
	// needs where it is missing); close releases its client.
	open func(ctx context.Context, t config.Endpoint, create bool) (st phases.Store, close func(), err error)
}

// A pairKind is the application library of one pair of kinds, old's and
// new's.
type pairKind struct {
	// open opens the library on job, its client of old made from the
	// environment (the operator's jobs; an application gives its own);
	// close closes the library and that client.
	open func(ctx context.Context, job *migration.Job, o cutover.Options) (lib library, close func(), err error)
	// reverse fills in where a reverse backfill of job reads new (nil:
	// the pair has no reverse backfill).
	reverse func(job *migration.Job, r *phases.Reverse)
}

// library is what the operator's jobs need of an application library
// (Spanner, Datastore).
type library interface {
	cutover.Library
	RepairOld(ctx context.Context, entries []phases.RepairEntry) ([]phases.RepairEntry, error)
}

var (
	_ library = (*cutover.Spanner)(nil)
	_ library = (*cutover.Datastore)(nil)
	_ library = (*cutover.DatastoreSpanner)(nil)
)

var phaseKinds = map[string]phaseKind{
	config.TypeSpanner: {open: func(ctx context.Context, t config.Endpoint, create bool) (phases.Store, func(), error) {
		db := spannerdb.DatabasePath(t.Project, t.Instance, t.Database)
		c, err := spanner.NewClient(ctx, db)
		if err != nil {
			return nil, nil, err
		}
		if create {
			if _, err := phases.CreateSpannerTables(ctx, c, db); err != nil {
				c.Close()
				return nil, nil, err
			}
		}
		return phases.SpannerStore{Client: c}, c.Close, nil
	}},
	config.TypeDatastore: {open: func(ctx context.Context, t config.Endpoint, _ bool) (phases.Store, func(), error) {
		c, err := datastoredb.Client(ctx, t.Project, t.Database)
		if err != nil {
			return nil, nil, err
		}
		return phases.DatastoreStore{Client: c, Namespace: t.Namespace}, func() { c.Close() }, nil
	}},
}

// pair is (old's kind, new's kind).
type pair struct{ old, new string }

var pairKinds = map[pair]pairKind{
	{config.TypeSpanner, config.TypeSpanner}: {open: func(ctx context.Context, job *migration.Job, o cutover.Options) (library, func(), error) {
		src := job.Config.Source
		c, err := spanner.NewClient(ctx, spannerdb.DatabasePath(src.Project, src.Instance, src.Database))
		return libraryOn(c, err, (*spanner.Client).Close, func(c *spanner.Client) (library, error) { return cutover.NewSpanner(ctx, c, job, o) })
	}, reverse: func(job *migration.Job, r *phases.Reverse) {
		t := job.Config.Target
		r.NewDatabase = spannerdb.DatabasePath(t.Project, t.Instance, t.Database)
		if job.Spanner != nil && len(job.Spanner.Targets) > 0 {
			r.NewTable = job.Spanner.Targets[0].Name
			for _, c := range job.Spanner.Targets[1:] {
				r.NewChildren = append(r.NewChildren, c.Name)
			}
		}
	}},
	{config.TypeDatastore, config.TypeDatastore}: {open: func(ctx context.Context, job *migration.Job, o cutover.Options) (library, func(), error) {
		src := job.Config.Source
		c, err := datastoredb.Client(ctx, src.Project, src.Database)
		return libraryOn(c, err, func(c *datastore.Client) { c.Close() }, func(c *datastore.Client) (library, error) { return cutover.NewDatastore(ctx, c, job, o) })
	}, reverse: func(job *migration.Job, r *phases.Reverse) {
		t := job.Config.Target
		r.NewProject, r.NewDatastoreDB, r.OldNamespace = t.Project, t.Database, job.Config.Source.Namespace
	}},
	{config.TypeDatastore, config.TypeSpanner}: {open: func(ctx context.Context, job *migration.Job, o cutover.Options) (library, func(), error) {
		src := job.Config.Source
		c, err := datastoredb.Client(ctx, src.Project, src.Database)
		return libraryOn(c, err, func(c *datastore.Client) { c.Close() }, func(c *datastore.Client) (library, error) { return cutover.NewDatastoreSpanner(ctx, c, job, o) })
	}, reverse: func(job *migration.Job, r *phases.Reverse) {
		t := job.Config.Target
		r.NewDatabase = spannerdb.DatabasePath(t.Project, t.Instance, t.Database)
		if job.Spanner != nil && len(job.Spanner.Targets) > 0 {
			r.NewTable = job.Spanner.Targets[0].Name
		}
		r.OldNamespace = job.Config.Source.Namespace
	}},
}

// libraryOn is the library newLib makes on client c of old (opened with
// err), and the close of both.
func libraryOn[C any](c C, err error, closeC func(C), newLib func(C) (library, error)) (library, func(), error) {
	if err != nil {
		return nil, nil, err
	}
	lib, err := newLib(c)
	if err != nil {
		closeC(c)
		return nil, nil, err
	}
	return lib, func() { lib.Close(); closeC(c) }, nil
}

// KeepsPhases reports whether a target of kind t (config.Type*) can keep
// a migration's phase store.
func KeepsPhases(t string) bool {
	_, ok := phaseKinds[t]
	return ok
}

// Routes reports whether the application library routes a migration
// from a source of kind from to a target of kind to.
func Routes(from, to string) bool {
	_, ok := pairKinds[pair{from, to}]
	return ok
}

// HoldsOld reports whether a store of kind t can be old in a migration
// the application library routes (where a cleanup deletes from).
func HoldsOld(t string) bool {
	for p := range pairKinds {
		if p.old == t {
			return true
		}
	}
	return false
}

// ErrNoPhaseStoreKind is wrapped by the errors of a target that cannot
// keep the phase store.
// (its text names the kinds of phaseKinds).
var ErrNoPhaseStoreKind = errors.New("the phase store is kept at a Spanner or Datastore target")

// OpenStore opens the phase store at a migration's target: the Spanner
// database's tables (created where missing when create is set: a first
// move needs them) or the Datastore database's namespace. close releases
// its client.
func OpenStore(ctx context.Context, t config.Endpoint, create bool) (st phases.Store, close func(), err error) {
	k, ok := phaseKinds[t.Type]
	if !ok {
		return nil, nil, fmt.Errorf("%w; this target is %s", ErrNoPhaseStoreKind, t.Type)
	}
	return k.open(ctx, t, create)
}

// OpenLibrary opens the application library of job as the operator's
// jobs use it (rekey load, the repairs of old): its client of old made
// from the environment. close closes the library and that client.
func OpenLibrary(ctx context.Context, job *migration.Job, o cutover.Options) (lib cutover.Library, close func(), err error) {
	return openLibrary(ctx, job, o)
}

func openLibrary(ctx context.Context, job *migration.Job, o cutover.Options) (library, func(), error) {
	k, err := pairOf(job)
	if err != nil {
		return nil, nil, err
	}
	return k.open(ctx, job, o)
}

// ReverseFor returns the Reverse of a reverse backfill of job: its
// rekeyer spec and where it reads new.
func ReverseFor(job *migration.Job) (phases.Reverse, error) {
	k, err := pairOf(job)
	if err != nil {
		return phases.Reverse{}, err
	}
	if k.reverse == nil {
		return phases.Reverse{}, fmt.Errorf("cutover: a reverse backfill from %s back to %s is not supported yet", job.Config.Target.Type, job.Config.Source.Type)
	}
	r := phases.Reverse{Spec: job.Spec.Text()}
	k.reverse(job, &r)
	return r, nil
}

// pairOf is the pair kind of job's old and new.
func pairOf(job *migration.Job) (pairKind, error) {
	src, tgt := job.Config.Source.Type, job.Config.Target.Type
	k, ok := pairKinds[pair{src, tgt}]
	if !ok {
		return pairKind{}, fmt.Errorf("cutover: the application library routes Spanner to Spanner, Datastore to Datastore and Datastore to Spanner migrations; this one goes from %s to %s", src, tgt)
	}
	return k, nil
}
