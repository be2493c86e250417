package datastoredb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/internal/write/retry"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// Defaults of a Writer.
const (
	// DefaultMaxBytes caps the estimated size of one commit: under the
	// service's 10 MiB request limit with room for the request's framing
	// (Beam Java's Datastore writer uses 9 MB too). The emulator receives
	// at most 4 MiB; a commit it finds too large is split in halves.
	DefaultMaxBytes = 9_000_000
)

// CommitFunc commits entities in one non-transactional request: inserts
// when insert is set, upserts otherwise.
type CommitFunc func(ctx context.Context, insert bool, entities []datastore.Entity) error

// DeleteFunc deletes the entities of keys in one non-transactional
// request; a key that is not stored is no error.
type DeleteFunc func(ctx context.Context, keys []*datastore.Key) error

// GetFunc reads the entities of keys; found[i] reports whether keys[i]
// exists.
type GetFunc func(ctx context.Context, keys []*datastore.Key) (props []datastore.PropertyList, found []bool, err error)

// Writer writes records to Datastore in commits of at most MaxEntities
// entities and MaxBytes estimated bytes, never the same key twice in one
// commit: adding a key already buffered flushes the buffer first, so every
// version is written in arrival order and the last one stays.
//
// What it does is recorded in the storewrite.Outcome its caller passes:
// written counts, dead letters, waits, splits, commits. A record ToEntity
// refuses is dead-lettered at once. A failed commit is handled by
// storewrite (its one error table and its halving): refused for its
// content (InvalidArgument, FailedPrecondition, AlreadyExists, OutOfRange,
// a request too large), the batch is committed in halves, recursively, so
// the good entities land and each entity refused on its own becomes a dead
// letter carrying the error; client-side per-entity refusals
// (datastore.MultiError) dead-letter those entities and commit the rest.
// Transient errors (Unavailable, DeadlineExceeded, Aborted, Internal,
// Unknown, ResourceExhausted, an attempt's deadline) are retried with
// exponential backoff and jitter (Retry), Throttle consulted before each
// attempt; after that, and at once for anything else (a missing database,
// a cancelled context, ...), the error is returned, so the caller (a Beam
// bundle) fails and is retried: those are not the entity's fault. A commit
// refused for access (PermissionDenied, Unauthenticated) dead-letters its
// entities with the error: no retry helps, and they can be redriven once
// access is granted. A Writer is not safe for concurrent use.
type Writer struct {
	// Mode is storewrite.ModeUpsert (the default when empty),
	// storewrite.ModeInsert, or storewrite.ModeDelete: each record's key
	// is deleted (with Delete; the properties are not read), a key that
	// is not stored being no error; the deletes are counted in the
	// Outcome's Deleted.
	Mode string
	// MaxEntities caps a commit's entities: 1..MaxCommitEntities, 0 for
	// MaxCommitEntities.
	MaxEntities int
	// MaxBytes caps a commit's estimated size (EntitySize): 0 for
	// DefaultMaxBytes, at most MaxCommitBytes.
	MaxBytes int
	// Namespace, when set, replaces every record key's namespace; key
	// values among the properties are written as they are (references
	// are the rewrite stage's business).
	Namespace string
	// Source names the target in dead letters.
	Source string

	// Commit, Delete and Get reach the store; NewWriter sets them to a
	// client's Mutate (upserts or inserts; deletes) and GetMulti. Tests
	// replace them (to fake the store or to inject faults around the real
	// one).
	Commit CommitFunc
	Delete DeleteFunc
	Get    GetFunc
	// Conditional, if set, commits instead of Commit, always as upserts:
	// one transaction that may leave some entities unwritten on purpose,
	// returning how many (a cohort backfill leaves an entity the
	// application wrote or deleted since it was read; see
	// operator.DatastoreBackfill). It is not used in delete mode.
	Conditional func(ctx context.Context, entities []datastore.Entity) (skipped int, err error)

	// Retry is the backoff of commits failing with a transient error
	// (zero fields take retry's defaults); Throttle, if set, is consulted
	// before each attempt and told its outcome.
	Retry    retry.Policy
	Throttle retry.Throttle
	// Pacer, if set, paces the commits under a ramp-up: a flush is sent
	// in commits of at most Pacer.Size entities, sized as each goes, each
	// waiting for its budget right before it is sent (inside any slot the
	// caller holds).
	Pacer storewrite.Pacer

	buf      []pending
	bufBytes int
	keys     map[string]struct{}
	scratch  []byte
}

type pending struct {
	rec   *record.Record
	key   *datastore.Key
	props datastore.PropertyList
	size  int
}

// NewWriter returns a Writer committing through c.
func NewWriter(c *datastore.Client) *Writer {
	return &Writer{Commit: ClientCommit(c), Delete: ClientDelete(c), Get: ClientGet(c)}
}

// ClientDelete deletes with c.Mutate and datastore.NewDelete.
func ClientDelete(c *datastore.Client) DeleteFunc {
	return func(ctx context.Context, keys []*datastore.Key) error {
		muts := make([]*datastore.Mutation, len(keys))
		for i, k := range keys {
			muts[i] = datastore.NewDelete(k)
		}
		_, err := c.Mutate(ctx, muts...)
		return err
	}
}

// ClientCommit commits with c.Mutate and datastore.NewInsert or
// datastore.NewUpsert.
func ClientCommit(c *datastore.Client) CommitFunc {
	return func(ctx context.Context, insert bool, entities []datastore.Entity) error {
		muts := make([]*datastore.Mutation, len(entities))
		for i := range entities {
			pl := datastore.PropertyList(entities[i].Properties)
			if insert {
				muts[i] = datastore.NewInsert(entities[i].Key, &pl)
			} else {
				muts[i] = datastore.NewUpsert(entities[i].Key, &pl)
			}
		}
		_, err := c.Mutate(ctx, muts...)
		return err
	}
}

// ClientGet reads with c.GetMulti.
func ClientGet(c *datastore.Client) GetFunc {
	return func(ctx context.Context, keys []*datastore.Key) ([]datastore.PropertyList, []bool, error) {
		props := make([]datastore.PropertyList, len(keys))
		found := make([]bool, len(keys))
		err := c.GetMulti(ctx, keys, props)
		var me datastore.MultiError
		switch {
		case err == nil:
			for i := range found {
				found[i] = true
			}
		case errors.As(err, &me) && len(me) == len(keys):
			for i, e := range me {
				switch {
				case e == nil:
					found[i] = true
				case errors.Is(e, datastore.ErrNoSuchEntity):
				default:
					return nil, nil, fmt.Errorf("get %s: %w", keys[i], e)
				}
			}
		default:
			return nil, nil, err
		}
		return props, found, nil
	}
}

func (w *Writer) maxEntities() int {
	if w.MaxEntities <= 0 || w.MaxEntities > MaxCommitEntities {
		return MaxCommitEntities
	}
	return w.MaxEntities
}

func (w *Writer) maxBytes() int {
	switch {
	case w.MaxBytes <= 0:
		return DefaultMaxBytes
	case w.MaxBytes > MaxCommitBytes:
		return MaxCommitBytes
	}
	return w.MaxBytes
}

func (w *Writer) insert() bool { return w.Mode == storewrite.ModeInsert }

func (w *Writer) deletes() bool { return w.Mode == storewrite.ModeDelete }

// convert is the key and properties to commit for r: in delete mode the
// key alone.
func (w *Writer) convert(r *record.Record) (*datastore.Key, datastore.PropertyList, error) {
	if w.deletes() {
		key, err := entityKey(r)
		return key, nil, err
	}
	return ToEntity(r)
}

// Add converts rec and buffers it, committing first when the buffer is
// full or already holds the key; what it does is recorded in out. The
// record must stay unchanged until the next Flush. A record that cannot be
// converted is dead-lettered; the error is a commit's that could not be
// settled.
func (w *Writer) Add(ctx context.Context, rec *record.Record, out *storewrite.Outcome) error {
	r := rec
	if w.Namespace != "" && rec.Key != nil && rec.Key.Namespace != w.Namespace {
		cp := *rec
		k := rec.Key.Clone()
		k.Namespace = w.Namespace
		cp.Key = &k
		r = &cp
	}
	key, props, err := w.convert(r)
	if err != nil {
		out.DeadLetter(w.Source, r, err)
		return nil
	}
	if w.keys == nil {
		w.keys = make(map[string]struct{})
	}
	w.scratch = rewrite.AppendDatastoreKey(w.scratch[:0], *r.Key)
	if _, dup := w.keys[string(w.scratch)]; dup {
		if err := w.Flush(ctx, out); err != nil {
			return err
		}
	}
	size := EntitySize(key, props)
	if len(w.buf) > 0 && (len(w.buf) >= w.maxEntities() || w.bufBytes+size > w.maxBytes()) {
		if err := w.Flush(ctx, out); err != nil {
			return err
		}
	}
	w.keys[string(w.scratch)] = struct{}{}
	w.buf = append(w.buf, pending{rec: r, key: key, props: props, size: size})
	w.bufBytes += size
	return nil
}

// Buffered returns how many entities wait for the next commit.
func (w *Writer) Buffered() int { return len(w.buf) }

// Flush commits the buffered entities, recording what it does in out.
func (w *Writer) Flush(ctx context.Context, out *storewrite.Outcome) error {
	batch := w.buf
	w.buf = nil
	w.bufBytes = 0
	clear(w.keys)
	return w.write(ctx, batch, out)
}

// Write adds recs and flushes, and returns what it did.
func (w *Writer) Write(ctx context.Context, recs []record.Record) (storewrite.Outcome, error) {
	var out storewrite.Outcome
	for i := range recs {
		if err := w.Add(ctx, &recs[i], &out); err != nil {
			w.Reset()
			return out, err
		}
	}
	err := w.Flush(ctx, &out)
	return out, err
}

// Reset drops the buffer without writing it.
func (w *Writer) Reset() {
	w.buf = nil
	w.bufBytes = 0
	clear(w.keys)
}

// write commits batch, isolating the entities at fault
// (storewrite.Halves).
func (w *Writer) write(ctx context.Context, batch []pending, out *storewrite.Outcome) error {
	h := storewrite.Halves[pending]{
		Commit: func(ctx context.Context, b []pending) error { return w.commit(ctx, b, out) },
		Settle: func(ctx context.Context, b []pending, err error) ([]pending, bool, error) {
			return w.settle(ctx, b, err, out)
		},
		Refuse: func(p pending, err error) { out.DeadLetter(w.Source, p.rec, err) },
		Split:  func() { out.Splits++ },
		Fail: func(n int, err error) error {
			return fmt.Errorf("datastore commit of %d entities: %w", n, err)
		},
	}
	return storewrite.Chunks(batch, w.Pacer, func(b []pending) error { return h.Write(ctx, b) })
}

// settle resolves what it can of a failed commit of batch: client-side
// refusals, one per entity (dead-lettered; the rest is committed again),
// and an insert that met existing keys (settleExisting).
func (w *Writer) settle(ctx context.Context, batch []pending, err error, out *storewrite.Outcome) ([]pending, bool, error) {
	var me datastore.MultiError
	if errors.As(err, &me) && len(me) == len(batch) {
		rest := make([]pending, 0, len(batch))
		for i := range batch {
			if me[i] != nil {
				out.DeadLetter(w.Source, batch[i].rec, me[i])
			} else {
				rest = append(rest, batch[i])
			}
		}
		if len(rest) == len(batch) {
			return nil, false, fmt.Errorf("datastore commit of %d entities: %w", len(batch), err)
		}
		return rest, true, nil
	}
	if w.insert() && storewrite.Code(err) == codes.AlreadyExists && w.Get != nil {
		rest, err := w.settleExisting(ctx, batch, out)
		if err != nil {
			return nil, false, err
		}
		// Nothing of the batch exists (a concurrent writer?): isolate.
		return rest, len(rest) < len(batch), nil
	}
	return nil, false, nil
}

// commit commits batch, retrying transient errors (w.Retry, w.Throttle).
func (w *Writer) commit(ctx context.Context, batch []pending, out *storewrite.Outcome) error {
	ents := make([]datastore.Entity, len(batch))
	bytes := 0
	for i := range batch {
		ents[i] = datastore.Entity{Key: batch[i].key, Properties: batch[i].props}
		bytes += batch[i].size
	}
	if err := storewrite.Pace(ctx, w.Pacer, len(batch), out); err != nil {
		return fmt.Errorf("datastore commit of %d entities: %w", len(batch), err)
	}
	start := time.Now()
	skipped := 0
	var keys []*datastore.Key
	if w.deletes() {
		keys = make([]*datastore.Key, len(ents))
		for i := range ents {
			keys[i] = ents[i].Key
		}
	}
	err := storewrite.Retry(ctx, w.Retry, w.Throttle, out, func(actx context.Context) (err error) {
		switch {
		case w.deletes():
			return w.Delete(actx, keys)
		case w.Conditional != nil:
			skipped, err = w.Conditional(actx, ents)
			return err
		}
		return w.Commit(actx, w.insert(), ents)
	})
	out.Commits = append(out.Commits, storewrite.Commit{Records: len(batch), Mutations: len(batch), Bytes: bytes, Took: time.Since(start), OK: err == nil})
	switch {
	case err != nil:
		return err
	case w.deletes():
		out.Deleted += len(batch)
	default:
		out.Written += len(batch) - skipped
		out.Skipped += skipped
	}
	return nil
}

// settleExisting reads the batch's keys after an insert met existing
// ones: an entity stored with the same content counts as written, one with
// other content is dead-lettered; the rest is returned to commit again.
func (w *Writer) settleExisting(ctx context.Context, batch []pending, out *storewrite.Outcome) ([]pending, error) {
	keys := make([]*datastore.Key, len(batch))
	for i := range batch {
		keys[i] = batch[i].key
	}
	stored, found, err := w.Get(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("datastore insert: reading existing keys: %w", err)
	}
	rest := make([]pending, 0, len(batch))
	same := 0
	for i := range batch {
		if !found[i] {
			rest = append(rest, batch[i])
			continue
		}
		if sameContent(batch[i], stored[i]) {
			same++
			continue
		}
		out.DeadLetter(w.Source, batch[i].rec, fmt.Errorf("insert: entity %s already exists with other content", batch[i].rec.Key))
	}
	out.Existing += same
	out.Written += same
	return rest, nil
}

func sameContent(p pending, stored datastore.PropertyList) bool {
	want, err := FromEntity(p.key, p.props)
	if err != nil {
		return false
	}
	got, err := FromEntity(p.key, stored)
	if err != nil {
		return false
	}
	return want.Equal(&got)
}
