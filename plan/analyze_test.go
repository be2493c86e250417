package plan_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rekeyio/rekey/internal/testkit/golden"
	"github.com/rekeyio/rekey/plan"
	"github.com/rekeyio/rekey/plan/keys"
	"github.com/rekeyio/rekey/plan/rules"
	"github.com/rekeyio/rekey/rewrite"
)

// epoch is the first timestamp of the synthetic keys.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// rng is a fixed random source, so the synthetic keys and the golden
// file's evidence are the same on every run.
func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// part is a Spanner key value as the plan sink records it.
func part(v rewrite.Value) keys.Part {
	switch v.Type {
	case rewrite.TypeInt64:
		return keys.Part{Kind: "int", Int: v.Int, Text: strconv.FormatInt(v.Int, 10)}
	case rewrite.TypeTimestamp:
		return keys.Part{Kind: "time", Int: v.Time.UnixNano(), Text: v.Time.Format(time.RFC3339Nano)}
	}
	return keys.Part{Kind: "string", Text: v.Str}
}

// spanner is a Spanner key of vals in its encoding, text and parts.
type spanner []rewrite.Value

func (vals spanner) enc() []byte { return rewrite.AppendSpannerKey(nil, rewrite.KeySchema{}, vals) }

func (vals spanner) text() string {
	ts := make([]string, len(vals))
	for i, v := range vals {
		ts[i] = part(v).Text
	}
	return "(" + strings.Join(ts, ", ") + ")"
}

// old is a sampled record whose source key is vals.
func (vals spanner) old() keys.Key {
	return keys.Key{Old: vals.enc(), OldText: vals.text(), First: part(vals[0]), Columns: len(vals), Bytes: 100}
}

// new is a sampled record whose target key is vals.
func (vals spanner) new() keys.Key {
	k := keys.Key{New: vals.enc(), NewText: vals.text(), Bytes: 100}
	for _, v := range vals {
		k.NewParts = append(k.NewParts, part(v))
	}
	return k
}

// entity is a sampled record whose source key is a Datastore key of one
// element of kind, with the id or the name.
func entity(kind string, id int64, name string) keys.Key {
	e := rewrite.PathElement{Kind: kind, ID: id, Name: name}
	k := rewrite.DatastoreKey{Path: []rewrite.PathElement{e}}
	p := keys.Part{Kind: "int", Int: id, Text: strconv.FormatInt(id, 10), Datastore: true}
	if e.IsName() {
		p = keys.Part{Kind: "string", Text: name, Datastore: true}
	}
	return keys.Key{Old: rewrite.AppendDatastoreKey(nil, k), OldText: k.String(), First: p, Columns: 1, Bytes: 100}
}

// times makes n keys, the ith from f(i).
func times(n int, f func(i int) keys.Key) []keys.Key {
	ks := make([]keys.Key, n)
	for i := range ks {
		ks[i] = f(i)
	}
	return ks
}

// v1 is a version-1 UUID of time t (100 ns since 1582-10-15) and a fixed
// clock sequence and node.
func v1(t uint64) string {
	return fmt.Sprintf("%08x-%04x-1%03x-8a1b-0242ac120002", uint32(t), uint16(t>>32), uint16(t>>48)&0xfff)
}

type analyzeCase struct {
	name string
	side plan.Side
	want []string // the rules found, sorted
}

// analyzeCases are synthetic sides of 1,000 keys (fewer where the
// pattern needs fewer), each showing one pattern of package rules, and
// clean ones showing none.
func analyzeCases() []analyzeCase {
	const n = 1000
	r := rng(1)
	var cs []analyzeCase
	add := func(name string, side plan.Side, want ...string) {
		slices.Sort(want)
		cs = append(cs, analyzeCase{name, side, want})
	}

	// (LastAccess, UserId): inserts come in LastAccess order. The first
	// time is on the second and the next half a second later, whose text
	// sorts before it ("…00.5Z" < "…00Z"): the span is read from the times.
	add("timestamp first", plan.OldSide(times(n, func(i int) keys.Key {
		t := epoch.Add(time.Duration(i) * 500 * time.Millisecond)
		return spanner{rewrite.Timestamp(t), rewrite.String(fmt.Sprintf("u%d", r.IntN(1e6)))}.old()
	}), "UserAccessLogs", "LastAccess", false, 0.01), rules.TimestampFirst)

	// 1,000 of ids 1..100,000 (a 1% sample): a counter's values.
	ids := r.Perm(100_000)[:n]
	add("dense INT64 sequence, 1% sample", plan.OldSide(times(n, func(i int) keys.Key {
		return spanner{rewrite.Int64(int64(ids[i] + 1))}.old()
	}), "Events", "Id", false, 0.01), rules.MonotonicKey)

	add("Customer1..N names", plan.OldSide(times(600, func(i int) keys.Key {
		return entity("Customer", 0, fmt.Sprintf("Customer%d", i+1))
	}), "Customer", "", true, 1), rules.SequentialNames, rules.CommonPrefix)

	// Random positive ids and names, a few ids ≤ 0 and names with '/'.
	add("Datastore ids ≤ 0 and names with '/'", plan.OldSide(times(300, func(i int) keys.Key {
		switch {
		case i == 17:
			return entity("Item", -5, "")
		case i == 40:
			return entity("Item", 0, "")
		case i%50 == 3:
			return entity("Item", 0, fmt.Sprintf("%x/%x", r.Uint32(), r.Uint32()))
		case i%2 == 0:
			return entity("Item", 1+r.Int64N(1<<52), "")
		}
		return entity("Item", 0, fmt.Sprintf("%x", r.Uint64()))
	}), "Item", "", true, 1), rules.NonPositiveID, rules.SlashInName)

	// Sessions created over a year: time_low wraps every 7 minutes, so
	// the UUIDs share no prefix, but they are version 1.
	add("UUID v1 names", plan.OldSide(times(n, func(i int) keys.Key {
		t := uint64(0x1f0_0000_0000_0000) + uint64(r.Int64N(365*24*3600*1e7))
		return spanner{rewrite.String(v1(t))}.old()
	}), "Sessions", "SessionId", false, 1), rules.UUIDv1)

	add("long common prefix", plan.OldSide(times(n, func(i int) keys.Key {
		return spanner{rewrite.String(fmt.Sprintf("/tenants/acme/docs/%016x", r.Uint64()))}.old()
	}), "Docs", "Path", false, 1), rules.CommonPrefix)

	statuses := []string{"NEW", "PAID", "SHIPPED", "DONE"}
	add("low-cardinality first of 2 key columns", plan.OldSide(times(n, func(i int) keys.Key {
		return spanner{rewrite.String(statuses[r.IntN(len(statuses))]), rewrite.Int64(r.Int64())}.old()
	}), "Orders", "Status", false, 1), rules.LowCardinalityFirst)

	add("keys over 2 KB", plan.OldSide(times(n, func(i int) keys.Key {
		name := fmt.Sprintf("%016x", r.Uint64())
		if i%100 == 0 {
			name += strings.Repeat(name, 128+i/100) // 2,064 to 2,208 bytes
		}
		return spanner{rewrite.String(name)}.old()
	}), "Blobs", "Name", false, 1), rules.LongKey)

	add("5 key columns", plan.OldSide(times(n, func(i int) keys.Key {
		return spanner{rewrite.Int64(r.Int64()), rewrite.Int64(r.Int64()), rewrite.Int64(1), rewrite.Int64(2), rewrite.Int64(int64(i))}.old()
	}), "Metrics", "A", false, 1), rules.ManyKeyColumns)

	// Ids far apart (not a dense sequence) handed out in creation order.
	add("key order follows a timestamp", plan.OldSide(times(n, func(i int) keys.Key {
		k := spanner{rewrite.Int64(int64(i)*1000 + r.Int64N(1000))}.old()
		t := epoch.Add(time.Duration(i) * time.Minute)
		k.Time, k.TimeField = &t, "Created"
		return k
	}), "Events", "Id", false, 1), rules.MonotonicKey)

	// The same ids' records created in no relation to the ids, and the
	// rewritten side of a hashprefix rewrite (hash, then the old key):
	// nothing to find.
	add("clean: key order unrelated to the timestamp", plan.OldSide(times(n, func(i int) keys.Key {
		k := spanner{rewrite.Int64(int64(i)*1000 + r.Int64N(1000))}.old()
		t := epoch.Add(time.Duration(r.IntN(n)) * time.Minute)
		k.Time, k.TimeField = &t, "Created"
		return k
	}), "Events", "Id", false, 1))
	add("clean: hash-prefixed keys", plan.NewSide(times(n, func(i int) keys.Key {
		id := fmt.Sprintf("user%d", i+1)
		k := spanner{rewrite.String(fmt.Sprintf("%04x-%s", r.Uint32()&0xffff, id)), rewrite.String(id)}.new()
		t := epoch.Add(time.Duration(i) * time.Minute)
		k.Time, k.TimeField = &t, "Created"
		return k
	}), "Users", "Hash", false, 1))
	uuids := rng(2)
	add("clean: UUID v4 names", plan.NewSide(times(n, func(i int) keys.Key {
		u := uuid.Must(uuid.NewRandomFromReader(randReader{uuids}))
		k := rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Session", Name: u.String()}}}
		return keys.Key{New: rewrite.AppendDatastoreKey(nil, k), NewText: k.String(), Columns: 1,
			NewParts: []keys.Part{{Kind: "string", Text: u.String(), Datastore: true}}}
	}), "Session", "", true, 1))

	// A shard column first: 3 values by design (the node count), so not
	// low-cardinality; the same keys without the shard column named are.
	sharded := times(n, func(i int) keys.Key {
		return spanner{rewrite.Int64(int64(i % 3)), rewrite.String(fmt.Sprintf("%x", r.Uint64()))}.new()
	})
	shard := plan.NewSide(sharded, "Logs", "ShardId", false, 1)
	shard.ShardColumn = "shardid"
	add("clean: shard column first", shard)
	add("the same keys, ShardId not the rewrite's shard column", plan.NewSide(sharded, "Logs", "ShardId", false, 1), rules.LowCardinalityFirst)
	return cs
}

// randReader reads random bytes from r.
type randReader struct{ r *rand.Rand }

func (r randReader) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte(r.r.Uint32())
	}
	return len(b), nil
}

// findingsText is findings as the golden file holds them.
func findingsText(fs []rules.Finding) string {
	if len(fs) == 0 {
		return "  (no findings)\n"
	}
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "  %s %s [%s]: %s\n", f.Severity, f.Subject, f.Rule, f.Evidence)
	}
	return b.String()
}

// TestAnalyzeGolden checks each synthetic side's findings: the rules
// found, and their evidence against testdata/analyze.golden (go test
// ./plan -run TestAnalyzeGolden -update-golden rewrites it).
func TestAnalyzeGolden(t *testing.T) {
	var out strings.Builder
	for _, c := range analyzeCases() {
		fs := plan.Analyze(c.side)
		var got []string
		for _, f := range fs {
			got = append(got, f.Rule)
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: rules %v, want %v:\n%s", c.name, got, c.want, findingsText(fs))
		}
		fmt.Fprintf(&out, "%s (%s):\n%s", c.name, c.side.Name, findingsText(fs))
	}
	golden.Check(t, filepath.Join("testdata", "analyze.golden"), out.String())
}

// The span of a timestamp-first key is read from the times, not their
// text: RFC 3339 text of times within one second does not sort by time.
func TestAnalyzeTimestampSpan(t *testing.T) {
	ks := times(10, func(i int) keys.Key {
		return spanner{rewrite.Timestamp(epoch.Add(time.Duration(i) * 100 * time.Millisecond))}.old()
	})
	fs := plan.Analyze(plan.OldSide(ks, "T", "At", false, 1))
	want := "from 2026-01-01T00:00:00Z to 2026-01-01T00:00:00.9Z"
	if len(fs) != 1 || fs[0].Rule != rules.TimestampFirst || !strings.Contains(fs[0].Evidence, want) {
		t.Errorf("findings:\n%s want one %s saying %q", findingsText(fs), rules.TimestampFirst, want)
	}
}

// The timestamp-first finding's fix names the side's key columns.
func TestAnalyzeTimestampFirstFixNamesTheKey(t *testing.T) {
	ks := times(10, func(i int) keys.Key {
		return spanner{rewrite.Timestamp(epoch.Add(time.Duration(i) * time.Second)), rewrite.String(fmt.Sprint(i))}.old()
	})
	side := plan.OldSide(ks, "Events", "EventTime", false, 1)
	side.Key = []string{"EventTime", "EventId"}
	fs := plan.Analyze(side)
	want := "(EventTime, EventId) → (EventId, EventTime)"
	if len(fs) != 1 || fs[0].Rule != rules.TimestampFirst || !strings.Contains(fs[0].Fix, want) {
		t.Errorf("findings:\n%s want one %s whose fix says %q", findingsText(fs), rules.TimestampFirst, want)
	}
}

func TestAnalyzeNoKeys(t *testing.T) {
	if fs := plan.Analyze(plan.OldSide(nil, "T", "Id", false, 1)); fs != nil {
		t.Errorf("findings of no keys: %v", fs)
	}
}

// Keys that grow with the order of their file's lines — time-ordered
// text ids such as ULIDs — are monotonic by read order, though no single
// detector of their values sees it; shuffled in the file they are not,
// and keys from several files are not judged by it.
func TestAnalyzeReadOrder(t *testing.T) {
	const n = 500
	mk := func(pos func(i int) int64, file func(i int) string) []keys.Key {
		ks := make([]keys.Key, n)
		for i := range ks {
			id := fmt.Sprintf("01H%07X%s", i*7919, strings.Repeat("Z", 3))
			ks[i] = keys.Key{Table: "T", Old: []byte(id), OldText: id, First: keys.Part{Kind: "string", Text: id}, Columns: 1, File: file(i), Pos: pos(i)}
		}
		return ks
	}
	one := func(int) string { return "events.jsonl" }
	rng := rand.New(rand.NewPCG(3, 4))
	perm := rng.Perm(n)
	for _, tc := range []struct {
		name string
		ks   []keys.Key
		want bool
	}{
		{"in file order", mk(func(i int) int64 { return int64(i) * 40 }, one), true},
		{"shuffled in the file", mk(func(i int) int64 { return int64(perm[i]) * 40 }, one), false},
		{"from two files", mk(func(i int) int64 { return int64(i) * 40 }, func(i int) string { return fmt.Sprint("part-", i%2) }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := plan.Analyze(plan.OldSide(tc.ks, "T", "Id", false, 1))
			got := false
			for _, f := range fs {
				got = got || f.Rule == rules.MonotonicKey && strings.Contains(f.Evidence, "order of the records in")
			}
			if got != tc.want {
				t.Errorf("read-order finding %v, want %v: %+v", got, tc.want, fs)
			}
		})
	}
}
