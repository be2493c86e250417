package lint

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/plan/detect"
	"github.com/rekeyio/rekey/record"
)

// ReadDDL reads a database's DDL with the database admin client's
// GetDatabaseDdl (the Spanner emulator's too, when SPANNER_EMULATOR_HOST
// is set) and parses it; db is projects/P/instances/I/databases/D.
func ReadDDL(ctx context.Context, db string) (*spannerdb.Schema, error) {
	return spannerdb.ReadSchema(ctx, db)
}

// maxLookup is the most keys one Datastore lookup takes.
const maxLookup = 1000

// ReadDatastore reads a sample of at most n entities of kind in namespace
// (n ≤ 0: all). It counts the kind first; when the kind holds more than n
// entities it samples them in the service's pseudo-random __scatter__
// order, and where that index answers nothing (the emulator) it takes the
// first n in key order, which Sample.How says.
func ReadDatastore(ctx context.Context, c *datastore.Client, namespace, kind string, n int) (Sample, error) {
	s := Sample{Kind: kind, Namespace: namespace}
	where := kindName(namespace, kind)
	total, counted := countKind(ctx, c, namespace, kind)
	q := datastore.NewQuery(kind).Namespace(namespace)
	if n > 0 && (!counted || total > int64(n)) {
		keys, err := c.GetAll(ctx, q.KeysOnly().Order("__scatter__").Limit(n), nil)
		if err != nil {
			return s, fmt.Errorf("sampling %s: %w", where, err)
		}
		if len(keys) > 0 {
			recs, err := lookup(ctx, c, keys)
			if err != nil {
				return s, fmt.Errorf("reading %s: %w", where, err)
			}
			s.Entities, s.How = recs, fmt.Sprintf("a random sample (__scatter__ order) of %s entities", detect.Thousands(int64(len(recs))))
			if counted {
				s.Fraction = float64(len(recs)) / float64(total)
				s.How += " of " + detect.Thousands(total)
			}
			return s, nil
		}
		q = q.Limit(n)
	}
	recs, err := query(ctx, c, q)
	if err != nil {
		return s, fmt.Errorf("reading %s: %w", where, err)
	}
	s.Entities = recs
	switch {
	case n <= 0 || len(recs) < n || counted && total <= int64(n):
		s.Fraction, s.How = 1, fmt.Sprintf("all %s entities", detect.Thousands(int64(len(recs))))
	default:
		s.How = fmt.Sprintf("the first %s entities in key order (no __scatter__ index here: not a random sample)", detect.Thousands(int64(len(recs))))
		if counted {
			s.How += fmt.Sprintf(" of %s", detect.Thousands(total))
		}
	}
	return s, nil
}

func kindName(namespace, kind string) string {
	if namespace == "" {
		return "kind " + kind
	}
	return fmt.Sprintf("kind %s in namespace %s", kind, namespace)
}

// countKind counts the kind's entities with an aggregation query; ok is
// false if the store cannot.
func countKind(ctx context.Context, c *datastore.Client, namespace, kind string) (n int64, ok bool) {
	res, err := c.RunAggregationQuery(ctx, datastore.NewQuery(kind).Namespace(namespace).KeysOnly().NewAggregationQuery().WithCount("n"))
	if err != nil {
		return 0, false
	}
	v, ok := res["n"].(interface{ GetIntegerValue() int64 })
	if !ok {
		return 0, false
	}
	return v.GetIntegerValue(), true
}

func query(ctx context.Context, c *datastore.Client, q *datastore.Query) ([]record.Record, error) {
	var props []datastore.PropertyList
	keys, err := c.GetAll(ctx, q, &props)
	if err != nil {
		return nil, err
	}
	return toRecords(keys, props)
}

func lookup(ctx context.Context, c *datastore.Client, keys []*datastore.Key) ([]record.Record, error) {
	var out []record.Record
	for start := 0; start < len(keys); start += maxLookup {
		batch := keys[start:min(start+maxLookup, len(keys))]
		props := make([]datastore.PropertyList, len(batch))
		batch, props, err := found(batch, props, c.GetMulti(ctx, batch, props))
		if err != nil {
			return nil, err
		}
		recs, err := toRecords(batch, props)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	return out, nil
}

// found drops the entities a lookup did not find (deleted since they
// were sampled) and returns any other error.
func found(keys []*datastore.Key, props []datastore.PropertyList, err error) ([]*datastore.Key, []datastore.PropertyList, error) {
	var me datastore.MultiError
	if err == nil || !errors.As(err, &me) {
		return keys, props, err
	}
	var k []*datastore.Key
	var p []datastore.PropertyList
	for i, e := range me {
		switch {
		case e == nil:
			k, p = append(k, keys[i]), append(p, props[i])
		case !errors.Is(e, datastore.ErrNoSuchEntity):
			return nil, nil, e
		}
	}
	return k, p, nil
}

func toRecords(keys []*datastore.Key, props []datastore.PropertyList) ([]record.Record, error) {
	out := make([]record.Record, len(keys))
	for i, k := range keys {
		r, err := datastoredb.FromEntity(k, props[i])
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}
