package staged

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms"
)

var (
	repairWritten = beam.NewCounter("rekey", operator.RepairWritten)
	repairDeleted = beam.NewCounter("rekey", operator.RepairDeleted)
)

func init() {
	register.DoFn3x1[record.Batch, func(record.Batch), func(record.Batch), error](&RepairPutFn{})
	register.DoFn3x1[context.Context, record.Batch, func(string), error](&RepairDeleteFn{})
	register.DoFn2x1[context.Context, record.Batch, record.Batch](&CountWritesFn{})
}

// RepairPick says what a repair puts right (CompareFn.Repair): every
// difference left after the recheck, except, in the cohorts of ReadNew
// (new authoritative), those not in Pending (old keys whose writes the
// repair log says new missed while old was authoritative).
type RepairPick struct {
	Buckets int             `json:"buckets"`
	ReadNew string          `json:"read_new,omitempty"`
	Pending map[string]bool `json:"pending,omitempty"`

	readNew map[int]bool
}

func (p *RepairPick) setup() error {
	p.readNew = map[int]bool{}
	if p.ReadNew == "" {
		return nil
	}
	rs, err := cohort.Parse(p.ReadNew, p.Buckets)
	if err != nil {
		return err
	}
	for _, r := range rs {
		for c := r.First; c <= r.Last; c++ {
			p.readNew[c] = true
		}
	}
	return nil
}

// pick returns the one-record batch that puts a difference right in new
// (jd; oldKey its old key's text): the record to write (missing or
// different in new), or the record to delete (extra in new) followed by
// an empty marker; false when the repair leaves it.
func (p *RepairPick) pick(jd joined, oldKey string) (record.Batch, bool) {
	if p.readNew[jd.cohort] && !p.Pending[oldKey] {
		return record.Batch{}, false
	}
	if jd.want == nil {
		return record.Batch{Recs: []record.Record{*jd.got, {}}}, true
	}
	return record.Batch{Recs: []record.Record{*jd.want}}, true
}

// RepairCompareFn is a repair's CompareFn (Repair set): it judges and
// rechecks each key as verify does, and emits to its third output what
// RepairPick puts right.
type RepairCompareFn struct {
	CompareFn
}

func (f *RepairCompareFn) Setup(ctx context.Context) error {
	if f.Repair == nil {
		return errors.New("repair: no RepairPick")
	}
	if err := f.Repair.setup(); err != nil {
		return err
	}
	return f.CompareFn.Setup(ctx)
}

func (f *RepairCompareFn) ProcessElement(ctx context.Context, key string, olds, news func(*[]byte) bool, emit func(int, string), keys func(string), fix func(record.Batch)) error {
	return f.process(ctx, key, olds, news, compareOut{emit: emit, keys: keys, fix: fix})
}

func (f *RepairCompareFn) FinishBundle(ctx context.Context, emit func(int, string), keys func(string), fix func(record.Batch)) error {
	return f.flush(ctx, compareOut{emit: emit, keys: keys, fix: fix})
}

// RepairPutFn splits RepairCompareFn's third output into writes and deletes.
type RepairPutFn struct{}

func (RepairPutFn) ProcessElement(b record.Batch, writes, deletes func(record.Batch)) error {
	recs := b.Recs
	if len(recs) == 2 {
		deletes(record.Batch{Recs: recs[:1:1]})
		return nil
	}
	writes(b)
	return nil
}

// RepairDeleteFn deletes new records, conditionally (cutover's repair
// deletes), in commits of up to 500 made at the end of each bundle.
type RepairDeleteFn struct {
	Store  string           `json:"store"`
	Target config.Endpoint  `json:"target"`
	Table  *spannerdb.Table `json:"table,omitempty"`
	// Children are the new interleaved tables (a record of one is
	// deleted from it).
	Children []*spannerdb.Table `json:"children,omitempty"`
	Backfill phases.Backfill    `json:"backfill"`

	sc      *spanner.Client
	dc      *datastore.Client
	release func()
	recs    []record.Record
}

func (f *RepairDeleteFn) Setup(ctx context.Context) error {
	var err error
	f.sc, f.dc, f.release, err = sharedClient(f.Store, f.Target)
	return err
}

func (f *RepairDeleteFn) Teardown() {
	if f.release != nil {
		f.release()
	}
	f.sc, f.dc, f.release = nil, nil, nil
}

// sharedClient is this process's client of e's database, Spanner's or
// Datastore's (store: record.Spanner or record.Datastore), and its
// release (spannerdb.Shared, datastoredb.Shared).
func sharedClient(store string, e config.Endpoint) (*spanner.Client, *datastore.Client, func(), error) {
	if store == record.Spanner {
		db := spannerdb.DatabasePath(e.Project, e.Instance, e.Database)
		c, release, err := spannerdb.Shared(db, "", func(ctx context.Context) (*spanner.Client, error) { return spanner.NewClient(ctx, db) })
		return c, nil, release, err
	}
	c, release, err := datastoredb.Shared(e.Project, e.Database, "", nil)
	return nil, c, release, err
}

func (f *RepairDeleteFn) StartBundle(context.Context, func(string)) { f.recs = f.recs[:0] }

func (f *RepairDeleteFn) ProcessElement(ctx context.Context, b record.Batch, _ func(string)) error {
	f.recs = append(f.recs, b.Recs...)
	return nil
}

func (f *RepairDeleteFn) FinishBundle(ctx context.Context, _ func(string)) error {
	for len(f.recs) > 0 {
		n := min(len(f.recs), 500)
		part := f.recs[:n]
		var skipped int
		var err error
		if f.sc != nil {
			skipped, err = f.spannerDeletes(ctx, part)
		} else {
			keys := make([]*datastore.Key, n)
			for i := range part {
				keys[i] = datastoredb.KeyToDatastore(*part[i].Key)
			}
			skipped, err = operator.DatastoreRepairDeletes(f.dc, f.Backfill)(ctx, keys)
		}
		if err != nil {
			return fmt.Errorf("repair: deleting %d records extra in new: %w", n, err)
		}
		repairDeleted.Inc(ctx, int64(n-skipped))
		if skipped > 0 {
			transforms.CountBackfillSkipped(ctx, int64(skipped))
		}
		f.recs = f.recs[n:]
	}
	return nil
}

// spannerDeletes deletes recs, each from its table, one commit a table.
func (f *RepairDeleteFn) spannerDeletes(ctx context.Context, recs []record.Record) (int, error) {
	by := map[*spannerdb.Table][]record.Record{}
	var order []*spannerdb.Table
	for _, r := range recs {
		t, _ := tableOf(&r, f.Table, f.Children)
		if by[t] == nil {
			order = append(order, t)
		}
		by[t] = append(by[t], r)
	}
	skipped := 0
	for _, t := range order {
		n, err := operator.SpannerRepairDeletes(f.sc, t, f.Backfill)(ctx, by[t])
		if err != nil {
			return skipped, err
		}
		skipped += n
	}
	return skipped, nil
}

// CountWrites counts the repair's writes as they go to the sink.
func CountWrites(s beam.Scope, writes beam.PCollection) beam.PCollection {
	return beam.ParDo(s, &CountWritesFn{}, writes)
}

type CountWritesFn struct{}

func (CountWritesFn) ProcessElement(ctx context.Context, b record.Batch) record.Batch {
	repairWritten.Inc(ctx, int64(b.Len()))
	return b
}
