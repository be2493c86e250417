package datastoredb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/write/retry"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/internal/write/storewrite/writertest"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// TestWriterConformance runs the writer conformance suite against the
// Firestore emulator in Datastore mode, each case in a namespace of its
// own; a poisoned entity carries a value over the 1 MiB entity limit.
func TestWriterConformance(t *testing.T) {
	writertest.Run(t, writertest.Harness{New: func(t *testing.T) writertest.Store {
		return &datastoreStore{c: testClient(t, ""), ns: emulator.UniqueNamespace(t.Name())}
	}})
}

type datastoreStore struct {
	c  *datastore.Client
	ns string
}

func (s *datastoreStore) Records(from, n, variant int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		id := int64(from + i)
		recs[i] = record.Record{
			Table: "K",
			Key:   &rewrite.DatastoreKey{Namespace: s.ns, Path: []rewrite.PathElement{{Kind: "K", ID: id}}},
			Fields: []record.Field{
				{Name: "n", Value: record.Int(id)},
				{Name: "s", Value: record.String(fmt.Sprintf("v%d-%d", id, variant))},
			},
		}
	}
	return recs
}

func (s *datastoreStore) Poison(rec record.Record) (record.Record, string) {
	rec.Fields = append(append([]record.Field(nil), rec.Fields...), record.Field{Name: "t", Value: record.Bytes(make([]byte, MaxEntityBytes+1000)), NoIndex: true})
	return rec, "InvalidArgument"
}

func (s *datastoreStore) Write(ctx context.Context, o writertest.Options, recs []record.Record) (storewrite.Outcome, error) {
	w := NewWriter(s.c)
	w.Source = "datastore:test"
	w.Mode = storewrite.ModeUpsert
	if o.Insert {
		w.Mode = storewrite.ModeInsert
	}
	if o.Delete {
		w.Mode = storewrite.ModeDelete
	}
	w.MaxEntities = o.Batch
	w.Retry = retry.Policy{Initial: time.Millisecond, Max: 2 * time.Millisecond, MaxCumulative: 30 * time.Millisecond}
	commit, calls := w.Commit, &writertest.Counter{}
	w.Commit = func(ctx context.Context, insert bool, ents []datastore.Entity) error {
		return calls.Call(o.Fault, func() error { return commit(ctx, insert, ents) })
	}
	del := w.Delete
	w.Delete = func(ctx context.Context, keys []*datastore.Key) error {
		return calls.Call(o.Fault, func() error { return del(ctx, keys) })
	}
	return w.Write(ctx, recs)
}

func (s *datastoreStore) Contents(ctx context.Context) ([]record.Record, error) {
	var props []datastore.PropertyList
	keys, err := s.c.GetAll(ctx, datastore.NewQuery("K").Namespace(s.ns), &props)
	if err != nil {
		return nil, err
	}
	out := make([]record.Record, len(keys))
	for i := range keys {
		if out[i], err = FromEntity(keys[i], props[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}
