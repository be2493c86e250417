package integration

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/record"
)

// The demo's Customers with Orders interleaved in them (a Note column
// added to Orders, for the application's values), as old holds them; new,
// another database, holds the same tables under bit-reversed
// CustomerIds.
var stagedCustomersDDL = []string{
	`CREATE TABLE Customers (CustomerId INT64 NOT NULL, Name STRING(MAX), Email STRING(MAX), Since TIMESTAMP) PRIMARY KEY (CustomerId)`,
	`CREATE TABLE Orders (CustomerId INT64 NOT NULL, OrderId INT64 NOT NULL, Total FLOAT64, Items INT64, Note STRING(MAX)) PRIMARY KEY (CustomerId, OrderId), INTERLEAVE IN PARENT Customers ON DELETE CASCADE`,
}

// TestStagedBackfillInterleaved backfills every cohort of the demo's
// Customers + Orders (bitreverse on CustomerId, the user id) while an
// application writes orders, renames customers and deletes customers
// with their orders through the library: afterwards new holds exactly
// what old holds, mapped through the rewrite — no order lost, none of a
// deleted customer brought back, none whose parent new lacks.
func TestStagedBackfillInterleaved(t *testing.T) {
	ctx := context.Background()
	e, oldC, newC := newStagedCustomers(t, true)
	lib := e.app
	// 60 customers with 4 orders each, in old.
	const customers, orders = 60, 4
	var ms []*spanner.Mutation
	for c := int64(1); c <= customers; c++ {
		ms = append(ms, spanner.Insert("Customers", []string{"CustomerId", "Name"}, []any{c, fmt.Sprint("c", c)}))
		for o := int64(1); o <= orders; o++ {
			ms = append(ms, spanner.Insert("Orders", []string{"CustomerId", "OrderId", "Items", "Note"}, []any{c, o, o, "seed"}))
		}
	}
	if _, err := oldC.Apply(ctx, ms); err != nil {
		t.Fatal(err)
	}
	// The target's manifest first: the emulator refuses a schema change
	// while the application's transactions run.
	j, err := migration.Resolve(ctx, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Prepare(ctx, migration.Options{CreateTarget: true}); err != nil {
		t.Fatal(err)
	}
	all := []cohort.Range{{First: 0, Last: stagedBuckets - 1}}
	e.move(t, all, phases.DualWrite)
	waitHold()

	// The application, until the backfill is done: new orders, renamed
	// customers, and customers deleted with their orders (some written
	// again afterwards), each customer by one worker.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var fails []string
	calls := 0
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), 3))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				// Each worker its own customers: concurrent calls on one
				// record may leave the stores apart until a repair (see
				// package phases' doc, "Missed writes"), which this test does not run.
				c := int64(1 + w + 3*rnd.IntN(customers/3))
				var err error
				switch r := rnd.IntN(10); {
				case r < 5:
					err = lib.WriteBatch(ctx, []record.Record{
						{Table: "Customers", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(c)}, {Name: "Name", Value: record.String(fmt.Sprintf("w%d-%d", w, n))}}},
						{Table: "Orders", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(c)}, {Name: "OrderId", Value: record.Int(int64(1 + rnd.IntN(orders+2)))}, {Name: "Note", Value: record.String(fmt.Sprintf("w%d-%d", w, n))}}},
					})[1]
				case r < 8:
					// An order alone: its customer may be gone, which old refuses.
					err = lib.Write(ctx, record.Record{Table: "Orders", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(c)}, {Name: "OrderId", Value: record.Int(int64(1 + rnd.IntN(orders+2)))}, {Name: "Note", Value: record.String(fmt.Sprintf("o%d-%d", w, n))}}})
					if err != nil && isParentMissing(err) {
						err = nil
					}
				default:
					err = lib.Delete(ctx, record.Record{Table: "Customers", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(c)}}})
				}
				mu.Lock()
				calls++
				if err != nil && len(fails) < 10 {
					fails = append(fails, err.Error())
				}
				mu.Unlock()
			}
		}()
	}
	res, _, err := e.backfill(t, cohortRunner, all, false)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("backfill: %v", err)
	}
	t.Logf("backfill: %s; %d application calls", res.Counters, calls)
	for _, f := range fails {
		t.Errorf("application call: %s", f)
	}

	// What old holds, mapped through the rewrite, is what new holds.
	query := func(c *spanner.Client, sql string) map[string]string {
		t.Helper()
		out := map[string]string{}
		err := c.Single().Query(ctx, spanner.Statement{SQL: sql}).Do(func(r *spanner.Row) error {
			var k string
			var v spanner.NullString
			if err := r.Columns(&k, &v); err != nil {
				return err
			}
			out[k] = v.StringVal
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, q := range []struct{ table, old, new string }{
		{"Customers", "SELECT FORMAT('%d', BIT_REVERSE(CustomerId, true)), Name FROM Customers", "SELECT FORMAT('%d', CustomerId), Name FROM Customers"},
		{"Orders", "SELECT FORMAT('%d/%d', BIT_REVERSE(CustomerId, true), OrderId), Note FROM Orders", "SELECT FORMAT('%d/%d', CustomerId, OrderId), Note FROM Orders"},
	} {
		want, got := query(oldC, q.old), query(newC, q.new)
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s %s: new holds %q (present %v), old %q", q.table, k, g, ok, v)
			}
		}
		for k, v := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s %s: new holds %q, old holds nothing (deleted)", q.table, k, v)
			}
		}
		t.Logf("%s: %d rows in old, %d in new", q.table, len(want), len(got))
	}
}

// newStagedCustomers makes the env of the demo's Customers (with Orders
// interleaved when interleaved) from one database to another, the library
// open on it and the target prepared (its manifest: the emulator refuses
// a schema change while the application's transactions run).
func newStagedCustomers(t *testing.T, interleaved bool) (*stagedEnv, *spanner.Client, *spanner.Client) {
	t.Helper()
	ctx := context.Background()
	oldC := emulator.TestDB(t, stagedCustomersDDL...)
	newC := emulator.TestDB(t, append(append([]string(nil), stagedCustomersDDL...), phases.SpannerDDL...)...)
	children := ""
	if interleaved {
		children = "interleaved: [Orders]"
	}
	yaml := fmt.Sprintf(`
source: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: Customers}
target: {type: spanner, project: %[1]s, instance: %[2]s, database: %[4]s, table: Customers}
%[9]s
rewrite: {strategy: bitreverse}
dead_letter: %[5]s
cohort: {user: CustomerId, buckets: %[6]d, cache_ttl: %[7]s, skew: %[8]s}
`, emulator.SpannerProject(), emulator.SpannerInstance(), dbID(oldC), dbID(newC), filepath.Join(t.TempDir(), "dead.jsonl"), stagedBuckets, stagedTTL, stagedSkew, children)
	e := &stagedEnv{store: "spanner", migration: fmt.Sprintf("customers-%d", time.Now().UnixNano()), phases: phases.SpannerStore{Client: newC}}
	e.cfg, e.configPath = loadYAML(t, yaml), writeConfig(t, yaml)
	lib, err := cutover.OpenSpanner(ctx, oldC, e.configPath, cutover.Options{Migration: e.migration})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lib.Close)
	e.app = lib
	j, err := migration.Resolve(ctx, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Prepare(ctx, migration.Options{CreateTarget: true}); err != nil {
		t.Fatal(err)
	}
	return e, oldC, newC
}

// TestStagedVerifyRewrittenUser verifies cohorts of a migration whose
// user id column is itself rewritten (Customers, bitreverse on
// CustomerId): verify must find a new row's user in its old key, not in
// the bit-reversed value new holds, and push no cohort filter into new's
// query on that column.
func TestStagedVerifyRewrittenUser(t *testing.T) {
	ctx := context.Background()
	e, oldC, _ := newStagedCustomers(t, false)
	const customers = 40
	var ms []*spanner.Mutation
	for c := int64(1); c <= customers; c++ {
		ms = append(ms, spanner.Insert("Customers", []string{"CustomerId", "Name"}, []any{c, fmt.Sprint("c", c)}))
	}
	if _, err := oldC.Apply(ctx, ms); err != nil {
		t.Fatal(err)
	}
	all := []cohort.Range{{First: 0, Last: stagedBuckets - 1}}
	e.move(t, all, phases.DualWrite)
	waitHold()
	if _, _, err := e.backfill(t, cohortRunner, all, false); err != nil {
		t.Fatal(err)
	}
	// Half the cohorts: a filter or a cohort taken from new's reversed
	// ids would select other rows.
	half := []cohort.Range{{First: 0, Last: stagedBuckets/2 - 1}}
	want := 0
	for c := int64(1); c <= customers; c++ {
		if cohortOf(fmt.Sprint(c)) < stagedBuckets/2 {
			want++
		}
	}
	by, _, err := e.verify(t, half, true)
	if err != nil {
		t.Fatalf("verify --mark: %v", err)
	}
	matched := 0
	for c, v := range by {
		if !v.Clean() {
			t.Errorf("cohort %d: %+v, want clean", c, v)
		}
		matched += v.Matching
	}
	if matched != want {
		t.Errorf("verify matched %d customers, want %d (those of cohorts %s)", matched, want, cohort.Format(half))
	}
}

// isParentMissing reports the error of a child written where its parent
// is missing.
func isParentMissing(err error) bool {
	return strings.Contains(err.Error(), "not found in parent table")
}

// TestStagedCleanupInterleaved cleans up cohorts of the demo's Customers
// + Orders (forced: they are not done): the cohorts' customers go from
// old with their orders (ON DELETE CASCADE), the other cohorts' stay.
func TestStagedCleanupInterleaved(t *testing.T) {
	ctx := context.Background()
	e, oldC, _ := newStagedCustomers(t, true)
	const customers, orders = 30, 3
	seedCustomers(t, oldC, customers, orders)
	half := []cohort.Range{{First: 0, Last: stagedBuckets/2 - 1}}
	_, res, _, err := operator.Cleanup(ctx, e.cfg, operator.CohortOptions{Migration: e.migration, Cohorts: half, Force: true, Who: "test"}, pipeline.Runner{Runner: cohortRunner})
	if err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	count := func(sql string) map[int64]int {
		out := map[int64]int{}
		err := oldC.Single().Query(ctx, spanner.Statement{SQL: sql}).Do(func(r *spanner.Row) error {
			var id int64
			if err := r.Columns(&id); err != nil {
				return err
			}
			out[id]++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	left, leftOrders := count("SELECT CustomerId FROM Customers"), count("SELECT CustomerId FROM Orders")
	gone := 0
	for c := int64(1); c <= customers; c++ {
		in := cohortOf(fmt.Sprint(c)) < stagedBuckets/2
		if in {
			gone++
		}
		if want := map[bool]int{true: 0, false: 1}[in]; left[c] != want || leftOrders[c] != want*orders {
			t.Errorf("customer %d (cohort %d, cleaned %v): old holds %d rows and %d orders", c, cohortOf(fmt.Sprint(c)), in, left[c], leftOrders[c])
		}
	}
	if gone == 0 || gone == customers {
		t.Fatalf("%d of %d customers in the cleaned cohorts: the test needs some of each", gone, customers)
	}
	t.Logf("cleanup: %s; %d customers (and their orders) gone", res.Counters, gone)
}

// TestStagedVerifyInterleaved verifies and repairs cohorts of the demo's
// Customers + Orders (bitreverse on CustomerId): after the backfill a
// verify of half the cohorts matches each of their customers and orders;
// then new is changed behind the library's back — an order deleted, a
// customer renamed, an order no customer in old has — and verify reports
// each (missing, mismatched, extra), repair puts them right, and a
// verify --mark is clean.
func TestStagedVerifyInterleaved(t *testing.T) {
	ctx := context.Background()
	e, oldC, newC := newStagedCustomers(t, true)
	const customers, orders = 40, 3
	seedCustomers(t, oldC, customers, orders)
	half := []cohort.Range{{First: 0, Last: stagedBuckets/2 - 1}}
	e.move(t, half, phases.DualWrite)
	waitHold()
	if _, _, err := e.backfill(t, cohortRunner, half, false); err != nil {
		t.Fatal(err)
	}
	var mine []int64 // the customers of the verified cohorts
	for c := int64(1); c <= customers; c++ {
		if cohortOf(fmt.Sprint(c)) < stagedBuckets/2 {
			mine = append(mine, c)
		}
	}
	if len(mine) < 3 {
		t.Fatalf("%d customers in cohorts %s, the test needs 3", len(mine), cohort.Format(half))
	}
	sum := func(by map[int]operator.VerifyCohort) (v operator.VerifyCohort) {
		for _, c := range by {
			v.Matching += c.Matching
			v.Missing += c.Missing
			v.Extra += c.Extra
			v.Mismatched += c.Mismatched
		}
		return v
	}
	by, _, err := e.verify(t, half, false)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if got := sum(by); got.Matching != len(mine)*(1+orders) || got.Missing+got.Extra+got.Mismatched != 0 {
		t.Fatalf("verify after the backfill: %+v, want %d matching (%d customers with %d orders each) and nothing else", got, len(mine)*(1+orders), len(mine), orders)
	}

	// New changed behind the library's back.
	a, b, c := rev(mine[0]), rev(mine[1]), rev(mine[2])
	if _, err := newC.Apply(ctx, []*spanner.Mutation{
		spanner.Delete("Orders", spanner.Key{a, int64(1)}),
		spanner.Update("Customers", []string{"CustomerId", "Name"}, []any{b, "changed"}),
		spanner.Insert("Orders", []string{"CustomerId", "OrderId", "Note"}, []any{c, int64(99), "extra"}),
	}); err != nil {
		t.Fatal(err)
	}
	by, _, err = e.verify(t, half, true)
	if !errors.Is(err, operator.ErrNotClean) {
		t.Fatalf("verify --mark of a changed new: %v, want not clean", err)
	}
	if got := sum(by); got.Missing != 1 || got.Mismatched != 1 || got.Extra != 1 {
		t.Errorf("verify of a changed new: %+v, want 1 missing, 1 mismatched, 1 extra", got)
	}
	if _, _, err := operator.Repair(ctx, e.cfg, operator.RepairOptions{Migration: e.migration, Cohorts: half, ReportPath: filepath.Join(t.TempDir(), "repair.jsonl"), Who: "test"}, pipeline.Runner{Runner: cohortRunner}); err != nil {
		t.Fatalf("repair: %v", err)
	}
	if by, _, err = e.verify(t, half, true); err != nil {
		t.Fatalf("verify --mark after the repair: %v (%+v)", err, sum(by))
	}
}

// rev is a CustomerId as new holds it (bitreverse, the sign kept).
func rev(id int64) int64 { return int64(bits.Reverse64(uint64(id)) >> 1) }

// stagedInterleavedDDL is the demo's Customers with Orders interleaved,
// each with the Page column the simulated application writes.
var stagedInterleavedDDL = []string{
	`CREATE TABLE Customers (CustomerId INT64 NOT NULL, Name STRING(MAX), Email STRING(MAX), Since TIMESTAMP, Page STRING(MAX)) PRIMARY KEY (CustomerId)`,
	`CREATE TABLE Orders (CustomerId INT64 NOT NULL, OrderId INT64 NOT NULL, Total FLOAT64, Items INT64, Page STRING(MAX)) PRIMARY KEY (CustomerId, OrderId), INTERLEAVE IN PARENT Customers ON DELETE CASCADE`,
}

// newStagedInterleaved is the end-to-end test's env of the demo's
// Customers + Orders (bitreverse on CustomerId, the user id), old and new
// in two databases, the library's client of new through a commit tap:
// a user's log seq 0 is its customer row, seq n its order n.
func newStagedInterleaved(t *testing.T) *stagedEnv {
	t.Helper()
	ctx := context.Background()
	oldC := emulator.TestDB(t, stagedInterleavedDDL...)
	newC := emulator.TestDB(t, append(append([]string(nil), stagedInterleavedDDL...), phases.SpannerDDL...)...)
	yaml := interleavedConfig(oldC, newC, filepath.Join(t.TempDir(), "dead.jsonl"), stagedBuckets, stagedTTL, stagedSkew)
	e := &stagedEnv{store: "spanner", migration: fmt.Sprintf("customers-%d", time.Now().UnixNano()), phases: phases.SpannerStore{Client: newC}, cascade: true}
	e.cfg, e.configPath = loadYAML(t, yaml), writeConfig(t, yaml)
	j, err := migration.Resolve(ctx, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Prepare(ctx, migration.Options{CreateTarget: true}); err != nil {
		t.Fatal(err)
	}
	tap, err := committap.Start(os.Getenv(emulator.EnvSpannerHost))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tap.Close)
	t.Setenv(emulator.EnvSpannerHost, tap.Addr())
	e.tap, e.faultTables = tap, []string{"Customers", "Orders"}
	lib, err := cutover.OpenSpanner(ctx, oldC, e.configPath, cutover.Options{Migration: e.migration})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lib.Close)
	e.app = lib
	e.users = func(_ string, i int) string { return fmt.Sprint(1000 + i) }
	id := func(user string) int64 { return customerID(t, user) }
	e.key = func(user string, seq int64) record.Record { return interleavedKey(t, user, seq) }
	e.putOld = func(t *testing.T, recs ...record.Record) {
		t.Helper()
		var ms []*spanner.Mutation
		for _, r := range recs {
			c, _ := r.Get("CustomerId")
			p, _ := r.Get("Page")
			if o, ok := r.Get("OrderId"); ok {
				ms = append(ms, spanner.InsertOrUpdate("Orders", []string{"CustomerId", "OrderId", "Page"}, []any{c.Int, o.Int, p.Str}))
			} else {
				ms = append(ms, spanner.InsertOrUpdate("Customers", []string{"CustomerId", "Page"}, []any{c.Int, p.Str}))
			}
		}
		if _, err := oldC.Apply(ctx, ms); err != nil {
			t.Fatal(err)
		}
	}
	e.deleteOld = func(t *testing.T, user string, seq int64) {
		t.Helper()
		m := spanner.Delete("Customers", spanner.Key{id(user)})
		if seq > 0 {
			m = spanner.Delete("Orders", spanner.Key{id(user), seq})
		}
		if _, err := oldC.Apply(ctx, []*spanner.Mutation{m}); err != nil {
			t.Fatal(err)
		}
	}
	e.oldPages, e.newPages = interleavedPages(oldC, "CustomerId"), interleavedPages(newC, "BIT_REVERSE(CustomerId, true)")
	return e
}

// seedCustomers writes customers 1..customers to old, each with orders
// 1..orders.
func seedCustomers(t *testing.T, oldC *spanner.Client, customers, orders int64) {
	t.Helper()
	var ms []*spanner.Mutation
	for c := int64(1); c <= customers; c++ {
		ms = append(ms, spanner.Insert("Customers", []string{"CustomerId", "Name"}, []any{c, fmt.Sprint("c", c)}))
		for o := int64(1); o <= orders; o++ {
			ms = append(ms, spanner.Insert("Orders", []string{"CustomerId", "OrderId", "Note"}, []any{c, o, "seed"}))
		}
	}
	if _, err := oldC.Apply(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
}

// customerID is user as a CustomerId.
func customerID(t *testing.T, user string) int64 {
	n, err := strconv.ParseInt(user, 10, 64)
	if err != nil {
		t.Fatalf("user %q is not a CustomerId", user)
	}
	return n
}

// interleavedKey is user's log seq as a key of the interleaved shape: its
// Customers row (seq 0) or its Orders row OrderId seq.
func interleavedKey(t *testing.T, user string, seq int64) record.Record {
	if seq == 0 {
		return record.Record{Table: "Customers", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(customerID(t, user))}}}
	}
	return record.Record{Table: "Orders", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(customerID(t, user))}, {Name: "OrderId", Value: record.Int(seq)}}}
}

// interleavedPages reads every Customers and Orders row of c's database
// ("user/seq" → page; a customer is seq 0, an order its OrderId), the
// user id the SQL expression id of CustomerId (new's keys are rewritten).
func interleavedPages(c *spanner.Client, id string) func(t *testing.T) map[string]string {
	return func(t *testing.T) map[string]string {
		t.Helper()
		out := map[string]string{}
		sql := fmt.Sprintf("SELECT %[1]s, 0, Page FROM Customers UNION ALL SELECT %[1]s, OrderId, Page FROM Orders", id)
		err := c.Single().Query(context.Background(), spanner.Statement{SQL: sql}).Do(func(r *spanner.Row) error {
			var u, q int64
			var p spanner.NullString
			if err := r.Columns(&u, &q, &p); err != nil {
				return err
			}
			out[logID(fmt.Sprint(u), q)] = p.StringVal
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
}

// interleavedConfig is the staged migration of the demo's Customers with
// Orders interleaved (bitreverse on CustomerId, the user id) from oldC's
// database to newC's.
func interleavedConfig(oldC, newC *spanner.Client, dead string, buckets int, ttl, skew time.Duration) string {
	return fmt.Sprintf(`
source: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: Customers}
target: {type: spanner, project: %[1]s, instance: %[2]s, database: %[4]s, table: Customers}
interleaved: [Orders]
rewrite: {strategy: bitreverse}
dead_letter: %[5]s
cohort: {user: CustomerId, buckets: %[6]d, cache_ttl: %[7]s, skew: %[8]s}
`, emulator.SpannerProject(), emulator.SpannerInstance(), dbID(oldC), dbID(newC), dead, buckets, ttl, skew)
}
