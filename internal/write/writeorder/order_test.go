package writeorder

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 7)) }

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		n, rows int
		want    string
	}{
		{0, 5, "[]"},
		{1, 5, "[[0 1]]"},
		{5, 5, "[[0 5]]"},
		{6, 5, "[[0 3] [3 6]]"},
		{11, 5, "[[0 4] [4 8] [8 11]]"},
		{1001, 500, "[[0 334] [334 668] [668 1001]]"},
		{3, 0, "[[0 1] [1 2] [2 3]]"},
	} {
		if got := fmt.Sprint(Cut(tc.n, tc.rows)); got != tc.want {
			t.Errorf("Cut(%d, %d) = %s, want %s", tc.n, tc.rows, got, tc.want)
		}
	}
	// Every cut covers 0..n in order, in batches of at most rows that
	// differ in size by at most one.
	for n := 1; n < 400; n += 7 {
		for _, rows := range []int{1, 3, 10, 64, 500} {
			cuts := Cut(n, rows)
			lo, hi, at := n, 0, 0
			for _, c := range cuts {
				if c[0] != at || c[1] <= c[0] {
					t.Fatalf("Cut(%d, %d) = %v: not contiguous", n, rows, cuts)
				}
				at = c[1]
				lo, hi = min(lo, c[1]-c[0]), max(hi, c[1]-c[0])
			}
			if at != n || hi > rows || hi-lo > 1 || len(cuts) != (n+rows-1)/rows {
				t.Fatalf("Cut(%d, %d) = %v", n, rows, cuts)
			}
		}
	}
}

func TestOrderIsARandomPermutation(t *testing.T) {
	for n := range 300 {
		got := Order(n, rng(uint64(n)).Float64())
		s := slices.Clone(got)
		slices.Sort(s)
		for i, v := range s {
			if v != i {
				t.Fatalf("Order(%d) = %v: not a permutation of 0..%d", n, got, n-1)
			}
		}
		if len(s) != n {
			t.Fatalf("Order(%d) has %d elements", n, len(s))
		}
	}
	// Deterministic for a phase, different across phases, and every batch
	// can come first, about equally often for a random phase.
	if a, b := Order(100, 0.3), Order(100, 0.3); !slices.Equal(a, b) {
		t.Error("Order differs for the same phase")
	}
	if a, b := Order(100, 0.3), Order(100, 0.7); slices.Equal(a, b) {
		t.Error("Order is the same for two phases")
	}
	first := map[int]int{}
	r := rng(1)
	for range 4000 {
		first[Order(20, r.Float64())[0]]++
	}
	for b := range 20 {
		if first[b] < 100 || first[b] > 350 {
			t.Errorf("batch %d came first %d times in 4000 orders, want about 200", b, first[b])
		}
	}
}

// busiestRun is the busiest of 16 equal slices of 0..n-1 over every run of
// c consecutive entries of order, as a multiple of the fair share c/16.
func busiestRun(order []int, n, c int) float64 {
	worst := 0.0
	for start := 0; start+c <= len(order); start += c / 2 {
		var counts [16]int
		for _, b := range order[start : start+c] {
			counts[b*16/n]++
		}
		worst = max(worst, float64(slices.Max(counts[:]))/(float64(c)/16))
	}
	return worst
}

// TestOrderIsEven: every run of 64 consecutive batches of 1,000 hits each
// sixteenth of the key range 4 ± 1 times; a uniformly random order puts
// twice as many in some sixteenth.
func TestOrderIsEven(t *testing.T) {
	const n, c = 1000, 64
	worstPlanned, worstShuffled := 0.0, 0.0
	for seed := range uint64(20) {
		worstPlanned = max(worstPlanned, busiestRun(Order(n, rng(seed).Float64()), n, c))
		perm := rng(seed).Perm(n)
		worstShuffled = max(worstShuffled, busiestRun(perm, n, c))
	}
	t.Logf("busiest sixteenth over runs of %d batches: planned order %.2fx, uniform shuffle %.2fx", c, worstPlanned, worstShuffled)
	if worstPlanned > 1.5 {
		t.Errorf("planned order: a run of %d batches puts %.2fx its share in one sixteenth, want at most 1.5x", c, worstPlanned)
	}
	if worstShuffled < 2 {
		t.Errorf("uniform shuffle: %.2fx; the comparison is meant to show clumps", worstShuffled)
	}
}

func intRecord(table string, cols ...any) record.Record {
	r := record.Record{Table: table}
	for i := 0; i < len(cols); i += 2 {
		var v record.Value
		switch x := cols[i+1].(type) {
		case int:
			v = record.Int(int64(x))
		case string:
			v = record.String(x)
		case time.Time:
			v = record.Time(x)
		}
		r.Fields = append(r.Fields, record.Field{Name: cols[i].(string), Value: v})
	}
	return r
}

func TestKeyerSpanner(t *testing.T) {
	k, err := NewKeyer(Options{Store: record.Spanner, Key: "CustomerId INT64, Day STRING(10) DESC",
		Children: map[string]string{"Orders": "CustomerId INT64, Day STRING(10) DESC, OrderId INT64"}})
	if err != nil {
		t.Fatal(err)
	}
	recs := []record.Record{
		intRecord("Customers", "CustomerId", 2, "Day", "b"),
		intRecord("orders", "OrderId", 1, "Day", "a", "CustomerId", 2), // child, any case, columns in any order
		intRecord("Customers", "CustomerId", 2, "Day", "a"),
		intRecord("Customers", "Day", "x", "CustomerId", 1),
		intRecord("Customers", "CustomerId", "10", "Day", "a"), // a string converted to INT64
		intRecord("Customers", "Day", "z"),                     // no key column: sorts first
		intRecord("Customers", "CustomerId", "x1", "Day", "a"), // not an INT64: sorts first
		intRecord("Orders", "CustomerId", 2, "Day", "a", "OrderId", 0),
	}
	items := make([]Item, len(recs))
	for i := range recs {
		items[i] = Item{Key: k.Append(nil, &recs[i]), Rec: recs[i]}
	}
	Sort(items)
	var got []string
	for _, it := range items {
		got = append(got, it.Rec.Describe())
	}
	want := []string{
		`Customers(Day="z")`,
		`Customers(CustomerId="x1", Day="a")`,
		`Customers(Day="x", CustomerId=1)`,
		`Customers(CustomerId=2, Day="b")`, // DESC
		`Customers(CustomerId=2, Day="a")`,
		`Orders(CustomerId=2, Day="a", OrderId=0)`, // children right after their parent
		`orders(OrderId=1, Day="a", CustomerId=2)`,
		`Customers(CustomerId="10", Day="a")`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("sorted:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestKeyerDatastore(t *testing.T) {
	k, err := NewKeyer(Options{Store: record.Datastore})
	if err != nil {
		t.Fatal(err)
	}
	key := func(path ...rewrite.PathElement) *rewrite.DatastoreKey { return &rewrite.DatastoreKey{Path: path} }
	recs := []record.Record{
		{Key: key(rewrite.PathElement{Kind: "C", Name: "a"})},
		{Key: key(rewrite.PathElement{Kind: "C", ID: 10})},
		{Key: key(rewrite.PathElement{Kind: "C", ID: 9}, rewrite.PathElement{Kind: "O", ID: 1})},
		{Key: key(rewrite.PathElement{Kind: "C", ID: 9})},
		{},
	}
	items := make([]Item, len(recs))
	for i := range recs {
		items[i] = Item{Key: k.Append(nil, &recs[i]), Rec: recs[i]}
	}
	Sort(items)
	var got []string
	for _, it := range items {
		got = append(got, it.Rec.Describe())
	}
	want := []string{"()", "C:9", "C:9/O:1", "C:10", `C:"a"`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("sorted %q, want %q", got, want)
	}
}

func idItems(ids []int) []Item {
	k, _ := NewKeyer(Options{Store: record.Spanner, Key: "Id INT64"})
	items := make([]Item, len(ids))
	for i, id := range ids {
		r := intRecord("T", "Id", id, "V", i)
		items[i] = Item{Key: k.Append(nil, &r), Rec: r}
	}
	return items
}

func idOf(r record.Record) int64 { v, _ := r.Get("Id"); return v.Int }

// TestPlan: every record once, batches of at most rows that are
// contiguous runs of the sorted records, equal keys in arrival order, the
// same plan for the same seed.
func TestPlan(t *testing.T) {
	r := rng(3)
	ids := make([]int, 1003)
	for i := range ids {
		ids[i] = r.IntN(800) // some repeated
	}
	plan := func(seed uint64) [][]record.Record { return Plan(idItems(ids), 50, rng(seed).Float64()) }
	batches := plan(9)
	if fmt.Sprint(batches) != fmt.Sprint(plan(9)) {
		t.Error("two plans with one phase differ")
	}
	if fmt.Sprint(batches) == fmt.Sprint(plan(10)) {
		t.Error("two phases give the same plan")
	}
	if len(batches) != 21 {
		t.Errorf("%d batches, want 21", len(batches))
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	var firsts []int64
	seen := map[int64]int{}
	for _, b := range batches {
		if len(b) > 50 || len(b) < 47 {
			t.Errorf("batch of %d records", len(b))
		}
		for i, rec := range b {
			id := idOf(rec)
			if i > 0 && id < idOf(b[i-1]) {
				t.Fatalf("batch not sorted: %v", b)
			}
			v, _ := rec.Get("V")
			seen[v.Int]++
		}
		firsts = append(firsts, idOf(b[0]))
	}
	if len(seen) != len(ids) {
		t.Errorf("%d distinct records planned, want %d", len(seen), len(ids))
	}
	if slices.IsSorted(firsts) {
		t.Error("batches are written in key order")
	}
	// Concatenated in key order, the batches are the sorted input, and
	// equal keys keep their arrival order (V increasing).
	slices.SortFunc(batches, func(a, b []record.Record) int { return int(idOf(a[0]) - idOf(b[0])) })
	var all []record.Record
	for _, b := range batches {
		all = append(all, b...)
	}
	for i, rec := range all {
		if idOf(rec) != int64(sorted[i]) {
			t.Fatalf("record %d has id %d, want %d", i, idOf(rec), sorted[i])
		}
		if i > 0 && idOf(rec) == idOf(all[i-1]) {
			v0, _ := all[i-1].Get("V")
			v1, _ := rec.Get("V")
			if v1.Int < v0.Int {
				t.Fatalf("equal keys out of arrival order at %d", i)
			}
		}
	}
}

// TestDeal: every shard gets an even share of every part of the key
// range, in key order; each record's shard is uniformly random.
func TestDeal(t *testing.T) {
	ids := make([]int, 16_003)
	for i := range ids {
		ids[i] = i
	}
	items := idItems(ids)
	shards := Deal(items, 16, rng(1))
	total := 0
	for s, recs := range shards {
		total += len(recs)
		if len(recs) < 1000 || len(recs) > 1001 {
			t.Errorf("shard %d holds %d records, want 1000 or 1001", s, len(recs))
		}
		for i := 1; i < len(recs); i++ {
			if idOf(recs[i]) < idOf(recs[i-1]) {
				t.Fatalf("shard %d out of key order", s)
			}
		}
		// Every sixteenth of the key range: 62 or 63 records of each shard.
		var counts [16]int
		for _, r := range recs {
			counts[idOf(r)*16/int64(len(ids))]++
		}
		if slices.Min(counts[:]) < 61 || slices.Max(counts[:]) > 64 {
			t.Errorf("shard %d: per sixteenth of the key range %v", s, counts)
		}
	}
	if total != len(ids) {
		t.Errorf("%d records dealt, want %d", total, len(ids))
	}
	if fmt.Sprint(Deal(items[:50], 4, rng(5))) != fmt.Sprint(Deal(items[:50], 4, rng(5))) {
		t.Error("Deal differs for one seed")
	}
	// DealBy deals the same: each item's id in the shard Deal gave its
	// record.
	ids5 := DealBy(items[:50], 4, rng(5), func(it *Item) int64 { return idOf(it.Rec) })
	for s, recs := range Deal(items[:50], 4, rng(5)) {
		for i, r := range recs {
			if ids5[s][i] != idOf(r) {
				t.Fatalf("DealBy put %d at shard %d, place %d; Deal %d", ids5[s][i], s, i, idOf(r))
			}
		}
	}
	// Where record 0 goes: uniform over 8 shards.
	where := map[int]int{}
	for seed := range uint64(8000) {
		for s, recs := range Deal(items[:20], 8, rng(seed)) {
			if len(recs) > 0 && idOf(recs[0]) == 0 {
				where[s]++
			}
		}
	}
	for s := range 8 {
		if where[s] < 850 || where[s] > 1150 {
			t.Errorf("record 0 went to shard %d %d times in 8000 deals, want about 1000", s, where[s])
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Store: record.Spanner, Key: "Id INT64"}, ""},
		{Options{Store: record.Datastore}, ""},
		{Options{Store: "bigtable"}, `store "bigtable": want spanner or datastore`},
		{Options{Store: record.Spanner}, "key: required"},
		{Options{Store: record.Spanner, Key: "Id"}, `key: key column 1 "Id"`},
		{Options{Store: record.Spanner, Key: "Id INT64", Children: map[string]string{"C": "X"}}, "children[C]"},
		{Options{Store: record.Datastore, Key: "Id INT64"}, "only for a spanner target"},
		{Options{Store: record.Datastore, Shards: -1}, "shards -1: want 1..65536"},
		{Options{Store: record.Datastore, Buffer: 2_000_000}, "buffer 2000000: want 1..1000000"},
		{Options{Store: record.Datastore, Buffer: 100}, "batch_rows 500: more than the buffer (100) can sort"},
		{Options{Store: record.Datastore, BatchRows: -5}, "batch_rows -5: want at least 1"},
	} {
		err := tc.o.WithDefaults().Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.o, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want %q", tc.o, err, tc.want)
		}
	}
	o := Options{}.WithDefaults()
	if o.Shards != DefaultShards || o.Buffer != DefaultBuffer || o.BatchRows != DefaultBatchRows {
		t.Errorf("defaults %+v", o)
	}
	for _, tc := range []struct {
		total int64
		want  int
	}{{0, 1}, {2_000, 1}, {20_000, 3}, {50_000, 7}, {100_000, 13}, {128_000, 17}, {200_000, 26}, {10_000_000, 1251}} {
		if got := o.ShardKeys(tc.total); got != tc.want {
			t.Errorf("ShardKeys(%d) = %d, want %d", tc.total, got, tc.want)
		}
	}
}
