package datastoredb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/write/retry"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// fakeStore is an in-memory Datastore commit endpoint that behaves like
// the service where the Writer cares: a commit applies all or nothing, two
// mutations of one key are refused, inserts of existing keys fail.
type fakeStore struct {
	entities map[string]datastore.PropertyList
	commits  [][]string // keys of each successful commit
	calls    int
	// refuse returns a per-entity error the service would give.
	refuse func(k *datastore.Key, props datastore.PropertyList) error
	// fail returns an error for the whole call before anything else.
	fail func(call int, ents []datastore.Entity) error
}

func newFakeStore() *fakeStore { return &fakeStore{entities: map[string]datastore.PropertyList{}} }

func (s *fakeStore) commit(_ context.Context, insert bool, ents []datastore.Entity) error {
	s.calls++
	if s.fail != nil {
		if err := s.fail(s.calls, ents); err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	for _, e := range ents {
		k := e.Key.String()
		if seen[k] {
			return status.Error(codes.InvalidArgument, "A non-transactional commit may not contain multiple mutations affecting the same entity.")
		}
		seen[k] = true
		if s.refuse != nil {
			if err := s.refuse(e.Key, e.Properties); err != nil {
				return err
			}
		}
		if _, ok := s.entities[k]; ok && insert {
			return status.Errorf(codes.AlreadyExists, "entity already exists: %s", k)
		}
	}
	var keys []string
	for _, e := range ents {
		s.entities[e.Key.String()] = e.Properties
		keys = append(keys, e.Key.String())
	}
	s.commits = append(s.commits, keys)
	return nil
}

// delete deletes keys, as a non-transactional commit of deletes: a key
// not stored is no error, a key twice is refused.
func (s *fakeStore) delete(_ context.Context, keys []*datastore.Key) error {
	s.calls++
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.String()] {
			return status.Error(codes.InvalidArgument, "A non-transactional commit may not contain multiple mutations affecting the same entity.")
		}
		seen[k.String()] = true
	}
	var done []string
	for _, k := range keys {
		delete(s.entities, k.String())
		done = append(done, k.String())
	}
	s.commits = append(s.commits, done)
	return nil
}

func (s *fakeStore) get(_ context.Context, keys []*datastore.Key) ([]datastore.PropertyList, []bool, error) {
	props := make([]datastore.PropertyList, len(keys))
	found := make([]bool, len(keys))
	for i, k := range keys {
		props[i], found[i] = s.entities[k.String()]
	}
	return props, found, nil
}

type writerLog struct {
	dead      []record.DeadLetter
	written   int
	deleted   int
	existing  int
	retries   int
	throttled int
	commitMax int
	// commitBytes are the sizes of the successful commits.
	commitBytes []int
}

// take adds what a Writer did to the log.
func (log *writerLog) take(o storewrite.Outcome) {
	for _, line := range o.DeadLetters {
		d, _, err := record.ParseDeadLetter([]byte(line))
		if err != nil {
			panic(err)
		}
		log.dead = append(log.dead, d)
	}
	log.written += o.Written
	log.deleted += o.Deleted
	log.existing += o.Existing
	log.retries += len(o.Retries)
	log.throttled += len(o.Throttled)
	for _, c := range o.Commits {
		if c.OK {
			log.commitMax = max(log.commitMax, c.Records)
			log.commitBytes = append(log.commitBytes, c.Bytes)
		}
	}
}

func newTestWriter(s *fakeStore) *Writer {
	return &Writer{
		Commit: s.commit,
		Delete: s.delete,
		Get:    s.get,
		Source: "test",
		Retry:  retry.Policy{Initial: time.Millisecond, Max: 2 * time.Millisecond, MaxCumulative: 20 * time.Millisecond},
	}
}

func idRecord(id int64, v int64) *record.Record {
	k := rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "K", ID: id}}}
	return &record.Record{Table: "K", Key: &k, Fields: []record.Field{{Name: "v", Value: record.Int(v)}}}
}

func addAll(t *testing.T, w *Writer, log *writerLog, recs ...*record.Record) {
	t.Helper()
	ctx := context.Background()
	var out storewrite.Outcome
	defer func() { log.take(out) }()
	for _, r := range recs {
		if err := w.Add(ctx, r, &out); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx, &out); err != nil {
		t.Fatal(err)
	}
}

func TestWriterCommitsAtMost500(t *testing.T) {
	s, log := newFakeStore(), &writerLog{}
	w := newTestWriter(s)
	var recs []*record.Record
	for i := int64(1); i <= 1234; i++ {
		recs = append(recs, idRecord(i, i))
	}
	addAll(t, w, log, recs...)
	if got, want := commitSizes(s), "500 500 234"; got != want {
		t.Errorf("commit sizes = %s, want %s", got, want)
	}
	if log.written != 1234 || len(s.entities) != 1234 || len(log.dead) != 0 {
		t.Errorf("written %d, stored %d, dead %d; want 1234, 1234, 0", log.written, len(s.entities), len(log.dead))
	}

	s, log = newFakeStore(), &writerLog{}
	w = newTestWriter(s)
	w.MaxEntities = 100
	addAll(t, w, log, recs[:250]...)
	if got, want := commitSizes(s), "100 100 50"; got != want {
		t.Errorf("MaxEntities 100: commit sizes = %s, want %s", got, want)
	}
	w.MaxEntities = 100000
	if w.maxEntities() != MaxCommitEntities {
		t.Errorf("MaxEntities above the service limit is not clamped: %d", w.maxEntities())
	}
}

func commitSizes(s *fakeStore) string {
	var parts []string
	for _, c := range s.commits {
		parts = append(parts, fmt.Sprint(len(c)))
	}
	return strings.Join(parts, " ")
}

func TestWriterCapsBytes(t *testing.T) {
	s, log := newFakeStore(), &writerLog{}
	w := newTestWriter(s)
	w.MaxBytes = 1 << 20
	var recs []*record.Record
	for i := int64(1); i <= 40; i++ {
		r := idRecord(i, i)
		r.Fields = append(r.Fields, record.Field{Name: "blob", Value: record.Bytes(make([]byte, 100_000)), NoIndex: true})
		recs = append(recs, r)
	}
	addAll(t, w, log, recs...)
	bytesPerCommit := log.commitBytes
	if len(s.entities) != 40 {
		t.Fatalf("stored %d, want 40", len(s.entities))
	}
	for i, b := range bytesPerCommit {
		if b > 1<<20 {
			t.Errorf("commit %d carries %d bytes, more than MaxBytes %d", i, b, 1<<20)
		}
	}
	if len(bytesPerCommit) < 4 {
		t.Errorf("%d commits for 4 MB at 1 MiB each, want at least 4", len(bytesPerCommit))
	}
}

func TestWriterNeverCommitsAKeyTwice(t *testing.T) {
	s, log := newFakeStore(), &writerLog{}
	w := newTestWriter(s)
	recs := []*record.Record{idRecord(1, 1), idRecord(2, 1), idRecord(3, 1), idRecord(2, 2), idRecord(4, 1), idRecord(2, 3)}
	addAll(t, w, log, recs...)
	if len(log.dead) != 0 {
		t.Fatalf("dead letters: %v", log.dead)
	}
	if got, want := commitSizes(s), "3 2 1"; got != want {
		t.Errorf("commit sizes = %s, want %s (flush before each repeated key)", got, want)
	}
	if got := s.entities[datastore.IDKey("K", 2, nil).String()][0].Value; got != int64(3) {
		t.Errorf("key 2 holds v=%v, want the last version 3", got)
	}
	if len(s.entities) != 4 {
		t.Errorf("stored %d entities, want 4", len(s.entities))
	}
}

func TestWriterIsolatesRefusedEntities(t *testing.T) {
	s, log := newFakeStore(), &writerLog{}
	bad := map[int64]bool{17: true, 60: true, 61: true}
	s.refuse = func(k *datastore.Key, _ datastore.PropertyList) error {
		if bad[k.ID] {
			return status.Errorf(codes.InvalidArgument, "maximum entity size is 1048576 bytes (%d)", k.ID)
		}
		return nil
	}
	w := newTestWriter(s)
	var recs []*record.Record
	for i := int64(1); i <= 100; i++ {
		recs = append(recs, idRecord(i, i))
	}
	// and one the conversion refuses, dead-lettered without a commit
	dotted := idRecord(101, 1)
	dotted.Fields[0].Name = "a.b"
	addAll(t, w, log, append(recs, dotted)...)
	if len(s.entities) != 97 || log.written != 97 {
		t.Errorf("stored %d, written %d, want 97", len(s.entities), log.written)
	}
	if len(log.dead) != 4 {
		t.Fatalf("%d dead letters, want 4: %v", len(log.dead), log.dead)
	}
	var reasons []string
	for _, d := range log.dead {
		if d.Stage != record.StageWrite || d.Source != "test" || len(d.Record) == 0 {
			t.Errorf("dead letter %+v: want stage write, source test, the record", d)
		}
		reasons = append(reasons, d.Reason)
	}
	all := strings.Join(reasons, "\n")
	for _, want := range []string{"(17)", "(60)", "(61)", `name contains "."`} {
		if !strings.Contains(all, want) {
			t.Errorf("dead-letter reasons %q lack %q", all, want)
		}
	}
}

func TestWriterSplitsTooLargeRequests(t *testing.T) {
	s, log := newFakeStore(), &writerLog{}
	s.fail = func(_ int, ents []datastore.Entity) error {
		if len(ents) > 70 {
			return status.Error(codes.ResourceExhausted, "gRPC message exceeds maximum size 4194304: 11700854")
		}
		return nil
	}
	w := newTestWriter(s)
	var recs []*record.Record
	for i := int64(1); i <= 300; i++ {
		recs = append(recs, idRecord(i, i))
	}
	addAll(t, w, log, recs...)
	if len(s.entities) != 300 || len(log.dead) != 0 {
		t.Errorf("stored %d, dead %d, want 300 and 0", len(s.entities), len(log.dead))
	}
}

func TestWriterClientSideErrors(t *testing.T) {
	s, log := newFakeStore(), &writerLog{}
	s.fail = func(_ int, ents []datastore.Entity) error {
		me := make(datastore.MultiError, len(ents))
		bad := false
		for i, e := range ents {
			if e.Key.ID == 3 {
				me[i], bad = errors.New("datastore: invalid entity"), true
			}
		}
		if bad {
			return me
		}
		return nil
	}
	w := newTestWriter(s)
	addAll(t, w, log, idRecord(1, 1), idRecord(2, 1), idRecord(3, 1), idRecord(4, 1))
	if len(s.entities) != 3 || len(log.dead) != 1 || !strings.Contains(log.dead[0].Reason, "invalid entity") {
		t.Errorf("stored %d, dead %v; want 3 stored and key 3 dead-lettered", len(s.entities), log.dead)
	}
}

func TestWriterRetriesTransientErrors(t *testing.T) {
	s, log := newFakeStore(), &writerLog{}
	s.fail = func(call int, _ []datastore.Entity) error {
		if call <= 2 {
			return status.Error(codes.Unavailable, "try again")
		}
		return nil
	}
	w := newTestWriter(s)
	addAll(t, w, log, idRecord(1, 1), idRecord(2, 1))
	if len(s.entities) != 2 || log.retries != 2 || len(log.dead) != 0 {
		t.Errorf("stored %d, retries %d, dead %d; want 2, 2, 0", len(s.entities), log.retries, len(log.dead))
	}
}

// TestWriterDeadLettersWithoutAccess: PermissionDenied and
// Unauthenticated are not retried and not isolated: the whole commit goes
// to the dead-letter output with the reason, in one call.
func TestWriterDeadLettersWithoutAccess(t *testing.T) {
	for _, code := range []codes.Code{codes.PermissionDenied, codes.Unauthenticated} {
		s, log := newFakeStore(), &writerLog{}
		s.fail = func(int, []datastore.Entity) error { return status.Error(code, "no access to the database") }
		w := newTestWriter(s)
		addAll(t, w, log, idRecord(1, 1), idRecord(2, 1), idRecord(3, 1))
		if s.calls != 1 || log.retries != 0 || len(log.dead) != 3 || len(s.entities) != 0 {
			t.Errorf("%v: %d calls, %d retries, %d dead, %d stored; want 1, 0, 3, 0", code, s.calls, log.retries, len(log.dead), len(s.entities))
		}
		for _, d := range log.dead {
			if !strings.Contains(d.Reason, "no access") {
				t.Errorf("%v: reason %q, want the store's error", code, d.Reason)
			}
		}
	}
}

// TestWriterObeysTheThrottle: a throttle that rejects holds commits back
// (counted with their waits) and is told each attempt's outcome.
func TestWriterObeysTheThrottle(t *testing.T) {
	s, log := newFakeStore(), &writerLog{}
	s.fail = func(call int, _ []datastore.Entity) error {
		if call == 1 {
			return status.Error(codes.ResourceExhausted, "quota")
		}
		return nil
	}
	th := &countingThrottle{reject: 3}
	w := newTestWriter(s)
	w.Throttle = th
	addAll(t, w, log, idRecord(1, 1), idRecord(2, 1))
	held := log.throttled
	if held != 3 || th.refused != 1 || th.accepted != 1 || s.calls != 2 || len(s.entities) != 2 {
		t.Errorf("held %d, refused %d, accepted %d, calls %d, stored %d; want 3, 1, 1, 2, 2", held, th.refused, th.accepted, s.calls, len(s.entities))
	}
}

type countingThrottle struct{ reject, accepted, refused int }

func (c *countingThrottle) Allow() bool {
	if c.reject > 0 {
		c.reject--
		return false
	}
	return true
}

func (c *countingThrottle) Record(ok bool) {
	if ok {
		c.accepted++
	} else {
		c.refused++
	}
}

func TestWriterReturnsInfrastructureErrors(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		err     func(call int) error
		calls   int // at least, when retried
		retried bool
	}{
		{"unavailable after retries", func(int) error { return status.Error(codes.Unavailable, "down") }, 3, true},
		{"cancelled at once", func(int) error { return status.Error(codes.Canceled, "cancelled") }, 1, false},
		{"unavailable while isolating", func(call int) error {
			if call == 1 {
				return status.Error(codes.InvalidArgument, "bad entity somewhere")
			}
			return status.Error(codes.Unavailable, "down")
		}, 1 + 3, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, log := newFakeStore(), &writerLog{}
			s.fail = func(call int, _ []datastore.Entity) error { return tt.err(call) }
			w := newTestWriter(s)
			var out storewrite.Outcome
			for i := int64(1); i <= 4; i++ {
				if err := w.Add(ctx, idRecord(i, i), &out); err != nil {
					t.Fatal(err)
				}
			}
			err := w.Flush(ctx, &out)
			log.take(out)
			if err == nil {
				t.Fatal("Flush = nil, want the error")
			}
			// Retries go on until 20 ms of backoff (waits of 0-2 ms) are
			// spent: more than 3 attempts.
			if (tt.retried && s.calls < tt.calls) || (!tt.retried && s.calls != tt.calls) {
				t.Errorf("%d commit calls, want %d (retried: %v)", s.calls, tt.calls, tt.retried)
			}
			// Every call after the first of each commit is a retry: one
			// commit, or the whole batch and then its first half.
			commits := 1
			if tt.calls == 4 {
				commits = 2
			}
			if log.retries != s.calls-commits {
				t.Errorf("%d retries counted for %d calls of %d commits", log.retries, s.calls, commits)
			}
			if len(log.dead) != 0 {
				t.Errorf("dead letters %v for an infrastructure error, want none", log.dead)
			}
		})
	}
	// A cancelled context stops a retry wait.
	s := newFakeStore()
	s.fail = func(int, []datastore.Entity) error { return status.Error(codes.Unavailable, "down") }
	w := newTestWriter(s)
	w.Retry.Initial, w.Retry.Max, w.Retry.MaxCumulative = time.Hour, time.Hour, 10*time.Hour
	cctx, cancel := context.WithCancel(ctx)
	var out storewrite.Outcome
	if err := w.Add(cctx, idRecord(1, 1), &out); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(10*time.Millisecond, cancel)
	if err := w.Flush(cctx, &out); !errors.Is(err, context.Canceled) {
		t.Errorf("Flush with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestWriterInsertMode(t *testing.T) {
	s, log := newFakeStore(), &writerLog{}
	w := newTestWriter(s)
	w.Mode = storewrite.ModeInsert
	// An earlier run wrote 1..5 (same content) and someone else wrote 6.
	var first []*record.Record
	for i := int64(1); i <= 5; i++ {
		first = append(first, idRecord(i, i))
	}
	first = append(first, idRecord(6, 600))
	addAll(t, w, log, first...)
	*log = writerLog{}
	var recs []*record.Record
	for i := int64(1); i <= 10; i++ {
		recs = append(recs, idRecord(i, i))
	}
	addAll(t, w, log, recs...)
	if log.existing != 5 || log.written != 9 {
		t.Errorf("existing %d, written %d; want 5 already present and 9 written in all", log.existing, log.written)
	}
	if len(log.dead) != 1 || !strings.Contains(log.dead[0].Reason, "already exists with other content") {
		t.Errorf("dead letters = %v, want key 6 only", log.dead)
	}
	if len(s.entities) != 10 {
		t.Errorf("stored %d, want 10", len(s.entities))
	}
	if got := s.entities[datastore.IDKey("K", 6, nil).String()][0].Value; got != int64(600) {
		t.Errorf("insert overwrote key 6: v=%v", got)
	}
	if err := storewrite.CheckMode("replace"); err == nil {
		t.Error(`storewrite.CheckMode("replace") = nil`)
	}
}

func TestWriterNamespaceOverride(t *testing.T) {
	s, log := newFakeStore(), &writerLog{}
	w := newTestWriter(s)
	w.Namespace = "target"
	r := idRecord(1, 1)
	r.Key.Namespace = "source"
	addAll(t, w, log, r)
	want := datastore.IDKey("K", 1, nil)
	want.Namespace = "target"
	if _, ok := s.entities[want.String()]; !ok || len(s.entities) != 1 {
		t.Errorf("stored %v, want only %v", s.entities, want)
	}
	if r.Key.Namespace != "source" {
		t.Errorf("the record's own key changed to %q", r.Key.Namespace)
	}
}

// TestWriterDeleteMode: in delete mode the records' keys are deleted, in
// commits of at most MaxEntities, the namespace replaced as for writes;
// their properties are not read (one no write would take is deleted all
// the same), a key not stored counts as deleted, a record without a key
// is dead-lettered, and nothing is written.
func TestWriterDeleteMode(t *testing.T) {
	s, log := newFakeStore(), &writerLog{}
	w := newTestWriter(s)
	w.Namespace = "old"
	var recs []*record.Record
	for i := int64(1); i <= 10; i++ {
		recs = append(recs, idRecord(i, i))
	}
	addAll(t, w, log, recs...)
	*log, s.commits = writerLog{}, nil
	w.Mode, w.MaxEntities = storewrite.ModeDelete, 3
	s.refuse = func(*datastore.Key, datastore.PropertyList) error {
		t.Error("delete mode committed a write")
		return nil
	}
	dotted := idRecord(2, 1)
	dotted.Fields[0].Name = "a.b" // ToEntity refuses it
	keyless := &record.Record{Table: "K", Fields: []record.Field{{Name: "v", Value: record.Int(1)}}}
	addAll(t, w, log, idRecord(1, 99), dotted, idRecord(3, 1), idRecord(4, 1), idRecord(11, 1), keyless)
	if log.deleted != 5 || log.written != 0 {
		t.Errorf("deleted %d, written %d; want 5 and 0", log.deleted, log.written)
	}
	if len(log.dead) != 1 || !strings.Contains(log.dead[0].Reason, "no Datastore key") {
		t.Errorf("dead letters %v, want the record without a key", log.dead)
	}
	if got, want := commitSizes(s), "3 2"; got != want {
		t.Errorf("commit sizes = %s, want %s", got, want)
	}
	if len(s.entities) != 6 {
		t.Errorf("%d entities left, want 6 (5..10): %v", len(s.entities), s.entities)
	}
	for _, id := range []int64{1, 2, 3, 4} {
		k := datastore.IDKey("K", id, nil)
		k.Namespace = "old"
		if _, ok := s.entities[k.String()]; ok {
			t.Errorf("%s was not deleted", k)
		}
	}
}
