// Package writertest is the conformance suite of rekey's store writers
// (spannerdb.Writer, datastoredb.Writer), in the manner of golang-migrate's
// database/testing: a store package wires its writer to a Harness and
// calls Run from a test against its emulator. Every case writes through
// the writer and then reads the store's contents back, so each can fail on
// what the store really holds:
//
//   - exactly once under faults: a commit that fails transiently before it
//     is applied, one that is applied but answers with an error (a lost
//     response), and one that keeps failing so the write gives up and is
//     run again, each in upsert and insert mode, end with exactly one copy
//     of every record;
//   - poison isolation: a write with a few records the store refuses at
//     commit time lands the others, and dead-letters each refused one,
//     alone, with the store's reason;
//   - idempotent replays: writing the same records twice in upsert mode
//     leaves the same contents;
//   - insert versus upsert: an insert of records stored with the same
//     content counts them written, of records stored with other content
//     dead-letters them and leaves the store as it was; an upsert
//     overwrites;
//   - deletes: a delete of records (given with other content: only the
//     key counts) removes exactly their keys, under lost responses, counts
//     keys that were not stored as deleted too, and done again changes
//     nothing.
package writertest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/record"
)

// Fault wraps the call-th call (from 1) of a writer's commit function:
// commit reaches the store. A Fault decides whether the call reaches the
// store and what it answers.
type Fault func(call int, commit func() error) error

// Options of one Write.
type Options struct {
	// Insert selects insert mode, Delete delete mode; upsert otherwise.
	Insert, Delete bool
	// Batch caps the records of a commit.
	Batch int
	// Fault, if not nil, wraps every commit call (Counter numbers them).
	Fault Fault
}

// Store is a writer under test on a fresh, empty target.
type Store interface {
	// Records returns n records with the distinct keys from, from+1, ...
	// in the form the store reads them back in (Contents); variant
	// changes their content, not their keys.
	Records(from, n, variant int) []record.Record
	// Poison returns rec changed so the store refuses it when it is
	// committed (not before: the writer must not refuse it itself), and a
	// text the dead letter's reason contains.
	Poison(rec record.Record) (bad record.Record, reason string)
	// Write writes (or with o.Delete deletes) recs with a new writer in
	// the store's own mode of production use, except for o, with a short
	// retry policy (a few tens of milliseconds of backoff in all) and no
	// adaptive throttle; o.Fault wraps its deletes too.
	Write(ctx context.Context, o Options, recs []record.Record) (storewrite.Outcome, error)
	// Contents reads back every record the target holds.
	Contents(ctx context.Context) ([]record.Record, error)
}

// Harness makes a Store for each case.
type Harness struct {
	// New returns a Store on a fresh, empty target (a database, a
	// namespace) for t.
	New func(t *testing.T) Store
}

// Counter numbers the calls of a Fault: Wrap returns the commit function
// a store's Write hands to its writer's injectable commit.
type Counter struct{ calls atomic.Int64 }

// Call runs commit through f as the next call (f nil: as it is).
func (c *Counter) Call(f Fault, commit func() error) error {
	n := int(c.calls.Add(1))
	if f == nil {
		return commit()
	}
	return f(n, commit)
}

// errInjected is the transient error faults answer.
var errInjected = status.Error(codes.Unavailable, "writertest: injected fault")

// BeforeApply fails the first attempt of every commit without reaching
// the store (each commit's calls alternate: odd ones fail).
func BeforeApply(call int, commit func() error) error {
	if call%2 == 1 {
		return errInjected
	}
	return commit()
}

// AfterApply applies the first attempt of every commit and then fails it,
// as a lost response does.
func AfterApply(call int, commit func() error) error {
	if err := commit(); err != nil || call%2 == 0 {
		return err
	}
	return errInjected
}

// ApplyThenDown applies the first call and fails it, as a lost response
// does, and fails every later call before it reaches the store, as a store
// that went away does: the write gives up once its retries are spent.
func ApplyThenDown(call int, commit func() error) error {
	if call == 1 {
		if err := commit(); err != nil {
			return err
		}
	}
	return errInjected
}

const (
	n     = 40
	batch = 10
)

// Run runs every case, each on a Store of its own.
func Run(t *testing.T, h Harness) {
	for _, mode := range []struct {
		name   string
		insert bool
	}{{"upsert", false}, {"insert", true}} {
		for _, f := range []struct {
			name  string
			fault Fault
		}{{"before apply", BeforeApply}, {"after apply", AfterApply}} {
			t.Run(fmt.Sprintf("exactly once/%s/%s", f.name, mode.name), func(t *testing.T) {
				exactlyOnce(t, h.New(t), mode.insert, f.fault)
			})
		}
		t.Run("exactly once/give up and rerun/"+mode.name, func(t *testing.T) {
			giveUpAndRerun(t, h.New(t), mode.insert)
		})
	}
	t.Run("poison isolation", func(t *testing.T) { poison(t, h.New(t)) })
	t.Run("idempotent replays", func(t *testing.T) { replays(t, h.New(t)) })
	t.Run("insert versus upsert", func(t *testing.T) { insertVersusUpsert(t, h.New(t)) })
	t.Run("deletes", func(t *testing.T) { deletes(t, h.New(t)) })
}

func exactlyOnce(t *testing.T, s Store, insert bool, fault Fault) {
	ctx := t.Context()
	recs := s.Records(1, n, 0)
	out, err := s.Write(ctx, Options{Insert: insert, Batch: batch, Fault: fault}, recs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if out.Written != n || len(out.DeadLetters) != 0 || len(out.Retries) < n/batch {
		t.Errorf("written %d, %d dead letters %v, %d retries; want %d written, none dead, a retry per commit", out.Written, len(out.DeadLetters), out.DeadLetters, len(out.Retries), n)
	}
	wantContents(t, s, recs)
}

func giveUpAndRerun(t *testing.T, s Store, insert bool) {
	ctx := t.Context()
	recs := s.Records(1, n, 0)
	if _, err := s.Write(ctx, Options{Insert: insert, Batch: batch, Fault: ApplyThenDown}, recs); err == nil {
		t.Fatal("Write under a fault that never clears = nil, want the error")
	}
	out, err := s.Write(ctx, Options{Insert: insert, Batch: batch}, recs)
	if err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if out.Written != n || len(out.DeadLetters) != 0 {
		t.Errorf("rerun: written %d, dead letters %v; want %d and none", out.Written, out.DeadLetters, n)
	}
	if insert && out.Existing == 0 {
		t.Error("rerun in insert mode found none of the records the failed run applied")
	}
	wantContents(t, s, recs)
}

func poison(t *testing.T, s Store) {
	ctx := t.Context()
	recs := s.Records(1, n, 0)
	bad := map[int]bool{2: true, 16: true, 17: true, 39: true}
	var good, refused []record.Record
	var reason string
	for i := range recs {
		if bad[i] {
			recs[i], reason = s.Poison(recs[i])
			refused = append(refused, recs[i])
		} else {
			good = append(good, recs[i])
		}
	}
	out, err := s.Write(ctx, Options{Batch: batch}, recs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if out.Written != len(good) || out.Splits == 0 {
		t.Errorf("written %d, %d splits; want %d and some", out.Written, out.Splits, len(good))
	}
	var dead []record.Record
	for _, line := range out.DeadLetters {
		d, rec, err := record.ParseDeadLetter([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if d.Stage != record.StageWrite || rec == nil || !strings.Contains(d.Reason, reason) {
			t.Errorf("dead letter %+v: want stage write, the record and a reason with %q", d, reason)
			continue
		}
		dead = append(dead, *rec)
	}
	if !sameRecords(dead, refused) {
		t.Errorf("dead letters hold %d records, want exactly the %d refused ones", len(dead), len(refused))
	}
	wantContents(t, s, good)
}

func replays(t *testing.T, s Store) {
	ctx := t.Context()
	recs := s.Records(1, n, 0)
	for i := range 2 {
		out, err := s.Write(ctx, Options{Batch: batch}, recs)
		if err != nil {
			t.Fatalf("write %d: %v", i+1, err)
		}
		if out.Written != n || len(out.DeadLetters) != 0 {
			t.Errorf("write %d: written %d, dead letters %v; want %d and none", i+1, out.Written, out.DeadLetters, n)
		}
		wantContents(t, s, recs)
	}
}

func insertVersusUpsert(t *testing.T, s Store) {
	ctx := t.Context()
	first := s.Records(1, n, 0)
	if _, err := s.Write(ctx, Options{Insert: true, Batch: batch}, first); err != nil {
		t.Fatal(err)
	}
	// The same records again: all already there, counted written.
	out, err := s.Write(ctx, Options{Insert: true, Batch: batch}, first)
	if err != nil {
		t.Fatal(err)
	}
	if out.Written != n || out.Existing != n || len(out.DeadLetters) != 0 {
		t.Errorf("insert of stored records: written %d, existing %d, dead letters %v; want %d, %d, none", out.Written, out.Existing, out.DeadLetters, n, n)
	}
	wantContents(t, s, first)

	// Half of them changed, and as many new ones: the changed ones are
	// refused, the new ones land.
	changed := s.Records(1, n/2, 1)
	fresh := s.Records(n+1, n/2, 0)
	out, err = s.Write(ctx, Options{Insert: true, Batch: batch}, append(slices.Clone(changed), fresh...))
	if err != nil {
		t.Fatal(err)
	}
	var dead []record.Record
	for _, line := range out.DeadLetters {
		d, rec, err := record.ParseDeadLetter([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(d.Reason, "already exists") {
			t.Errorf("dead letter reason %q, want it to say the record already exists", d.Reason)
		}
		if rec != nil {
			dead = append(dead, *rec)
		}
	}
	if out.Written != n/2 || !sameRecords(dead, changed) {
		t.Errorf("insert of changed and new records: written %d, %d dead letters; want %d written and the %d changed ones dead", out.Written, len(dead), n/2, len(changed))
	}
	wantContents(t, s, append(slices.Clone(first), fresh...))

	// Upsert overwrites.
	out, err = s.Write(ctx, Options{Batch: batch}, changed)
	if err != nil {
		t.Fatal(err)
	}
	if out.Written != len(changed) || len(out.DeadLetters) != 0 {
		t.Errorf("upsert: written %d, dead letters %v; want %d and none", out.Written, out.DeadLetters, len(changed))
	}
	wantContents(t, s, append(append(slices.Clone(changed), first[n/2:]...), fresh...))
}

func deletes(t *testing.T, s Store) {
	ctx := t.Context()
	stored := s.Records(1, n, 0)
	if _, err := s.Write(ctx, Options{Batch: batch}, stored); err != nil {
		t.Fatal(err)
	}
	// Records 11..30 with other content, and 41..50, never stored.
	gone := append(s.Records(11, 20, 1), s.Records(n+1, 10, 0)...)
	for i := range 2 {
		out, err := s.Write(ctx, Options{Delete: true, Batch: batch, Fault: AfterApply}, gone)
		if err != nil {
			t.Fatalf("delete %d: %v", i+1, err)
		}
		if out.Deleted != len(gone) || out.Written != 0 || len(out.DeadLetters) != 0 || len(out.Retries) < len(gone)/batch {
			t.Errorf("delete %d: deleted %d, written %d, dead letters %v, %d retries; want %d deleted, none written or dead, a retry per commit",
				i+1, out.Deleted, out.Written, out.DeadLetters, len(out.Retries), len(gone))
		}
		wantContents(t, s, append(slices.Clone(stored[:10]), stored[30:]...))
	}
}

// wantContents fails t unless the store holds exactly want, one copy of
// each.
func wantContents(t *testing.T, s Store, want []record.Record) {
	t.Helper()
	got, err := s.Contents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !sameRecords(got, want) {
		t.Errorf("the store holds %d records, want %d:\n got %s\nwant %s", len(got), len(want), describe(got), describe(want))
	}
}

// sameRecords reports whether a and b hold the same records, as many
// times each, in any order.
func sameRecords(a, b []record.Record) bool {
	return slices.EqualFunc(encoded(a), encoded(b), bytes.Equal)
}

func encoded(recs []record.Record) [][]byte {
	out := make([][]byte, len(recs))
	for i := range recs {
		out[i] = record.AppendRecord(nil, &recs[i])
	}
	slices.SortFunc(out, bytes.Compare)
	return out
}

func describe(recs []record.Record) string {
	const most = 5
	var parts []string
	for i := range recs[:min(most, len(recs))] {
		parts = append(parts, fmt.Sprintf("%v", recs[i]))
	}
	if len(recs) > most {
		parts = append(parts, fmt.Sprintf("... (%d more)", len(recs)-most))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
