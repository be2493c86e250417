package staged

import (
	"context"
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
	"github.com/rekeyio/rekey/rekeyer"
	"github.com/rekeyio/rekey/transforms"
)

var (
	repairWritten = beam.NewCounter("rekey", operator.RepairWritten)
	repairDeleted = beam.NewCounter("rekey", operator.RepairDeleted)
)

func init() {
	register.DoFn5x1[context.Context, string, func(*[]byte) bool, func(*[]byte) bool, func(record.Batch), error](&RepairPickFn{})
	register.DoFn3x1[record.Batch, func(record.Batch), func(record.Batch), error](&RepairPutFn{})
	register.DoFn3x1[context.Context, record.Batch, func(string), error](&RepairDeleteFn{})
	register.DoFn2x1[context.Context, record.Batch, record.Batch](&CountWritesFn{})
}

// RepairPickFn emits, for one new key, the record to write (missing or
// different in new) to its first output and the record to delete (extra
// in new) to its second, each as a one-record batch. In the cohorts of
// ReadNew only the records of Pending (old keys, as the repair log names
// them) are repaired.
type RepairPickFn struct {
	Side    Side            `json:"side"`
	ReadNew string          `json:"read_new,omitempty"`
	Pending map[string]bool `json:"pending,omitempty"`
	Spec    rekeyer.Text    `json:"spec"`
	Source  config.Endpoint `json:"source"`

	readNew map[int]bool
	rk      *rekeyer.Rekeyer
}

func (f *RepairPickFn) Setup() error {
	f.readNew = map[int]bool{}
	if f.ReadNew != "" {
		rs, err := cohort.Parse(f.ReadNew, f.Side.Sel.Buckets)
		if err != nil {
			return err
		}
		for _, r := range rs {
			for c := r.First; c <= r.Last; c++ {
				f.readNew[c] = true
			}
		}
	}
	var err error
	f.rk, err = f.Spec.Build()
	return err
}

func (f *RepairPickFn) ProcessElement(ctx context.Context, key string, olds, news func(*[]byte) bool, write func(record.Batch)) error {
	jd, err := joinedItems(f.Side, key, olds, news)
	if err != nil {
		return err
	}
	want, got := jd.want, jd.got
	if f.readNew[jd.cohort] {
		oldKey := jd.oldKey
		if want == nil && got != nil { // its old key by the inverse rewrite
			inv := *got
			inv.Fields = append([]record.Field(nil), got.Fields...)
			if f.rk.Invert(&inv) != nil {
				return nil
			}
			if inv.Key != nil {
				inv.Key.Namespace, inv.Key.Database = f.Source.Namespace, f.Source.Database
			}
			if oldKey, err = f.Side.oldKey(&inv); err != nil {
				return nil
			}
		}
		if !f.Pending[oldKey] {
			return nil
		}
	}
	switch {
	case want == nil:
		if got != nil {
			write(record.Batch{Recs: []record.Record{*got, {}}}) // a delete: the record, then an empty marker
		}
	case got == nil:
		write(record.Batch{Recs: []record.Record{*want}})
	default:
		d, err := f.Side.differ(got, want)
		if err != nil {
			return err
		}
		if d != "" {
			write(record.Batch{Recs: []record.Record{*want}})
		}
	}
	return nil
}

// RepairPutFn splits RepairPickFn's output into writes and deletes.
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
