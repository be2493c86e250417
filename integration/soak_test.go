package integration

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// The soak of the staged cutover (TestSoakSpanner, TestSoakDatastore,
// TestSoakDatastoreGroups, TestSoakDatastoreKept, TestSoakDatastoreRefs,
// TestSoakSpannerInterleaved, TestSoakDatastoreSpanner):
// a seeded run of the whole protocol against the emulators, in the
// manner of Jepsen. Application instances (each a library with its own
// phase cache) put, get and delete the records of their users, some
// records written from two instances at once, and record every call's
// invocation, completion and outcome; operators take two groups of
// cohorts through every phase with the real jobs (backfill, verify
// --mark, repair, rollback, reverse backfill, cleanup) concurrently;
// commit taps in front of old's database and new's fail a share of the
// commits of every kind (data on either side, touched marks, the repair
// log, the phase store, the jobs' writes), before they reach the store
// or after it applied them (the response lost). At the end the checker
// holds every read against the history: it returns the latest write
// acknowledged before it began, or one that overlapped it, or a delete's
// nothing — never a deleted record, never a value older than one an
// earlier read returned — and new, once every cohort is in done, holds
// for every record what the history allows as its last value; and a
// read's other fields (keys, references) are what every write of the
// record puts.
//
// -soak sets how long each seed's workload runs (default 15s, as CI
// runs it); -soak_faults the share of commits failed (default 0.03);
// -soak_seed runs one seed (a failing seed reproduces by its
// number: the faults, the operators' choices and the workload follow it,
// though the interleaving with the emulators does not). Both layouts, old
// and new in one database and in two, run for each seed (Datastore →
// Spanner: two, always).
var (
	soakFor    = flag.Duration("soak", 15*time.Second, "how long each soak seed's workload runs")
	soakSeed   = flag.Uint64("soak_seed", 0, "run only this soak seed (0: the CI seeds)")
	soakFaults = flag.Float64("soak_faults", 0.03, "the share of commits each tap fails")
)

// soakSeeds are the seeds CI runs: the first of soakAllSeeds, which -full
// runs (for TestSoakSpanner and TestSoakDatastore; the other shapes run
// their first seed either way).
var soakSeeds = soakAllSeeds[:1]

var soakAllSeeds = []uint64{1, 2}

// soakSeedsOf is soakSeeds, or with -full every seed of soakAllSeeds.
func soakSeedsOf() []uint64 {
	if *full {
		return soakAllSeeds
	}
	return soakSeeds
}

const (
	soakBuckets = 4
	soakTTL     = time.Second
	soakSkew    = 400 * time.Millisecond
	soakUsers   = 16
	soakSeqs    = 4
)

func TestSoakSpanner(t *testing.T)   { runSoak(t, "spanner", soakSeedsOf()) }
func TestSoakDatastore(t *testing.T) { runSoak(t, "datastore", soakSeedsOf()) }

// TestSoakDatastoreGroups soaks the Datastore migration whose logs are
// descendants of their user's root entity (user: key:User, ancestors:
// root; see newStagedDatastoreGroups); CI runs its first seed.
func TestSoakDatastoreGroups(t *testing.T) { runSoak(t, "datastore-groups", soakSeeds[:1]) }

// TestSoakDatastoreKept soaks the Datastore migration to UUID v5 keys
// that keeps each entity's old key in a property (keep_original_key:
// the reverse backfill's way back), and TestSoakDatastoreRefs the one
// whose logs hold a reference to their user's first log, rewritten with
// the keys (references), and one to their user's Customer, which another
// run moves (references_to); CI runs the first seed of each in one layout
// (TestSoakDatastore runs both).
func TestSoakDatastoreKept(t *testing.T) { runSoak(t, "datastore-kept", soakSeeds[:1]) }
func TestSoakDatastoreRefs(t *testing.T) { runSoak(t, "datastore-refs", soakSeeds[:1]) }

// TestSoakSpannerInterleaved soaks the demo's Customers with Orders
// interleaved in them (old and new in two databases, always): a
// customer's delete takes its orders on both sides, an order's write
// fails where its customer is missing; CI runs its first seed.
func TestSoakSpannerInterleaved(t *testing.T) { runSoak(t, "spanner-interleaved", soakSeeds[:1]) }

// TestSoakDatastoreSpanner soaks a Datastore kind moving into a Spanner
// table (always apart: two stores); CI runs its first seed.
func TestSoakDatastoreSpanner(t *testing.T) { runSoak(t, "datastore-spanner", soakSeeds[:1]) }

func runSoak(t *testing.T, store string, seeds []uint64) {
	if *soakSeed != 0 {
		seeds = []uint64{*soakSeed}
	}
	layouts := []bool{false, true}
	switch {
	case store == "datastore-spanner" || store == "spanner-interleaved":
		layouts = []bool{true}
	case (store == "datastore-kept" || store == "datastore-refs") && *soakSeed == 0:
		layouts = []bool{false}
	}
	for _, seed := range seeds {
		for _, apart := range layouts {
			t.Run(fmt.Sprintf("seed %d apart %v", seed, apart), func(t *testing.T) {
				s := newSoak(t, store, apart, seed)
				s.run(t, *soakFor)
			})
		}
	}
}

// soakOp is one call in the history.
type soakOp struct {
	id       int
	key      string // user/seq
	kind     byte   // 'w' put, 'd' delete, 'r' get
	val      string // a put's value, unique; a get's result
	found    bool   // a get found a record
	fields   string // how a get's other fields differ from those every put writes ("": not at all)
	inv, ret time.Time
	ok       bool
	err      string
	instance int
	phase    phases.Phase // the phase the instance held at invocation
	cascaded bool         // a child's delete by its parent's (op id is the parent's)
}

// soakEvent is an operator's step, for the history printed around a
// violation.
type soakEvent struct {
	at   time.Time
	what string
}

type soak struct {
	store, name string
	seed        uint64
	apart       bool
	cfg         *config.Config
	migration   string
	phases      phases.Store
	apps        []stagedApp
	taps        []*committap.Tap
	key         func(user string, seq int64) record.Record
	newPages    func(t *testing.T) map[string]string
	users       []string
	// cascade: seq 0 is a user's parent row and the other seqs its
	// interleaved children, deleted with it (spanner-interleaved).
	cascade bool

	mu     sync.Mutex
	ops    []*soakOp
	events []soakEvent
	start  time.Time
}

func (s *soak) event(format string, args ...any) {
	s.mu.Lock()
	s.events = append(s.events, soakEvent{time.Now(), fmt.Sprintf(format, args...)})
	s.mu.Unlock()
}

// newSoak makes the migration (old's database, and new's: the same, or
// another) with a tap in front of each database's clients, the phase
// store in new's, and two application instances.
func newSoak(t *testing.T, store string, apart bool, seed uint64) *soak {
	t.Helper()
	ctx := context.Background()
	s := &soak{store: store, seed: seed, apart: apart, migration: fmt.Sprintf("soak-%d", time.Now().UnixNano())}
	hostEnv := emulator.EnvSpannerHost
	grouped := store == "datastore-groups"
	if !strings.HasPrefix(store, "spanner") {
		hostEnv = emulator.EnvDatastoreHost
	}
	emulator.RequireSpanner(t)
	emulator.RequireDatastore(t)
	tapOf := func(hostEnv string) *committap.Tap {
		tp, err := committap.Start(os.Getenv(hostEnv), soakSpannerKeys...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tp.Close)
		s.taps = append(s.taps, tp)
		return tp
	}
	tap := func() *committap.Tap { return tapOf(hostEnv) }
	var oldTap, newTap *committap.Tap
	switch {
	case store == "datastore-spanner": // always apart: old's tap in front of Datastore, new's of Spanner
		oldTap, newTap = tap(), tapOf(emulator.EnvSpannerHost)
	case store == "spanner-interleaved": // always apart: both tables keep their names
		oldTap, newTap = tap(), tap()
	default:
		oldTap = tap()
		newTap = oldTap
		if apart {
			newTap = tap()
		}
	}
	dead := filepath.Join(t.TempDir(), "dead.jsonl")
	var yaml string
	var oldClient any
	switch store {
	case "spanner":
		t.Setenv(hostEnv, oldTap.Addr())
		target := append([]string{stagedLogsV2DDL}, phases.SpannerDDL...)
		var oldC, newC *spanner.Client
		if apart {
			oldC = emulator.TestDB(t, stagedLogsDDL)
			t.Setenv(hostEnv, newTap.Addr())
			newC = emulator.TestDB(t, target...)
		} else {
			oldC = emulator.TestDB(t, append([]string{stagedLogsDDL}, target...)...)
			newC = oldC
		}
		yaml = fmt.Sprintf(`
source: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: Logs}
target: {type: spanner, project: %[1]s, instance: %[2]s, database: %[4]s, table: LogsV2}
rewrite: {strategy: shard, params: {n: 8, mode: abs}}
dead_letter: %[5]s
cohort: {user: UserId, buckets: %[6]d, cache_ttl: %[7]s, skew: %[8]s}
`, emulator.SpannerProject(), emulator.SpannerInstance(), dbID(oldC), dbID(newC), dead, soakBuckets, soakTTL, soakSkew)
		s.phases = phases.SpannerStore{Client: newC}
		oldClient = oldC
		s.key = func(user string, seq int64) record.Record {
			return record.Record{Table: "Logs", Fields: []record.Field{{Name: "UserId", Value: record.String(user)}, {Name: "Seq", Value: record.Int(seq)}}}
		}
		s.newPages = func(t *testing.T) map[string]string {
			out := map[string]string{}
			err := newC.Single().Query(ctx, spanner.Statement{SQL: "SELECT UserId, Seq, Page FROM LogsV2"}).Do(func(r *spanner.Row) error {
				var u string
				var q int64
				var p spanner.NullString
				if err := r.Columns(&u, &q, &p); err != nil {
					return err
				}
				out[logID(u, q)] = p.StringVal
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
	case "spanner-interleaved":
		// The demo's Customers with Orders interleaved ON DELETE CASCADE
		// (newStagedInterleaved): a user's seq 0 is its customer row, seq
		// n its order n; a customer's delete takes its orders.
		t.Setenv(hostEnv, oldTap.Addr())
		oldC := emulator.TestDB(t, stagedInterleavedDDL...)
		t.Setenv(hostEnv, newTap.Addr())
		newC := emulator.TestDB(t, append(append([]string(nil), stagedInterleavedDDL...), phases.SpannerDDL...)...)
		yaml = interleavedConfig(oldC, newC, dead, soakBuckets, soakTTL, soakSkew)
		s.phases = phases.SpannerStore{Client: newC}
		oldClient = oldC
		s.key = func(user string, seq int64) record.Record { return interleavedKey(t, user, seq) }
		s.newPages = interleavedPages(newC, "BIT_REVERSE(CustomerId, true)")
		s.cascade = true
	case "datastore-spanner":
		t.Setenv(hostEnv, oldTap.Addr())
		oldC := emulator.TestDatastore(t)
		oldNS := emulator.UniqueNamespace("soak-x")
		t.Setenv(emulator.EnvSpannerHost, newTap.Addr())
		newC := emulator.TestDB(t, append([]string{stagedLogsXDDL}, phases.SpannerDDL...)...)
		yaml = fmt.Sprintf(`
source: {type: datastore, project: %[1]s, namespace: %[2]s, kind: Log, key: "LogKey STRING(MAX)"}
target: {type: spanner, project: %[3]s, instance: %[4]s, database: %[5]s, table: LogsX}
rewrite: {strategy: shard, params: {n: 8, mode: abs}}
dead_letter: %[6]s
cohort: {user: User, buckets: %[7]d, cache_ttl: %[8]s, skew: %[9]s}
`, emulator.DatastoreProject(), oldNS, emulator.SpannerProject(), emulator.SpannerInstance(), dbID(newC), dead, soakBuckets, soakTTL, soakSkew)
		s.phases = phases.SpannerStore{Client: newC}
		oldClient = oldC
		s.key = func(user string, seq int64) record.Record {
			k := rewrite.DatastoreKey{Namespace: oldNS, Path: []rewrite.PathElement{{Kind: "Log", Name: fmt.Sprintf("%s.%d", user, seq)}}}
			return record.Record{Table: "Log", Key: &k, Fields: []record.Field{{Name: "User", Value: record.String(user)}, {Name: "Seq", Value: record.Int(seq)}}}
		}
		s.newPages = spannerLogsBy(newC, "LogsX", "User")
	default:
		t.Setenv(hostEnv, oldTap.Addr())
		oldC := emulator.TestDatastore(t)
		oldNS, newNS := emulator.UniqueNamespace("soak-old"), emulator.UniqueNamespace("soak-new")
		newDB := ""
		t.Setenv(hostEnv, newTap.Addr())
		newC := oldC
		if apart {
			newDB = "rekey-soak-new"
			var err error
			if newC, err = datastoredb.Client(ctx, emulator.DatastoreProject(), newDB); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { newC.Close() })
		}
		kind, user, rw, extra, custNS := "Log", "User", "{strategy: hashprefix}", "", ""
		switch store {
		case "datastore-groups":
			kind, user, extra = "User", "key:User", "ancestors: root\ndescendants: [Log]"
		case "datastore-kept":
			rw, extra = "{strategy: uuid, params: {version: 5}}", "keep_original_key: OldKey"
		case "datastore-refs":
			// Prev to the user's first log, and Cust to a Customer that
			// another run moves (references_to its config).
			crm, crm2 := emulator.UniqueNamespace("soak-crm"), emulator.UniqueNamespace("soak-crm2")
			custNS = crm
			customers := writeConfig(t, fmt.Sprintf("source: {type: datastore, project: %[1]s, namespace: %[2]s, kind: Customer}\ntarget: {type: datastore, project: %[1]s, namespace: %[3]s, kind: Customer}\nrewrite: {strategy: hashprefix}\n",
				emulator.DatastoreProject(), crm, crm2))
			extra = fmt.Sprintf("references: [Prev]\nreferences_to: [{property: Cust, config: %q}]", customers)
		}
		yaml = fmt.Sprintf(`
source: {type: datastore, project: %[1]s, namespace: %[2]s, kind: %[9]s}
target: {type: datastore, project: %[1]s, database: %[3]q, namespace: %[4]s, kind: %[9]s}
rewrite: %[12]s
%[11]s
dead_letter: %[5]s
cohort: {user: %[10]s, buckets: %[6]d, cache_ttl: %[7]s, skew: %[8]s}
`, emulator.DatastoreProject(), oldNS, newDB, newNS, dead, soakBuckets, soakTTL, soakSkew, kind, user, extra, rw)
		s.phases = phases.DatastoreStore{Client: newC, Namespace: newNS}
		oldClient = oldC
		s.key = func(user string, seq int64) record.Record {
			k := rewrite.DatastoreKey{Namespace: oldNS, Path: []rewrite.PathElement{{Kind: "Log", Name: fmt.Sprintf("%s.%d", user, seq)}}}
			if grouped {
				k.Path = append([]rewrite.PathElement{{Kind: "User", Name: user}}, k.Path...)
			}
			r := record.Record{Table: "Log", Key: &k, Fields: []record.Field{{Name: "User", Value: record.String(user)}, {Name: "Seq", Value: record.Int(seq)}}}
			if store == "datastore-refs" {
				// A reference to the user's first log, rewritten with
				// the logs' keys.
				first := rewrite.DatastoreKey{Namespace: oldNS, Path: []rewrite.PathElement{{Kind: "Log", Name: user + ".0"}}}
				cust := rewrite.DatastoreKey{Namespace: custNS, Path: []rewrite.PathElement{{Kind: "Customer", Name: user}}}
				r.Fields = append(r.Fields, record.Field{Name: "Prev", Value: record.Key(first)}, record.Field{Name: "Cust", Value: record.Key(cust)})
			}
			return r
		}
		s.newPages = func(t *testing.T) map[string]string {
			var logs []dsLog
			if _, err := newC.GetAll(ctx, datastore.NewQuery("Log").Namespace(newNS), &logs); err != nil {
				t.Fatal(err)
			}
			out := map[string]string{}
			for _, l := range logs {
				out[logID(l.User, l.Seq)] = l.Page
			}
			return out
		}
	}
	s.name = fmt.Sprintf("%s seed %d apart %v", store, seed, apart)
	s.cfg = loadYAML(t, yaml)
	path := writeConfig(t, yaml)
	for range 2 {
		var lib stagedApp
		var err error
		switch c := oldClient.(type) {
		case *spanner.Client:
			lib, err = cutover.OpenSpanner(ctx, c, path, cutover.Options{Migration: s.migration})
		case *datastore.Client:
			if store == "datastore-spanner" {
				lib, err = cutover.OpenDatastoreSpanner(ctx, c, path, cutover.Options{Migration: s.migration})
			} else {
				lib, err = cutover.OpenDatastore(ctx, c, path, cutover.Options{Migration: s.migration})
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(lib.Close)
		s.apps = append(s.apps, lib)
	}
	for i := range soakUsers {
		u := fmt.Sprintf("soak-%d", i)
		if s.cascade { // a CustomerId
			u = fmt.Sprint(1000 + i)
		}
		s.users = append(s.users, u)
	}
	return s
}

// rec is user's log seq with page.
// splitLogID is logID's user and seq.
func splitLogID(k string) (string, int64) {
	i := strings.LastIndexByte(k, '/')
	seq, _ := strconv.ParseInt(k[i+1:], 10, 64)
	return k[:i], seq
}

func (s *soak) rec(user string, seq int64, page string) record.Record {
	r := s.key(user, seq)
	r.Fields = append(r.Fields, record.Field{Name: "Page", Value: record.String(page)})
	return r
}

func (s *soak) setFaults(rate float64) {
	for i, tp := range s.taps {
		tp.SetFaults(committap.Faults{Rate: rate, Seed: s.seed*7 + uint64(i), Kinds: []committap.Fault{
			{Code: codes.Unavailable}, {Code: codes.Unavailable, Lost: true}, {Code: codes.Aborted},
		}})
	}
}

func (s *soak) run(t *testing.T, d time.Duration) {
	ctx := context.Background()
	s.start = time.Now()
	// Every record exists before the cutover, through the library (all
	// cohorts are old).
	for _, u := range s.users {
		for q := range int64(soakSeqs) {
			s.call(ctx, 0, u, q, 'w', fmt.Sprintf("seed-%s-%d", u, q))
		}
	}
	s.setFaults(*soakFaults)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Workers: each owns some users' records; every fourth user's records
	// are written by two workers on different instances.
	const workers = 4
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(s.seed, uint64(w)))
			n := 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				pick := func() string {
					for {
						i := rnd.IntN(len(s.users))
						if i%workers == w || i%4 == 0 && (i/4)%2 == w%2 {
							return s.users[i]
						}
					}
				}
				u := pick()
				q := int64(rnd.IntN(soakSeqs))
				inst := w % len(s.apps)
				switch x := rnd.Float64(); {
				case x < 0.38:
					n++
					s.call(ctx, inst, u, q, 'w', fmt.Sprintf("w%d-%d", w, n))
				case x < 0.45:
					// A batch of writes, as rekey load makes them: 2 to 5
					// records of this worker's users (a key may repeat).
					var b []soakWrite
					for range 2 + rnd.IntN(4) {
						n++
						b = append(b, soakWrite{u, q, fmt.Sprintf("w%d-%d", w, n)})
						u, q = pick(), int64(rnd.IntN(soakSeqs))
					}
					s.batch(ctx, inst, b)
				case x < 0.6:
					s.call(ctx, inst, u, q, 'd', "")
				default:
					s.call(ctx, inst, u, q, 'r', "")
				}
				time.Sleep(time.Duration(2+rnd.IntN(8)) * time.Millisecond)
			}
		}()
	}
	// Operators: two groups of cohorts.
	deadline := time.Now().Add(d)
	groups := [][]cohort.Range{{{First: 0, Last: 1}}, {{First: 2, Last: 3}}}
	opErrs := make([]error, len(groups))
	var owg sync.WaitGroup
	for g, rs := range groups {
		owg.Add(1)
		go func() {
			defer owg.Done()
			opErrs[g] = s.operate(ctx, g, rs, deadline)
		}()
	}
	owg.Wait()
	// The workload runs its whole time, after the operators too.
	time.Sleep(time.Until(deadline))
	close(stop)
	wg.Wait()
	s.setFaults(0)
	for g, err := range opErrs {
		if err != nil {
			t.Errorf("%s: operator of group %d: %v", s.name, g, err)
		}
	}
	s.check(t)
}

// call makes one application call and records it.
func (s *soak) call(ctx context.Context, inst int, user string, seq int64, kind byte, val string) {
	op := &soakOp{key: logID(user, seq), kind: kind, val: val, instance: inst}
	lib := s.apps[inst]
	op.phase = lib.Phases().Phase(cohort.Of(user, soakBuckets))
	op.inv = time.Now()
	var err error
	switch kind {
	case 'w':
		err = lib.Write(ctx, s.rec(user, seq, val))
	case 'd':
		err = lib.Delete(ctx, s.key(user, seq))
	case 'r':
		var got record.Record
		got, op.found, err = lib.Read(ctx, s.key(user, seq))
		if v, ok := got.Get("Page"); ok {
			op.val = v.Str
			op.fields = writtenFieldsDiff(got, s.key(user, seq))
		}
	}
	op.ret = time.Now()
	op.ok = err == nil
	if err != nil {
		op.err = err.Error()
	}
	s.mu.Lock()
	op.id = len(s.ops)
	s.ops = append(s.ops, op)
	s.mu.Unlock()
}

// soakWrite is one record of a batch of writes.
type soakWrite struct {
	user string
	seq  int64
	val  string
}

// batch writes b through the library's WriteBatch and records each
// record's write as an op of its own, invoked and returned with the
// batch.
func (s *soak) batch(ctx context.Context, inst int, b []soakWrite) {
	lib := s.apps[inst]
	ops := make([]*soakOp, len(b))
	recs := make([]record.Record, len(b))
	for i, r := range b {
		ops[i] = &soakOp{key: logID(r.user, r.seq), kind: 'w', val: r.val, instance: inst, phase: lib.Phases().Phase(cohort.Of(r.user, soakBuckets))}
		recs[i] = s.rec(r.user, r.seq, r.val)
	}
	inv := time.Now()
	errs := lib.WriteBatch(ctx, recs)
	ret := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, op := range ops {
		op.inv, op.ret, op.ok = inv, ret, errs[i] == nil
		if errs[i] != nil {
			op.err = errs[i].Error()
		}
		op.id = len(s.ops)
		s.ops = append(s.ops, op)
	}
}

// operate takes cohorts rs round the phases until deadline (from
// new_only a reverse backfill takes them back to dual_write; from
// read_new the seed rolls back one time in four), then on to done and a
// cleanup.
func (s *soak) operate(ctx context.Context, g int, rs []cohort.Range, deadline time.Time) error {
	rnd := rand.New(rand.NewPCG(s.seed, 100+uint64(g)))
	rules := phases.RulesFor(s.cfg)
	runner := pipeline.Runner{Runner: "direct"}
	opts := operator.CohortOptions{Migration: s.migration, Cohorts: rs, Who: "soak", Run: migration.Options{CreateTarget: true}}
	report := filepath.Join(os.TempDir(), fmt.Sprintf("%s-%d.jsonl", s.migration, g))
	defer os.Remove(report)
	move := func(to phases.Phase) error {
		_, _, err := s.phases.Move(ctx, phases.Move{Migration: s.migration, Buckets: soakBuckets, Cohorts: rs, To: to, Who: "soak", Rules: rules})
		s.event("group %d: move to %s: %v", g, to, err)
		return err
	}
	// The operator's last word must be after the deadline: it then drives
	// the cohorts forward only, to done.
	hardStop := deadline.Add(3 * time.Minute)
	for step := 0; ; step++ {
		if time.Now().After(hardStop) {
			return fmt.Errorf("cohorts %s did not reach done within 3 minutes of the workload's end", cohort.Format(rs))
		}
		late := time.Now().After(deadline)
		m, err := s.phases.Load(ctx, s.migration)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		sp := m.SpanOf(rs[0].First)
		held := time.Since(sp.Since) >= rules.DualWriteHold
		switch sp.Phase {
		case phases.Old:
			err = move(phases.DualWrite)
		case phases.DualWrite:
			if !held {
				time.Sleep(time.Until(sp.Since.Add(rules.DualWriteHold)))
				continue
			}
			_, _, _, err = operator.Backfill(ctx, s.cfg, opts, runner)
			s.event("group %d: backfill: %v", g, err)
		case phases.Backfilled:
			var rep []operator.VerifyCohort
			rep, _, _, err = operator.Verify(ctx, s.cfg, operator.VerifyOptions{Migration: s.migration, Cohorts: rs, ReportPath: report, Mark: true, Who: "soak"}, runner)
			s.event("group %d: verify --mark: %v (%s)", g, err, verifySummary(rep))
			if s.phaseOf(ctx, rs) == phases.Backfilled {
				_, _, err = operator.Repair(ctx, s.cfg, operator.RepairOptions{Migration: s.migration, Cohorts: rs, ReportPath: report, Who: "soak"}, runner)
				s.event("group %d: repair: %v", g, err)
			}
		case phases.Verified:
			if rnd.IntN(2) == 0 {
				err = move(phases.Shadow)
			} else {
				err = move(phases.ReadNew)
			}
		case phases.Shadow:
			err = move(phases.ReadNew)
		case phases.ReadNew:
			if !held {
				time.Sleep(time.Until(sp.Since.Add(rules.DualWriteHold)))
				continue
			}
			if sp.Prev == phases.NewOnly {
				// A reverse backfill moved the cohorts here from new_only
				// and did not finish (a fault): only it goes on from here.
				_, _, _, err = operator.Reverse(ctx, s.cfg, opts, runner)
				s.event("group %d: reverse backfill (again): %v", g, err)
				break
			}
			if !late && rnd.IntN(4) == 0 {
				err = move(phases.DualWrite)
				break
			}
			_, _, err = operator.Repair(ctx, s.cfg, operator.RepairOptions{Migration: s.migration, Cohorts: rs, ReportPath: report, Who: "soak"}, runner)
			s.event("group %d: repair: %v", g, err)
			if err == nil {
				err = move(phases.NewOnly)
			}
		case phases.NewOnly:
			if !held {
				time.Sleep(time.Until(sp.Since.Add(rules.DualWriteHold)))
				continue
			}
			// Before the deadline the cohorts go round again (a reverse
			// backfill, back to dual_write): a long soak keeps moving
			// them under the workload, and reaches done at its end.
			if !late {
				_, _, _, err = operator.Reverse(ctx, s.cfg, opts, runner)
				s.event("group %d: reverse backfill: %v", g, err)
				break
			}
			err = move(phases.Done)
		case phases.Done:
			_, _, _, err = operator.Cleanup(ctx, s.cfg, opts, runner)
			s.event("group %d: cleanup: %v", g, err)
			if err == nil {
				return nil
			}
		}
		if err != nil {
			// A fault, a refusal (entries to repair first), a move whose
			// response was lost: look again and go on.
			time.Sleep(200 * time.Millisecond)
		}
	}
}

func (s *soak) phaseOf(ctx context.Context, rs []cohort.Range) phases.Phase {
	m, err := s.phases.Load(ctx, s.migration)
	if err != nil {
		return ""
	}
	return m.Phase(rs[0].First)
}

func verifySummary(rep []operator.VerifyCohort) string {
	var parts []string
	for _, c := range rep {
		parts = append(parts, fmt.Sprintf("%+v", c))
	}
	s := strings.Join(parts, "; ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// check holds every read against the history, and new against it.
func (s *soak) check(t *testing.T) {
	byKey := map[string][]*soakOp{}
	calls, failed, stale := 0, 0, 0
	for _, op := range s.ops {
		byKey[op.key] = append(byKey[op.key], op)
		if user, seq := splitLogID(op.key); s.cascade && op.kind == 'd' && seq == 0 {
			// The parent's delete deletes its children, in the same
			// call: a delete of each, as acknowledged as it is.
			for c := int64(1); c < soakSeqs; c++ {
				k := logID(user, c)
				byKey[k] = append(byKey[k], &soakOp{id: op.id, key: k, kind: 'd', inv: op.inv, ret: op.ret, ok: op.ok, err: op.err, instance: op.instance, phase: op.phase, cascaded: true})
			}
		}
		calls++
		if !op.ok {
			failed++
		}
		if strings.Contains(op.err, cutover.ErrStalePhases.Error()) {
			stale++
		}
	}
	// Failed calls are the faults' (a write's authoritative commit) and
	// the phase cache's (stale phases: the refresh could not read the
	// store within the TTL while the jobs ran).
	t.Logf("%s: %d calls (%d failed, %d of them on stale phases), %d keys; %d operator steps", s.name, calls, failed, stale, len(byKey), len(s.events))
	for i, app := range s.apps {
		st := app.Stats()
		t.Logf("instance %d: redirected %d, fallbacks %d, switch waits %d, repairs %d, unrepaired %d, shadow mismatches %d (settled on a second look %d, awaiting repair %d), phase refreshes %d (%d failed)", i, st.Redirected, st.Fallbacks, st.SwitchWaits, st.Repairs, st.Unrepaired, st.ShadowMismatches, st.ShadowSettled, st.ShadowPending, st.Refreshes, st.RefreshErrors)
		if len(st.MismatchSamples) > 0 {
			t.Logf("instance %d: shadow mismatches: %q", i, st.MismatchSamples)
		}
	}
	steps := map[string]int{}
	for _, e := range s.events {
		what, _, _ := strings.Cut(e.what, ":")
		rest := strings.TrimPrefix(e.what, what+":")
		name, _, _ := strings.Cut(strings.TrimSpace(rest), ":")
		ok := strings.Contains(e.what, ": <nil>")
		steps[fmt.Sprintf("%s ok=%v", name, ok)]++
	}
	t.Logf("operator steps: %v", steps)
	if testing.Verbose() {
		for _, e := range s.events {
			t.Logf("  %8.3fs %s", e.at.Sub(s.start).Seconds(), trim(e.what, 300))
		}
	}
	violations := 0
	final := s.newPages(t)
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h := newSoakHistory(append([]*soakOp{soakAbsent(k)}, byKey[k]...))
		for _, r := range byKey[k] {
			if r.kind != 'r' || !r.ok {
				continue
			}
			why := h.judge(r)
			if r.fields != "" {
				why = fmt.Sprintf("read of %s returned other fields than every write of it has: %s", k, r.fields)
			}
			if why != "" {
				violations++
				if violations <= 3 {
					t.Errorf("%s: %s", s.name, why)
					s.printAround(t, byKey[k], r)
					s.printCommits(t, k, r)
				}
			}
		}
		v, found := final[k]
		if !h.finalOK(v, found) {
			violations++
			if violations <= 3 {
				t.Errorf("%s: at the end new holds %s for %s (%q, found %v); the history allows %s", s.name, k, k, v, found, h.finals())
				last := byKey[k][len(byKey[k])-1]
				s.printCommits(t, k, &soakOp{inv: last.inv, ret: time.Now()})
			}
		}
	}
	if violations > 0 {
		t.Errorf("%s: %d violations in all; reproduce with -run 'Soak' -soak_seed %d", s.name, violations, s.seed)
	}
	// The forensics must find what they look for: every key's first
	// write, through the library while every cohort was old, is a
	// commit of it in old; and the backfills and dual writes wrote some
	// of these keys in new.
	inNew := 0
	for _, k := range keys[:min(3, len(keys))] {
		first := byKey[k][0]
		old, new, err := s.soakKeyNeedles(k)
		if err != nil {
			t.Errorf("%s: forensics: %v", s.name, err)
			continue
		}
		if first.kind == 'w' && first.ok && len(s.commitsOf(old, s.start, first.ret.Add(time.Second))) == 0 {
			t.Errorf("%s: forensics: no commit of the taps names %s (keys %s), which was written at %s", s.name, k, strings.Join(old, ", "), first.ret.Sub(s.start))
		}
		inNew += len(s.commitsOf(new, s.start, time.Now()))
	}
	if inNew == 0 {
		t.Errorf("%s: forensics: no commit of the taps names the new key of %v", s.name, keys[:min(3, len(keys))])
	}
}

// printAround prints the key's history around op, and the operators'
// steps of that time.
func (s *soak) printAround(t *testing.T, ops []*soakOp, at *soakOp) {
	rel := func(x time.Time) string { return fmt.Sprintf("%8.3fs", x.Sub(s.start).Seconds()) }
	var lines []string
	for _, op := range ops {
		if op.inv.After(at.ret.Add(2*time.Second)) || op.ret.Before(at.inv.Add(-5*time.Second)) {
			continue
		}
		mark := " "
		if op == at {
			mark = ">"
		}
		res := op.val
		if op.kind == 'r' && !op.found {
			res = "(none)"
		}
		if op.cascaded {
			res = "(its parent's)"
		}
		lines = append(lines, fmt.Sprintf("%s %s..%s inst %d %-10s %c %-14s ok=%v %s", mark, rel(op.inv), rel(op.ret), op.instance, op.phase, op.kind, res, op.ok, trim(op.err, 120)))
	}
	for _, e := range s.events {
		if e.at.After(at.inv.Add(-5*time.Second)) && e.at.Before(at.ret.Add(2*time.Second)) {
			lines = append(lines, fmt.Sprintf("  %s operator: %s", rel(e.at), trim(e.what, 200)))
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i][2:11] < lines[j][2:11] })
	t.Logf("history of %s around the violation:\n%s", at.key, strings.Join(lines, "\n"))
}

// trim keeps the start and the end of s, n bytes in all (a job's error
// names its cause at the end, after the plan).
func trim(s string, n int) string {
	if len(s) > n {
		return s[:n/4] + " … " + s[len(s)-3*n/4:]
	}
	return s
}

// soakHistory is one key's writes (puts and deletes), with when each was
// superseded: the earliest completion of an acknowledged write invoked
// after it completed (from then on no read may return it).
type soakHistory struct {
	writes, reads []*soakOp
	supAt         map[*soakOp]time.Time
	// done are the successful reads that some write allows, by when they
	// completed, and floor[i] the latest of their earliest candidates'
	// invocations among done[:i+1]: what a read beginning after done[i]
	// completed must not be older than (monotonic).
	done  []*soakOp
	floor []time.Time
}

// soakAbsent is where every record's history starts: it does not exist,
// as if an acknowledged delete had ended before any call began. (The
// seeding puts every record through the library, but a seed write can
// fail, e.g. on stale phases while a loaded store answers the first
// phase reads slowly; a later read of nothing is then right.)
func soakAbsent(key string) *soakOp {
	return &soakOp{id: -1, key: key, kind: 'd', ok: true}
}

// never is a time after every call.
var never = time.Unix(1<<40, 0)

func newSoakHistory(ops []*soakOp) *soakHistory {
	h := &soakHistory{supAt: map[*soakOp]time.Time{}}
	for _, op := range ops {
		if op.kind != 'r' {
			h.writes = append(h.writes, op)
		} else {
			h.reads = append(h.reads, op)
		}
	}
	for _, w := range h.writes {
		at := never
		for _, w2 := range h.writes {
			if w2.ok && w2.inv.After(w.ret) && w2.ret.Before(at) {
				at = w2.ret
			}
		}
		h.supAt[w] = at
	}
	for _, r := range h.reads {
		if r.ok && len(h.candidates(r)) > 0 {
			h.done = append(h.done, r)
		}
	}
	sort.Slice(h.done, func(i, j int) bool { return h.done[i].ret.Before(h.done[j].ret) })
	var floor time.Time
	for _, r := range h.done {
		c := h.candidates(r)
		earliest := c[0].inv
		for _, w := range c {
			if w.inv.Before(earliest) {
				earliest = w.inv
			}
		}
		if earliest.After(floor) {
			floor = earliest
		}
		h.floor = append(h.floor, floor)
	}
	return h
}

// matches reports whether write w leaves what read r returned.
func matches(w, r *soakOp) bool {
	if w.kind == 'd' {
		return !r.found
	}
	return r.found && r.val == w.val
}

// candidates are the writes r may be returning: invoked before r
// completed, not superseded before r began, leaving what r returned.
func (h *soakHistory) candidates(r *soakOp) []*soakOp {
	var out []*soakOp
	for _, w := range h.writes {
		if w.inv.Before(r.ret) && !h.supAt[w].Before(r.inv) && matches(w, r) {
			out = append(out, w)
		}
	}
	return out
}

// judge returns why read r is not allowed by the history, "" when it is;
// r's earlier reads (completed before it began) bound it from below.
func (h *soakHistory) judge(r *soakOp) string {
	mine := h.candidates(r)
	res := fmt.Sprintf("%q", r.val)
	if !r.found {
		res = "nothing"
	}
	if len(mine) == 0 {
		return fmt.Sprintf("read %d of %s at %s returned %s, which no write allows: a stale value or a deleted record come back", r.id, r.key, r.phase, res)
	}
	latest := mine[0].ret
	for _, w := range mine {
		if w.ret.After(latest) {
			latest = w.ret
		}
	}
	return h.monotonic(r, latest, res)
}

// monotonic checks r (whose candidates completed by latest at the
// latest) against the reads that completed before it began: none may
// have returned a write that r's candidates all precede. (The floor of
// those reads is kept by newSoakHistory, so a read costs a binary search,
// not a pass over every earlier read and its candidates.)
func (h *soakHistory) monotonic(r *soakOp, latest time.Time, res string) string {
	n := sort.Search(len(h.done), func(i int) bool { return !h.done[i].ret.Before(r.inv) })
	if n == 0 || !latest.Before(h.floor[n-1]) {
		return ""
	}
	// Name the earlier read that sets the floor.
	for _, r1 := range h.done[:n] {
		c1 := h.candidates(r1)
		earliest := c1[0].inv
		for _, w := range c1 {
			if w.inv.Before(earliest) {
				earliest = w.inv
			}
		}
		if r1 != r && latest.Before(earliest) {
			return fmt.Sprintf("read %d of %s at %s returned %s, older than what read %d returned before it began (%q, found %v): a read went back in time", r.id, r.key, r.phase, res, r1.id, r1.val, r1.found)
		}
	}
	return ""
}

// finalOK reports whether new's final state of the key (v, found) is one
// the history allows: a write never superseded.
func (h *soakHistory) finalOK(v string, found bool) bool {
	end := &soakOp{val: v, found: found}
	for _, w := range h.writes {
		if h.supAt[w] == never && matches(w, end) {
			return true
		}
	}
	return false
}

func (h *soakHistory) finals() string {
	var out []string
	for _, w := range h.writes {
		if h.supAt[w] == never {
			if w.kind == 'd' {
				out = append(out, fmt.Sprintf("delete %d (ok %v)", w.id, w.ok))
			} else {
				out = append(out, fmt.Sprintf("%q (ok %v)", w.val, w.ok))
			}
		}
	}
	return strings.Join(out, ", ")
}

// The soak's checker flags what it is there to flag, and only that: a
// read of a superseded value, of a deleted record, one that goes back in
// time behind an earlier read, and a final state no write leaves; a read
// overlapping a write may return either side of it.
func TestSoakCheckerCatches(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(1000, int64(ms)*int64(time.Millisecond)) }
	id := 0
	op := func(kind byte, val string, found bool, inv, ret int) *soakOp {
		id++
		return &soakOp{id: id, key: "u/1", kind: kind, val: val, found: found, inv: at(inv), ret: at(ret), ok: true}
	}
	w1, w2 := op('w', "a", false, 0, 10), op('w', "b", false, 20, 30)
	del := op('d', "", false, 40, 50)
	for _, c := range []struct {
		name  string
		read  *soakOp
		extra []*soakOp
		bad   bool
	}{
		{"the latest write", op('r', "b", true, 32, 35), nil, false},
		{"a write overlapping the read", op('r', "b", true, 15, 25), nil, false},
		{"the value before an overlapping write", op('r', "a", true, 15, 25), nil, false},
		{"a superseded value", op('r', "a", true, 32, 35), nil, true},
		{"a deleted record", op('r', "b", true, 55, 60), nil, true},
		{"nothing after the delete", op('r', "", false, 55, 60), nil, false},
		{"a value never written", op('r', "z", true, 32, 35), nil, true},
		// Both reads overlap w2; the first returned b, so the second,
		// which began after it, must not return a.
		{"back in time", op('r', "a", true, 27, 29), []*soakOp{op('r', "b", true, 21, 26)}, true},
		{"either side, in order", op('r', "b", true, 27, 29), []*soakOp{op('r', "a", true, 21, 26)}, false},
	} {
		ops := append([]*soakOp{w1, w2, del}, c.extra...)
		ops = append(ops, c.read)
		h := newSoakHistory(ops)
		why := h.judge(c.read)
		if (why != "") != c.bad {
			t.Errorf("%s: judged %q, want a violation: %v", c.name, why, c.bad)
		}
	}
	h := newSoakHistory([]*soakOp{w1, w2, del})
	if !h.finalOK("", false) || h.finalOK("b", true) {
		t.Errorf("final state: after the delete only nothing is allowed")
	}
	// Every record starts absent: a read of nothing is right while its
	// only write failed (it may not have been applied), and wrong once a
	// write was acknowledged.
	failed := op('w', "s", false, 0, 10)
	failed.ok = false
	nothing := op('r', "", false, 20, 25)
	if why := newSoakHistory([]*soakOp{soakAbsent("u/1"), failed, nothing}).judge(nothing); why != "" {
		t.Errorf("nothing after a failed first write: judged %q, want no violation", why)
	}
	if why := newSoakHistory([]*soakOp{soakAbsent("u/1"), w1, nothing}).judge(nothing); why == "" {
		t.Errorf("nothing after an acknowledged first write: no violation")
	}
}
