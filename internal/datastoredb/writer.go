package datastoredb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/retry"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// Write modes.
const (
	// ModeUpsert writes each entity whether or not its key exists,
	// replacing the stored entity: idempotent, so a re-run converges.
	ModeUpsert = "upsert"
	// ModeInsert writes only keys that do not exist yet. A key that
	// exists with the same content (rekey's own earlier write, say from a
	// run that failed half way) counts as written; one that exists with
	// other content is dead-lettered. Inserts are non-transactional
	// Mutate calls with datastore.NewInsert: the server refuses the whole
	// commit with AlreadyExists, the Writer then reads the batch's keys
	// (GetMulti), settles the existing ones and commits the rest.
	ModeInsert = "insert"
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

// GetFunc reads the entities of keys; found[i] reports whether keys[i]
// exists.
type GetFunc func(ctx context.Context, keys []*datastore.Key) (props []datastore.PropertyList, found []bool, err error)

// Writer writes records to Datastore in commits of at most MaxEntities
// entities and MaxBytes estimated bytes, never the same key twice in one
// commit: adding a key already buffered flushes the buffer first, so every
// version is written in arrival order and the last one stays.
//
// A record ToEntity refuses is dead-lettered at once. When the service
// refuses a commit for its content (InvalidArgument, FailedPrecondition,
// AlreadyExists, OutOfRange, a request too large, or client-side
// per-entity errors), the Writer isolates: it commits the halves of the
// batch, recursively, so the good entities land and each entity refused on
// its own becomes a dead letter carrying the error. Transient errors
// (Unavailable, DeadlineExceeded, Aborted, Internal, Unknown,
// ResourceExhausted, an attempt's deadline) are retried with exponential
// backoff and jitter (Retry), Throttle consulted before each attempt;
// after that, and at once for anything else (NotFound, a cancelled
// context, ...), the error is returned, so the caller (a Beam bundle)
// fails and is retried: those are not the entity's fault. A commit refused
// for access (PermissionDenied, Unauthenticated) dead-letters its entities
// with the error: no retry helps, and they can be redriven once access is
// granted. A Writer is not safe for concurrent use.
type Writer struct {
	// Mode is ModeUpsert (the default when empty) or ModeInsert.
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

	// Commit and Get reach the store; NewWriter sets them to a client's
	// Mutate and GetMulti.
	Commit CommitFunc
	Get    GetFunc

	// Retry is the backoff of commits failing with a transient error
	// (zero fields take retry's defaults); Throttle, if set, is consulted
	// before each attempt and told its outcome.
	Retry    retry.Policy
	Throttle retry.Throttle

	// Hooks, each optional: a dead letter (a record.DeadLetter JSON line),
	// a successful commit, entities written, entities found already
	// present with the same content in insert mode, a retry and its
	// wait, a local rejection by Throttle and its wait.
	OnDeadLetter func(ctx context.Context, line string)
	OnCommit     func(ctx context.Context, entities, bytes int)
	OnWritten    func(ctx context.Context, n int)
	OnExisting   func(ctx context.Context, n int)
	OnRetry      func(ctx context.Context, err error, wait time.Duration)
	OnThrottled  func(ctx context.Context, wait time.Duration)

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
	return &Writer{Commit: ClientCommit(c), Get: ClientGet(c)}
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

func (w *Writer) insert() bool { return w.Mode == ModeInsert }

// CheckMode reports whether mode is a known write mode ("" is upsert).
func CheckMode(mode string) error {
	switch mode {
	case "", ModeUpsert, ModeInsert:
		return nil
	}
	return fmt.Errorf("datastore write mode %q: want %q or %q", mode, ModeUpsert, ModeInsert)
}

// Add converts rec and buffers it, committing first when the buffer is
// full or already holds the key. The record must stay unchanged until the
// next Flush. A record that cannot be converted is dead-lettered; the
// error is a commit's that could not be settled.
func (w *Writer) Add(ctx context.Context, rec *record.Record) error {
	r := rec
	if w.Namespace != "" && rec.Key != nil && rec.Key.Namespace != w.Namespace {
		cp := *rec
		k := rec.Key.Clone()
		k.Namespace = w.Namespace
		cp.Key = &k
		r = &cp
	}
	key, props, err := ToEntity(r)
	if err != nil {
		w.deadLetter(ctx, r, err)
		return nil
	}
	if w.keys == nil {
		w.keys = make(map[string]struct{})
	}
	w.scratch = rewrite.AppendDatastoreKey(w.scratch[:0], *r.Key)
	if _, dup := w.keys[string(w.scratch)]; dup {
		if err := w.Flush(ctx); err != nil {
			return err
		}
	}
	size := EntitySize(key, props)
	if len(w.buf) > 0 && (len(w.buf) >= w.maxEntities() || w.bufBytes+size > w.maxBytes()) {
		if err := w.Flush(ctx); err != nil {
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

// Flush commits the buffered entities.
func (w *Writer) Flush(ctx context.Context) error {
	batch := w.buf
	w.buf = nil
	w.bufBytes = 0
	clear(w.keys)
	return w.write(ctx, batch)
}

// Reset drops the buffer without writing it.
func (w *Writer) Reset() {
	w.buf = nil
	w.bufBytes = 0
	clear(w.keys)
}

// errClass says what to do about a failed commit.
type errClass int

const (
	classEntity    errClass = iota // the content: isolate
	classTransient                 // retry, then return
	classFatal                     // return
	classNoAccess                  // dead-letter the whole batch
)

func classify(ctx context.Context, err error) errClass {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return classFatal
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return classTransient // the attempt's deadline, not the caller's
	}
	s, ok := status.FromError(err)
	if !ok {
		// Not from the server: the client refused the request itself.
		return classEntity
	}
	switch s.Code() {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.AlreadyExists, codes.OutOfRange:
		return classEntity
	case codes.ResourceExhausted:
		// The emulator's 4 MiB request limit answers ResourceExhausted
		// "gRPC message exceeds maximum size"; a quota answers the same
		// code with another message.
		if m := s.Message(); strings.Contains(m, "exceeds maximum size") || strings.Contains(m, "larger than max") {
			return classEntity
		}
		return classTransient
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.Internal, codes.Unknown:
		return classTransient
	case codes.PermissionDenied, codes.Unauthenticated:
		return classNoAccess
	}
	return classFatal
}

func (w *Writer) write(ctx context.Context, batch []pending) error {
	if len(batch) == 0 {
		return nil
	}
	err := w.commit(ctx, batch)
	if err == nil {
		return nil
	}
	var me datastore.MultiError
	if errors.As(err, &me) && len(me) == len(batch) {
		// Client-side refusals, one per entity: dead-letter those, commit
		// the rest.
		rest := make([]pending, 0, len(batch))
		for i := range batch {
			if me[i] != nil {
				w.deadLetter(ctx, batch[i].rec, me[i])
			} else {
				rest = append(rest, batch[i])
			}
		}
		if len(rest) == len(batch) {
			return fmt.Errorf("datastore commit of %d entities: %w", len(batch), err)
		}
		return w.write(ctx, rest)
	}
	switch classify(ctx, err) {
	case classEntity:
	case classNoAccess:
		// Not the entities' fault, and no retry helps: they wait in the
		// dead-letter output until access is granted (rekey redrive).
		for i := range batch {
			w.deadLetter(ctx, batch[i].rec, err)
		}
		return nil
	default:
		return fmt.Errorf("datastore commit of %d entities: %w", len(batch), err)
	}
	if w.insert() && status.Code(err) == codes.AlreadyExists && w.Get != nil {
		rest, err := w.settleExisting(ctx, batch)
		if err != nil {
			return err
		}
		if len(rest) < len(batch) {
			return w.write(ctx, rest)
		}
		// Nothing of the batch exists (a concurrent writer?): isolate.
	}
	if len(batch) == 1 {
		w.deadLetter(ctx, batch[0].rec, err)
		return nil
	}
	mid := len(batch) / 2
	if err := w.write(ctx, batch[:mid]); err != nil {
		return err
	}
	return w.write(ctx, batch[mid:])
}

// commit commits batch, retrying transient errors (w.Retry, w.Throttle).
func (w *Writer) commit(ctx context.Context, batch []pending) error {
	ents := make([]datastore.Entity, len(batch))
	bytes := 0
	for i := range batch {
		ents[i] = datastore.Entity{Key: batch[i].key, Properties: batch[i].props}
		bytes += batch[i].size
	}
	h := retry.Hooks{Throttle: w.Throttle, Transient: func(err error) bool { return classify(ctx, err) == classTransient }}
	if w.OnRetry != nil {
		h.OnRetry = func(err error, wait time.Duration) { w.OnRetry(ctx, err, wait) }
	}
	if w.OnThrottled != nil {
		h.OnThrottled = func(wait time.Duration) { w.OnThrottled(ctx, wait) }
	}
	_, err := w.Retry.Do(ctx, func(actx context.Context) error { return w.Commit(actx, w.insert(), ents) }, h)
	if err != nil {
		return err
	}
	if w.OnCommit != nil {
		w.OnCommit(ctx, len(batch), bytes)
	}
	if w.OnWritten != nil {
		w.OnWritten(ctx, len(batch))
	}
	return nil
}

// settleExisting reads the batch's keys after an insert met existing
// ones: an entity stored with the same content counts as written, one with
// other content is dead-lettered; the rest is returned to commit again.
func (w *Writer) settleExisting(ctx context.Context, batch []pending) ([]pending, error) {
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
		w.deadLetter(ctx, batch[i].rec, fmt.Errorf("insert: entity %s already exists with other content", batch[i].rec.Key))
	}
	if same > 0 {
		if w.OnExisting != nil {
			w.OnExisting(ctx, same)
		}
		if w.OnWritten != nil {
			w.OnWritten(ctx, same)
		}
	}
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

func (w *Writer) deadLetter(ctx context.Context, rec *record.Record, err error) {
	if w.OnDeadLetter != nil {
		w.OnDeadLetter(ctx, record.NewDeadLetter(record.StageWrite, w.Source, rec, err))
	}
}
