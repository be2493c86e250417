package cutover_test

import (
	"context"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
)

// The demo's Customers with Orders interleaved in them, on both sides
// (old and new in two databases, so the tables keep their names); the
// migration bit-reverses CustomerId, in the children's keys too.
var customersDDL = []string{
	`CREATE TABLE Customers (CustomerId INT64 NOT NULL, Name STRING(MAX)) PRIMARY KEY (CustomerId)`,
	`CREATE TABLE Orders (CustomerId INT64 NOT NULL, OrderId INT64 NOT NULL, Note STRING(MAX)) PRIMARY KEY (CustomerId, OrderId), INTERLEAVE IN PARENT Customers ON DELETE CASCADE`,
}

// newCustomersEnv opens the library on Customers + Orders, cohort.user
// user (CustomerId routes a child as its parent).
func newCustomersEnv(t *testing.T, user string) (*spannerEnv, error) {
	return newCustomersEnvVia(t, user, "")
}

// newCustomersEnvVia is newCustomersEnv with the library's client of new
// going through the proxy at newVia ("" for none).
func newCustomersEnvVia(t *testing.T, user, newVia string) (*spannerEnv, error) {
	t.Helper()
	ctx := context.Background()
	oldC := emulator.TestDB(t, customersDDL...)
	newC := emulator.TestDB(t, append(append([]string(nil), customersDDL...), phases.SpannerDDL...)...)
	if newVia != "" {
		t.Setenv(emulator.EnvSpannerHost, newVia) // the library opens its client of new now
	}
	dbID := func(c *spanner.Client) string { return c.DatabaseName()[strings.LastIndex(c.DatabaseName(), "/")+1:] }
	path := filepath.Join(t.TempDir(), "rekey.yaml")
	yaml := fmt.Sprintf(`
source: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: Customers}
target: {type: spanner, project: %[1]s, instance: %[2]s, database: %[4]s, table: Customers}
interleaved: [Orders]
rewrite: {strategy: bitreverse}
cohort: {user: %[5]s}
`, emulator.SpannerProject(), emulator.SpannerInstance(), dbID(oldC), dbID(newC), user)
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	mig := fmt.Sprintf("customers-%d", time.Now().UnixNano())
	lib, err := cutover.OpenSpanner(ctx, oldC, path, cutover.Options{Migration: mig, CacheTTL: envTTL, Skew: envSkew})
	if err != nil {
		return nil, err
	}
	t.Cleanup(lib.Close)
	return &spannerEnv{lib: lib, old: oldC, new: newC, store: phases.SpannerStore{Client: newC}, migration: mig, configPath: path}, nil
}

func customer(id int64, name string) record.Record {
	return record.Record{Table: "Customers", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(id)}, {Name: "Name", Value: record.String(name)}}}
}

func order(id, n int64, note string) record.Record {
	r := orderKey(id, n)
	r.Fields = append(r.Fields, record.Field{Name: "Note", Value: record.String(note)})
	return r
}

func orderKey(id, n int64) record.Record {
	return record.Record{Table: "Orders", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(id)}, {Name: "OrderId", Value: record.Int(n)}}}
}

// rows returns "key=value" of a table's rows in c (Customers: id=Name;
// Orders: id/n=Note), CustomerId as stored.
func rows(t *testing.T, c *spanner.Client, table string) map[string]string {
	t.Helper()
	sql := "SELECT FORMAT('%d', CustomerId), Name FROM Customers"
	if table == "Orders" {
		sql = "SELECT FORMAT('%d/%d', CustomerId, OrderId), Note FROM Orders"
	}
	out := map[string]string{}
	err := c.Single().Query(context.Background(), spanner.Statement{SQL: sql}).Do(func(r *spanner.Row) error {
		var k string
		var v spanner.NullString
		if err := r.Columns(&k, &v); err != nil {
			return err
		}
		if !v.Valid {
			v.StringVal = "NULL"
		}
		out[k] = v.StringVal
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rev is CustomerId as new holds it (bitreverse, sign bit kept).
func rev(id int64) int64 { return int64(bits.Reverse64(uint64(id)) >> 1) }

// TestSpannerInterleaved routes Orders rows by their customer's cohort
// through the phases: in dual_write a new order reaches new with its
// customer's key written before it (new holds no customer until the
// backfill); a customer's delete deletes its orders on both sides and
// marks each, so a backfill that read one before does not bring it back,
// nor a read in read_new fall back to an old row the delete missed; reads
// of a child come back in old keys.
func TestSpannerInterleaved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := newCustomersEnv(t, "Name"); err == nil || !strings.Contains(err.Error(), "interleaved table Orders has no column Name") {
		t.Fatalf("cohort.user Name (not in Orders): %v, want a refusal naming the column", err)
	}
	e, err := newCustomersEnv(t, "CustomerId")
	if err != nil {
		t.Fatal(err)
	}
	const id = 7
	user := fmt.Sprint(id)
	put := func(recs ...record.Record) {
		t.Helper()
		for i, err := range e.lib.WriteBatch(ctx, recs) {
			if err != nil {
				t.Fatalf("write %s: %v", recs[i].Describe(), err)
			}
		}
	}
	put(customer(id, "ada"), order(id, 1, "one"), order(id, 2, "two"))
	if got := rows(t, e.new, "Orders"); len(got) != 0 {
		t.Fatalf("in old, new holds orders %v", got)
	}

	e.setPhase(t, user, phases.DualWrite)
	put(order(id, 3, "three"))
	nk := fmt.Sprint(rev(id))
	if got := rows(t, e.new, "Customers"); got[nk] != "NULL" || len(got) != 1 {
		t.Errorf("dual_write: new's customers %v, want %s's key alone (NULL name) before its order", got, nk)
	}
	if got := rows(t, e.new, "Orders"); got[nk+"/3"] != "three" || len(got) != 1 {
		t.Errorf("dual_write: new's orders %v, want %s/3 = three", got, nk)
	}
	// The backfill copies the customer and the orders it did not touch.
	time.Sleep(envTTL + envSkew)
	for _, r := range []record.Record{customer(id, "ada"), order(id, 1, "one"), order(id, 3, "stale")} {
		wrote, err := e.lib.BackfillRow(ctx, r)
		if err != nil {
			t.Fatalf("backfill %s: %v", r.Describe(), err)
		}
		if want := r.Table == "Customers" || r.Fields[1].Value.Int == 1; wrote != want {
			t.Errorf("backfill %s: wrote %v, want %v", r.Describe(), wrote, want)
		}
	}
	if got, found, err := e.lib.Read(ctx, orderKey(id, 3)); err != nil || !found || record.Diff(&got, ptr(order(id, 3, "three"))) != "" {
		t.Errorf("dual_write: read order 3: %s, %v, %v; want it as written, in old keys", got.Describe(), found, err)
	}

	// The customer's delete takes its orders on both sides.
	if err := e.lib.Delete(ctx, record.Record{Table: "Customers", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(id)}}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*spanner.Client{e.old, e.new} {
		if got := rows(t, c, "Orders"); len(got) != 0 {
			t.Errorf("after the customer's delete, %s holds orders %v", c.DatabaseName(), got)
		}
	}
	// A backfill that read order 2 before the delete skips it.
	if wrote, err := e.lib.BackfillRow(ctx, order(id, 2, "two")); err != nil || wrote {
		t.Errorf("backfill of order 2 after its customer's delete: wrote %v, %v; want skipped", wrote, err)
	}
	if got := rows(t, e.new, "Orders"); len(got) != 0 {
		t.Errorf("new holds orders %v after the skipped backfill", got)
	}

	// In read_new, an old row the delete missed (put back behind the
	// library's back) is not read through the fallback.
	e.setPhase(t, user, phases.ReadNew)
	if _, err := e.old.Apply(ctx, []*spanner.Mutation{
		spanner.Insert("Customers", []string{"CustomerId", "Name"}, []any{int64(id), "ada"}),
		spanner.Insert("Orders", []string{"CustomerId", "OrderId", "Note"}, []any{int64(id), int64(2), "two"}),
	}); err != nil {
		t.Fatal(err)
	}
	if got, found, err := e.lib.Read(ctx, orderKey(id, 2)); err != nil || found {
		t.Errorf("read_new: read of deleted order 2: %s, %v, %v; want none", got.Describe(), found, err)
	}
	// Written again: both sides, read back from new.
	put(customer(id, "bea"), order(id, 4, "four"))
	if got, found, err := e.lib.Read(ctx, orderKey(id, 4)); err != nil || !found || record.Diff(&got, ptr(order(id, 4, "four"))) != "" {
		t.Errorf("read_new: read order 4: %s, %v, %v", got.Describe(), found, err)
	}
	if got := rows(t, e.new, "Customers"); got[nk] != "bea" {
		t.Errorf("read_new: new's customers %v, want %s = bea", got, nk)
	}
}

// newCustomersEnvTapped is newCustomersEnv (user CustomerId) with the
// library's client of new going through a commit tap, which it returns.
func newCustomersEnvTapped(t *testing.T) (*spannerEnv, *committap.Tap) {
	t.Helper()
	emulator.RequireSpanner(t)
	tap, err := committap.Start(os.Getenv(emulator.EnvSpannerHost))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tap.Close)
	e, err := newCustomersEnvVia(t, "CustomerId", tap.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return e, tap
}

// TestSpannerInterleavedMissedDelete: a customer's delete in dual_write
// whose second write (new's) fails leaves new holding the customer and
// its orders; the repair-log entry marks every order behind too, so reads
// in read_new go to old, which took the delete, for the customer and for
// each order.
func TestSpannerInterleavedMissedDelete(t *testing.T) {
	ctx := context.Background()
	e, tap := newCustomersEnvTapped(t)
	const id = 11
	user := fmt.Sprint(id)
	e.setPhase(t, user, phases.DualWrite)
	for i, err := range e.lib.WriteBatch(ctx, []record.Record{customer(id, "ada"), order(id, 1, "one"), order(id, 2, "two")}) {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	tap.SetFaults(committap.Faults{Rate: 1, Kinds: []committap.Fault{{Code: codes.PermissionDenied}}, Tables: []string{"Customers"}})
	if err := e.lib.Delete(ctx, record.Record{Table: "Customers", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(id)}}}); err != nil {
		t.Fatalf("delete with new failing: %v, want success (old took it)", err)
	}
	tap.SetFaults(committap.Faults{})
	if got := rows(t, e.new, "Orders"); len(got) != 2 {
		t.Fatalf("new holds orders %v, want the two the failed delete left", got)
	}
	var behind int64
	if err := e.new.Single().Query(ctx, spanner.Statement{SQL: "SELECT COUNT(*) FROM RekeyTouched WHERE Migration = @m AND Behind = 'new'", Params: map[string]any{"m": e.migration}}).
		Do(func(r *spanner.Row) error { return r.Columns(&behind) }); err != nil {
		t.Fatal(err)
	}
	if behind != 3 {
		t.Errorf("%d marks say new is behind, want 3 (the customer and its two orders)", behind)
	}
	e.setPhase(t, user, phases.ReadNew)
	for _, k := range []record.Record{orderKey(id, 1), orderKey(id, 2), {Table: "Customers", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(id)}}}} {
		if got, found, err := e.lib.Read(ctx, k); err != nil || found {
			t.Errorf("read_new: read of %s after its delete: %s, %v, %v; want none", k.Describe(), got.Describe(), found, err)
		}
	}
	if st := e.lib.Stats(); st.Redirected < 3 {
		t.Errorf("%d reads redirected to old, want 3", st.Redirected)
	}
}

// TestSpannerInterleavedChildOfMissedParent: a customer's write in
// dual_write whose second write (new's) fails leaves new without the
// customer (new's backfill has not copied it), and its mark says new is
// behind. In read_new an order of that customer is written new first:
// the library writes the customer's key columns in new with it (the mark
// still sends reads of the customer to old, which holds it whole), where
// Spanner alone would refuse the order for want of its parent. An order
// of a customer that does not exist anywhere is still refused.
func TestSpannerInterleavedChildOfMissedParent(t *testing.T) {
	ctx := context.Background()
	e, tap := newCustomersEnvTapped(t)
	const id, none = 13, 14
	e.setPhase(t, fmt.Sprint(id), phases.DualWrite)
	e.setPhase(t, fmt.Sprint(none), phases.DualWrite)
	tap.SetFaults(committap.Faults{Rate: 1, Kinds: []committap.Fault{{Code: codes.PermissionDenied}}, Tables: []string{"Customers"}})
	if err := e.lib.Write(ctx, customer(id, "ada")); err != nil {
		t.Fatalf("write with new failing: %v, want success (old took it)", err)
	}
	tap.SetFaults(committap.Faults{})
	if got := rows(t, e.new, "Customers"); len(got) != 0 {
		t.Fatalf("new holds customers %v, want none", got)
	}
	e.setPhase(t, fmt.Sprint(id), phases.ReadNew)
	e.setPhase(t, fmt.Sprint(none), phases.ReadNew)
	if err := e.lib.Write(ctx, order(id, 1, "one")); err != nil {
		t.Fatalf("read_new: write of an order of a customer new missed: %v", err)
	}
	if got := rows(t, e.new, "Orders"); got[fmt.Sprintf("%d/1", rev(id))] != "one" {
		t.Errorf("new's orders %v, want %d/1 = one", got, rev(id))
	}
	if got := rows(t, e.new, "Customers"); got[fmt.Sprint(rev(id))] != "NULL" || len(got) != 1 {
		t.Errorf("new's customers %v, want the key alone (Name NULL) of %d", got, rev(id))
	}
	got, found, err := e.lib.Read(ctx, record.Record{Table: "Customers", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(id)}}})
	if name, _ := got.Get("Name"); err != nil || !found || name.Str != "ada" {
		t.Errorf("read_new: read of the customer = %s, %v, %v; want old's (Name ada)", got.Describe(), found, err)
	}
	if err := e.lib.Write(ctx, order(none, 1, "x")); err == nil {
		t.Errorf("read_new: an order of a customer that exists nowhere was written")
	}
	if got := rows(t, e.new, "Customers"); len(got) != 1 {
		t.Errorf("new's customers %v after the refused order, want only %d", got, rev(id))
	}

	// A customer written in both, then deleted in dual_write with new's
	// delete failing: old lacks it, new has no row of it either (its
	// write had missed new too), and the mark says new is behind. An
	// order of it is refused in read_new as it would be in one store:
	// a placeholder would have the order acknowledged, and the repair's
	// delete of the customer in new would then cascade to it.
	const gone = 15
	e.setPhase(t, fmt.Sprint(gone), phases.DualWrite)
	tap.SetFaults(committap.Faults{Rate: 1, Kinds: []committap.Fault{{Code: codes.PermissionDenied}}, Tables: []string{"Customers"}})
	if err := e.lib.Write(ctx, customer(gone, "bo")); err != nil {
		t.Fatalf("write with new failing: %v, want success (old took it)", err)
	}
	if err := e.lib.Delete(ctx, record.Record{Table: "Customers", Fields: []record.Field{{Name: "CustomerId", Value: record.Int(gone)}}}); err != nil {
		t.Fatalf("delete with new failing: %v, want success (old took it)", err)
	}
	tap.SetFaults(committap.Faults{})
	e.setPhase(t, fmt.Sprint(gone), phases.ReadNew)
	if err := e.lib.Write(ctx, order(gone, 1, "y")); err == nil {
		t.Errorf("read_new: an order of a customer deleted in old (new missed the delete) was written")
	}
	if got := rows(t, e.new, "Customers"); got[fmt.Sprint(rev(gone))] != "" || len(got) != 1 {
		t.Errorf("new's customers %v after the refused order, want only %d", got, rev(id))
	}
}

// TestSpannerBackfillChildOfGoneParent: a cohort backfill's commit of an
// Orders row whose customer new lacks, as when the application's delete
// of the customer reached old (taking the order with it) and its second
// half, with the order's mark, has not reached new yet. While old is
// authoritative the row is skipped and counted; the others of its batch
// are written. In read_new (a repair of the log) new's refusal stands.
func TestSpannerBackfillChildOfGoneParent(t *testing.T) {
	ctx := context.Background()
	e, err := newCustomersEnv(t, "CustomerId")
	if err != nil {
		t.Fatal(err)
	}
	orders, err := spannerdb.ReadTable(ctx, e.new, "Orders")
	if err != nil {
		t.Fatal(err)
	}
	const kept, gone = 21, 22
	if _, err := e.new.Apply(ctx, []*spanner.Mutation{spanner.Insert("Customers", []string{"CustomerId", "Name"}, []any{rev(kept), "ada"})}); err != nil {
		t.Fatal(err)
	}
	newOrder := func(id, n int64) spannerdb.Row {
		r := order(rev(id), n, fmt.Sprintf("%d/%d", id, n))
		return spannerdb.Row{Record: &r}
	}
	b := func(p phases.Phase) phases.Backfill {
		return phases.Backfill{Migration: e.migration, Spans: []phases.BackfillSpan{{First: 0, Last: 1 << 30, Phase: p, Since: time.Now().Add(-time.Minute)}}}
	}
	skipped, err := operator.SpannerBackfill(e.new, orders, b(phases.DualWrite))(ctx, []spannerdb.Row{newOrder(kept, 1), newOrder(gone, 1), newOrder(kept, 2)})
	if err != nil || skipped != 1 {
		t.Fatalf("dual_write: backfill of two orders and one whose customer new lacks: %d skipped, %v; want 1, nil", skipped, err)
	}
	want := map[string]string{fmt.Sprintf("%d/1", rev(kept)): "21/1", fmt.Sprintf("%d/2", rev(kept)): "21/2"}
	if got := rows(t, e.new, "Orders"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("new's orders %v, want %v", got, want)
	}
	if got := rows(t, e.new, "Customers"); len(got) != 1 {
		t.Errorf("new's customers %v, want only %d (no placeholder)", got, rev(kept))
	}
	_, err = operator.SpannerBackfill(e.new, orders, b(phases.ReadNew))(ctx, []spannerdb.Row{newOrder(gone, 2)})
	if spanner.ErrCode(err) != codes.NotFound {
		t.Errorf("read_new: repair of an order whose customer new lacks: %v, want NotFound", err)
	}
}

// TestSpannerReverseOneMutationAKey: a reverse backfill reads a record
// from both stores, so a batch can hold a key twice. Its commit writes
// the key once, as new holds it: were one of the two deleted before the
// other was written, the customer's delete would take its orders in old
// with it (ON DELETE CASCADE), and an order the copy does not carry
// (written after it read its rows) would be lost.
func TestSpannerReverseOneMutationAKey(t *testing.T) {
	ctx := context.Background()
	e, err := newCustomersEnv(t, "CustomerId")
	if err != nil {
		t.Fatal(err)
	}
	const id = 31
	for _, side := range []struct {
		c  *spanner.Client
		id int64
	}{{e.old, id}, {e.new, rev(id)}} {
		if _, err := side.c.Apply(ctx, []*spanner.Mutation{
			spanner.Insert("Customers", []string{"CustomerId", "Name"}, []any{side.id, "ada"}),
			spanner.Insert("Orders", []string{"CustomerId", "OrderId", "Note"}, []any{side.id, int64(1), "one"}),
		}); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.LoadFile(e.configPath)
	if err != nil {
		t.Fatal(err)
	}
	job, err := migration.Resolve(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := operator.ReverseFor(job)
	if err != nil {
		t.Fatal(err)
	}
	customers, err := spannerdb.ReadTable(ctx, e.old, "Customers")
	if err != nil {
		t.Fatal(err)
	}
	commit, err := operator.SpannerReverse(ctx, e.old, e.new, customers, r)
	if err != nil {
		t.Fatal(err)
	}
	a, b := customer(id, "ada"), customer(id, "ada")
	if deleted, err := commit(ctx, []spannerdb.Row{{Record: &a}, {Record: &b}}); err != nil || deleted != 0 {
		t.Errorf("reverse commit of a customer twice: %d deleted, %v; want 0, nil", deleted, err)
	}
	if got := rows(t, e.old, "Orders"); got["31/1"] != "one" {
		t.Errorf("old's orders after the reverse commit %v, want 31/1 = one (kept)", got)
	}
	if got := rows(t, e.old, "Customers"); got["31"] != "ada" {
		t.Errorf("old's customers after the reverse commit %v, want 31 = ada", got)
	}
}
