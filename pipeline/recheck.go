package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/config"
	"github.com/rekeyio/rekey/internal/datastoredb"
	"github.com/rekeyio/rekey/internal/spannerdb"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
)

// A verify runs while the application writes: it reads old and new at
// different times, so a record written between the two reads looks
// different, missing or extra when it is not. Every finding is therefore
// read again, old then new by key, up to recheckAttempts times a little
// apart; a finding that old and new agree on at one of these reads is
// counted as settled (a write in flight), not as a finding. A real
// difference persists through every read. Only database sources can be
// read again by key.

// recheckAttempts and recheckWait: a finding is read again 3 times, 150,
// 300 and 450 ms after the join.
const (
	recheckAttempts = 3
	recheckWait     = 150 * time.Millisecond
)

// recheckSpec says where a finding is read again.
type recheckSpec struct {
	Source      config.Endpoint  `json:"source"`
	Target      config.Endpoint  `json:"target"`
	SourceTable *spannerdb.Table `json:"source_table,omitempty"`
	Spec        string           `json:"spec"`
}

// newRecheck returns the recheck of a verify job, nil when its source is
// not a database.
func newRecheck(cfg *config.Config, source *spannerdb.Table, spec rekeyer.Spec) *recheckSpec {
	if t := cfg.Source.Type; t != config.TypeSpanner && t != config.TypeDatastore {
		return nil
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil
	}
	return &recheckSpec{Source: cfg.Source, Target: cfg.Target, SourceTable: source, Spec: string(b)}
}

// rechecker reads findings again.
type rechecker struct {
	spec       *recheckSpec
	side       verifySide
	rk         *rekeyer.Rekeyer
	oldS, newS *spanner.Client
	oldD, newD *datastore.Client
}

func openRechecker(ctx context.Context, spec *recheckSpec, side verifySide) (*rechecker, error) {
	var rs rekeyer.Spec
	if err := json.Unmarshal([]byte(spec.Spec), &rs); err != nil {
		return nil, err
	}
	rk, err := rs.Build()
	if err != nil {
		return nil, err
	}
	r := &rechecker{spec: spec, side: side, rk: rk}
	open := func(e config.Endpoint, s **spanner.Client, d **datastore.Client) error {
		var err error
		if e.Type == config.TypeSpanner {
			*s, err = spanner.NewClient(ctx, spannerdb.DatabasePath(e.Project, e.Instance, e.Database))
		} else {
			*d, err = datastoredb.Client(ctx, e.Project, e.Database)
		}
		return err
	}
	if err := open(spec.Source, &r.oldS, &r.oldD); err != nil {
		return nil, err
	}
	if err := open(spec.Target, &r.newS, &r.newD); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *rechecker) close() {
	for _, c := range []*spanner.Client{r.oldS, r.newS} {
		if c != nil {
			c.Close()
		}
	}
	for _, c := range []*datastore.Client{r.oldD, r.newD} {
		if c != nil {
			c.Close()
		}
	}
}

// settles reports whether old and new agree on a finding's record at one
// of the rereads.
func (r *rechecker) settles(ctx context.Context, jd joined) (bool, error) {
	oldRef := jd.old
	if oldRef == nil && jd.got != nil { // extra in new: its old key by the inverse rewrite
		inv := *jd.got
		inv.Fields = append([]record.Field(nil), jd.got.Fields...)
		if r.rk.Invert(&inv) == nil {
			if inv.Key != nil {
				inv.Key.Namespace, inv.Key.Database = r.spec.Source.Namespace, r.spec.Source.Database
			}
			oldRef = &inv
		}
	}
	newRef := jd.got
	if newRef == nil {
		newRef = jd.want
	}
	for attempt := 1; attempt <= recheckAttempts; attempt++ {
		select {
		case <-time.After(time.Duration(attempt) * recheckWait):
		case <-ctx.Done():
			return false, ctx.Err()
		}
		var oldNow *record.Record
		if oldRef != nil {
			var err error
			if oldNow, err = r.read(ctx, r.oldS, r.oldD, r.spec.SourceTable, oldRef); err != nil {
				return false, err
			}
		}
		newNow, err := r.read(ctx, r.newS, r.newD, r.side.Table, newRef)
		if err != nil {
			return false, err
		}
		switch {
		case oldNow == nil && newNow == nil:
			return true, nil
		case oldNow != nil && newNow != nil:
			want := *oldNow
			want.Fields = append([]record.Field(nil), oldNow.Fields...)
			if err := r.rk.Rewrite(&want); err != nil {
				return false, nil
			}
			if d, err := r.side.differ(newNow, &want); err == nil && d == "" {
				return true, nil
			}
		}
	}
	return false, nil
}

// read reads the record with ref's key, nil if there is none.
func (r *rechecker) read(ctx context.Context, sc *spanner.Client, dc *datastore.Client, t *spannerdb.Table, ref *record.Record) (*record.Record, error) {
	if sc != nil {
		k, err := spannerdb.SpannerKey(ref, t)
		if err != nil {
			return nil, err
		}
		cols := make([]string, len(t.Columns))
		for i, c := range t.Columns {
			cols[i] = c.Name
		}
		row, err := sc.Single().ReadRow(ctx, t.Name, k, cols)
		if errors.Is(err, spanner.ErrRowNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		rec, err := spannerdb.RowToRecord(row, t)
		return &rec, err
	}
	if ref.Key == nil {
		return nil, errors.New("verify: recheck of a record without a key")
	}
	k := datastoredb.KeyToDatastore(*ref.Key)
	var pl datastore.PropertyList
	if err := dc.Get(ctx, k, &pl); errors.Is(err, datastore.ErrNoSuchEntity) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	rec, err := datastoredb.FromEntity(k, pl)
	return &rec, err
}
