package rewrite_test

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	farm "github.com/dgryski/go-farm"

	"github.com/rekeyio/rekey/rewrite"
)

func mustNew(t testing.TB, name string, p rewrite.Params, steps ...rewrite.StepConfig) rewrite.Strategy {
	t.Helper()
	s, err := rewrite.New(rewrite.StepConfig{Strategy: name, Params: p, Steps: steps})
	if err != nil {
		t.Fatalf("New(%s, %v): %v", name, p, err)
	}
	return s
}

func mustSchema(t testing.TB, spec string) rewrite.KeySchema {
	t.Helper()
	s, err := rewrite.ParseKeySchema("T", spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustBind(t testing.TB, s rewrite.Strategy, spec string) *rewrite.SpannerRewriter {
	t.Helper()
	r, err := s.Spanner(mustSchema(t, spec))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func rewriteOne(t testing.TB, r *rewrite.SpannerRewriter, key ...rewrite.Value) []rewrite.Value {
	t.Helper()
	out, err := r.Rewrite(nil, key)
	if err != nil {
		t.Fatalf("Rewrite(%v): %v", key, err)
	}
	return out
}

func name(t testing.TB, s rewrite.Strategy, k rewrite.DatastoreKey) rewrite.DatastoreKey {
	t.Helper()
	r, err := s.Datastore()
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Rewrite(k)
	if err != nil {
		t.Fatalf("Rewrite(%s): %v", k, err)
	}
	return out
}

func dsKey(elems ...any) rewrite.DatastoreKey {
	var k rewrite.DatastoreKey
	for i := 0; i < len(elems); i += 2 {
		e := rewrite.PathElement{Kind: elems[i].(string)}
		switch v := elems[i+1].(type) {
		case int:
			e.ID = int64(v)
		case int64:
			e.ID = v
		case string:
			e.Name = v
		}
		k.Path = append(k.Path, e)
	}
	return k
}

func TestReverseBits(t *testing.T) {
	for _, tc := range []struct {
		x        int64
		preserve bool
		want     int64
	}{
		{0, true, 0},
		{1, true, 1 << 62},
		{2, true, 1 << 61},
		{3, true, 3 << 61},
		{-1, true, -1},
		{math.MaxInt64, true, math.MaxInt64},
		{math.MinInt64, true, math.MinInt64},
		{-2, true, math.MinInt64 | (math.MaxInt64 >> 1)},
		{1, false, math.MinInt64},
		{math.MinInt64, false, 1},
		{-1, false, -1},
		{0x0f, false, -0x1000000000000000},
	} {
		if got := rewrite.ReverseBits(tc.x, tc.preserve); got != tc.want {
			t.Errorf("ReverseBits(%d, %t) = %d, want %d", tc.x, tc.preserve, got, tc.want)
		}
		if back := rewrite.ReverseBits(rewrite.ReverseBits(tc.x, tc.preserve), tc.preserve); back != tc.x {
			t.Errorf("ReverseBits is not its own inverse at %d: %d", tc.x, back)
		}
	}
}

func TestHashPrefix(t *testing.T) {
	md5 := mustNew(t, "hashprefix", rewrite.Params{"n": 4})
	farm16 := mustNew(t, "hashprefix", rewrite.Params{"n": "16", "hash": "farm", "sep": "_"})
	// md5 values from an independent implementation (Python hashlib).
	for _, tc := range []struct {
		s    rewrite.Strategy
		key  string
		want string
	}{
		{md5, "Customer1", "becf-Customer1"},
		{md5, "Customer2", "0b02-Customer2"},
		{md5, "", "d41d-"},
		{mustNew(t, "hashprefix", rewrite.Params{"n": 32, "sep": ""}), "123", "202cb962ac59075b964b07152d234b70123"},
		// FARM_FINGERPRINT("1footrue") = -1541654101129638711 (GoogleSQL docs).
		{farm16, "1footrue", hexI64(-1541654101129638711) + "_1footrue"},
	} {
		got := rewriteOne(t, mustBind(t, tc.s, "K STRING(MAX)"), rewrite.String(tc.key))
		if got[0].Str != tc.want {
			t.Errorf("%s(%q) = %q, want %q", tc.s.Spec(), tc.key, got[0].Str, tc.want)
		}
	}
	// An INT64 column becomes STRING; the schema says so.
	r := mustBind(t, md5, "Id INT64")
	if got := rewriteOne(t, r, rewrite.Int64(123)); got[0].Str != "202c-123" || r.Out().Columns[0].Type != rewrite.TypeString {
		t.Errorf("INT64 123 -> %v (%s)", got, r.Out().Columns[0].SQLType())
	}
	// STRING(N) grows by the prefix and separator.
	if got := mustBind(t, md5, "K STRING(10)").Out().Columns[0].MaxLen; got != 15 {
		t.Errorf("STRING(10) -> STRING(%d), want 15", got)
	}
	// Datastore: ids and digit-only names stay apart.
	id := name(t, md5, dsKey("Customer", 123))
	nm := name(t, md5, dsKey("Customer", "123"))
	if id.Path[0].Name != "202c-123" || nm.Path[0].Name != "9418-'123" {
		t.Errorf("id 123 -> %s, name \"123\" -> %s", id, nm)
	}
	// elements=root keeps children as they are.
	root := mustNew(t, "hashprefix", rewrite.Params{"elements": "root"})
	got := name(t, root, dsKey("Customer", "Customer1", "Order", 7))
	if got.Path[0].Name != "becf-Customer1" || got.Path[1] != (rewrite.PathElement{Kind: "Order", ID: 7}) {
		t.Errorf("root-only rewrite = %s", got)
	}
	// Invert refuses a prefix that does not match.
	ds, _ := md5.Datastore()
	if _, err := ds.Invert(dsKey("Customer", "0000-Customer1")); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("Invert with a forged prefix: %v", err)
	}
}

func hexI64(i int64) string {
	u := uint64(i)
	const digits = "0123456789abcdef"
	b := make([]byte, 16)
	for i := 15; i >= 0; i-- {
		b[i] = digits[u&15]
		u >>= 4
	}
	return string(b)
}

func TestShard(t *testing.T) {
	// GoogleSQL docs: FARM_FINGERPRINT(CONCAT('1','foo','true')) = -1541654101129638711.
	fp := int64(-1541654101129638711)
	signed := mustNew(t, "shard", rewrite.Params{"n": 10, "sep": ""})
	abs := mustNew(t, "shard", rewrite.Params{"n": 10, "sep": "", "mode": "abs"})
	schema := "X INT64, Y STRING(MAX), Z BOOL"
	key := []rewrite.Value{rewrite.Int64(1), rewrite.String("foo"), rewrite.Bool(true)}
	if got := rewriteOne(t, mustBind(t, signed, schema), key...); got[0].Int != fp%10 || got[0].Int >= 0 {
		t.Errorf("signed shard = %d, want %d", got[0].Int, fp%10)
	}
	if got := rewriteOne(t, mustBind(t, abs, schema), key...); got[0].Int != -(fp % 10) {
		t.Errorf("abs shard = %d, want %d", got[0].Int, -(fp % 10))
	}
	r := mustBind(t, signed, schema)
	if got := r.Out().String(); got != "PRIMARY KEY (ShardId, X, Y, Z)" {
		t.Errorf("out schema %s", got)
	}
	wantSQL := "MOD(FARM_FINGERPRINT(CONCAT(CAST(X AS STRING), '', Y, '', CAST(Z AS STRING))), 10)"
	if got := r.Explain()[0]; got != "ShardId = "+wantSQL {
		t.Errorf("explain = %q, want %q", got, wantSQL)
	}
	// One STRING column is hashed as is.
	one := mustBind(t, mustNew(t, "shard", rewrite.Params{"n": 7}), "UserId STRING(MAX)")
	if got, want := rewriteOne(t, one, rewrite.String("u1"))[0].Int, int64(farm.Fingerprint64([]byte("u1")))%7; got != want {
		t.Errorf("shard(u1) = %d, want %d", got, want)
	}
	// Only the chosen columns count.
	sub := mustBind(t, mustNew(t, "shard", rewrite.Params{"n": 7, "columns": "UserId"}), "LastAccess TIMESTAMP, UserId STRING(MAX)")
	a := rewriteOne(t, sub, rewrite.Timestamp(time.Unix(1, 0)), rewrite.String("u1"))
	b := rewriteOne(t, sub, rewrite.Timestamp(time.Unix(2, 0)), rewrite.String("u1"))
	if a[0].Int != b[0].Int {
		t.Errorf("shard on UserId depends on LastAccess: %d vs %d", a[0].Int, b[0].Int)
	}
	// Every shard id is in range and all are used.
	seen := map[int64]bool{}
	for i := range 10000 {
		v := rewriteOne(t, mustBind(t, abs, "Id INT64"), rewrite.Int64(int64(i)))[0].Int
		if v < 0 || v >= 10 {
			t.Fatalf("abs shard %d out of 0..9", v)
		}
		seen[v] = true
	}
	if len(seen) != 10 {
		t.Errorf("abs shard used %d of 10 values", len(seen))
	}
	// Refusals.
	if _, err := signed.Spanner(mustSchema(t, "F FLOAT64")); err == nil || !strings.Contains(err.Error(), "FLOAT64") {
		t.Errorf("FLOAT64 column accepted: %v", err)
	}
	if _, err := signed.Spanner(mustSchema(t, "ShardId INT64")); err == nil || !strings.Contains(err.Error(), "already has") {
		t.Errorf("name clash accepted: %v", err)
	}
	if _, err := mustBind(t, signed, "Id INT64").Rewrite(nil, []rewrite.Value{rewrite.Null(rewrite.TypeInt64)}); err == nil || !strings.Contains(err.Error(), "NULL") {
		t.Errorf("NULL accepted: %v", err)
	}
	if _, err := signed.Datastore(); !errors.Is(err, rewrite.ErrUnsupported) {
		t.Errorf("Datastore() = %v, want ErrUnsupported", err)
	}
	// Invert checks the shard column.
	if _, err := r.Invert(nil, append([]rewrite.Value{rewrite.Int64(fp%10 + 1)}, key...)); err == nil {
		t.Errorf("Invert accepted a wrong shard id")
	}
}

func TestReverse(t *testing.T) {
	s := mustNew(t, "reverse", nil)
	for _, tc := range []struct {
		spec string
		in   rewrite.Value
		want string
	}{
		{"K STRING(MAX)", rewrite.String("user1001"), "1001resu"},
		{"K STRING(MAX)", rewrite.String("日本語"), "語本日"},
		{"K INT64", rewrite.Int64(120), "021"},
		{"K INT64", rewrite.Int64(-120), "-021"},
		{"K INT64", rewrite.Int64(21), "12"},
	} {
		got := rewriteOne(t, mustBind(t, s, tc.spec), tc.in)
		if got[0].Str != tc.want {
			t.Errorf("reverse(%v) = %q, want %q", tc.in, got[0].Str, tc.want)
		}
	}
	if _, err := mustBind(t, s, "K STRING(MAX)").Rewrite(nil, []rewrite.Value{rewrite.String("a\xff")}); err == nil {
		t.Errorf("invalid UTF-8 accepted")
	}
	for _, tc := range []struct {
		in   rewrite.DatastoreKey
		want string
	}{
		{dsKey("C", 120), "021"},
		{dsKey("C", "120"), "'021"},
		{dsKey("C", "Customer1"), "1remotsuC"},
		{dsKey("C", "x'"), "''x"},
	} {
		if got := name(t, s, tc.in).Path[0].Name; got != tc.want {
			t.Errorf("reverse(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSwap(t *testing.T) {
	s := mustNew(t, "swap", rewrite.Params{"order": []any{"UserId"}})
	r := mustBind(t, s, "LastAccess TIMESTAMP, UserId STRING(MAX)")
	if got := r.Out().String(); got != "PRIMARY KEY (UserId, LastAccess)" {
		t.Errorf("out = %s", got)
	}
	ts := rewrite.Timestamp(time.Unix(5, 0))
	got := rewriteOne(t, r, ts, rewrite.String("u1"))
	if got[0].Str != "u1" || !got[1].Equal(ts) {
		t.Errorf("swap = %v", got)
	}
	if _, err := s.Spanner(mustSchema(t, "A INT64")); err == nil || !strings.Contains(err.Error(), `no key column "UserId"`) {
		t.Errorf("missing column: %v", err)
	}
	if _, err := mustNew(t, "swap", rewrite.Params{"order": "B,B"}).Spanner(mustSchema(t, "A INT64, B INT64")); err == nil {
		t.Errorf("duplicate column accepted")
	}
}

func TestBucket(t *testing.T) {
	s := mustNew(t, "bucket", rewrite.Params{"n": 10, "unit": "s", "column": "At"})
	r := mustBind(t, s, "At TIMESTAMP, Id INT64")
	for _, tc := range []struct {
		sec  int64
		want int64
	}{{0, 0}, {7, 7}, {13, 3}, {-1, 9}, {-11, 9}} {
		got := rewriteOne(t, r, rewrite.Timestamp(time.Unix(tc.sec, 0)), rewrite.Int64(1))
		if got[0].Int != tc.want {
			t.Errorf("bucket(%d s) = %d, want %d", tc.sec, got[0].Int, tc.want)
		}
	}
	if e := r.Explain()[0]; e != "Bucket = MOD(MOD(UNIX_SECONDS(`At`), 10) + 10, 10)" {
		t.Errorf("explain = %q", e)
	}
}

func TestGeneration(t *testing.T) {
	col := mustNew(t, "generation", rewrite.Params{"g": 3})
	got := rewriteOne(t, mustBind(t, col, "Id INT64"), rewrite.Int64(9))
	if len(got) != 2 || got[0].Int != 3 || got[1].Int != 9 {
		t.Errorf("generation column = %v", got)
	}
	if k := name(t, col, dsKey("Customer", "c1")); k.String() != `Generation:3/Customer:"c1"` {
		t.Errorf("generation parent = %s", k)
	}
	pre := mustNew(t, "generation", rewrite.Params{"g": 12, "as": "prefix"})
	if k := name(t, pre, dsKey("Customer", 5, "Order", 1)); k.String() != `Customer:"12-5"/Order:1` {
		t.Errorf("generation prefix = %s", k)
	}
	ds, _ := pre.Datastore()
	if _, err := ds.Invert(dsKey("Customer", "11-5")); err == nil {
		t.Errorf("Invert accepted another generation")
	}
	if _, err := rewrite.New(rewrite.StepConfig{Strategy: "generation", Params: rewrite.Params{"sep": "1"}}); err == nil {
		t.Errorf("digit separator accepted")
	}
}

func TestChain(t *testing.T) {
	c := mustNew(t, "chain", nil, rewrite.StepConfig{Strategy: "hashprefix"}, rewrite.StepConfig{Strategy: "generation", Params: rewrite.Params{"g": 3, "as": "prefix"}})
	if got := name(t, c, dsKey("Customer", "Customer1")).Path[0].Name; got != "3-becf-Customer1" {
		t.Errorf("chain = %q", got)
	}
	if !c.Info().Invertible {
		t.Errorf("chain of invertible steps is not invertible")
	}
	nc := mustNew(t, "chain", nil, rewrite.StepConfig{Strategy: "uuid"}, rewrite.StepConfig{Strategy: "hashprefix"})
	if nc.Info().Invertible {
		t.Errorf("chain with uuid claims invertible")
	}
	sp := mustNew(t, "chain", nil, rewrite.StepConfig{Strategy: "swap", Params: rewrite.Params{"order": "UserId"}}, rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 4, "columns": "UserId"}})
	r := mustBind(t, sp, "LastAccess TIMESTAMP, UserId STRING(MAX)")
	if got := r.Out().String(); got != "PRIMARY KEY (ShardId, UserId, LastAccess)" {
		t.Errorf("chain out = %s", got)
	}
}

func TestUUID(t *testing.T) {
	s := mustNew(t, "uuid", rewrite.Params{"namespace": "6ba7b811-9dad-11d1-80b4-00c04fd430c8"}) // RFC 9562 URL namespace
	got := rewriteOne(t, mustBind(t, s, "K STRING(MAX)"), rewrite.String("https://www.example.com/"))
	// Python: uuid.uuid5(uuid.NAMESPACE_URL, "https://www.example.com/")
	if want := "3d3ed9d2-aa3d-5fa6-90e8-ed662e90f559"; got[0].Str != want {
		t.Errorf("uuid5 = %s, want %s", got[0].Str, want)
	}
	v4 := mustNew(t, "uuid", rewrite.Params{"version": 4})
	r := mustBind(t, v4, "K INT64")
	a, b := rewriteOne(t, r, rewrite.Int64(1)), rewriteOne(t, r, rewrite.Int64(1))
	if a[0].Str == b[0].Str || a[0].Str[14] != '4' || v4.Info().Deterministic {
		t.Errorf("uuid4 gave %s and %s (deterministic=%v)", a[0].Str, b[0].Str, v4.Info().Deterministic)
	}
}

func TestParamErrors(t *testing.T) {
	_, err := rewrite.New(rewrite.StepConfig{Strategy: "hashprefix", Params: rewrite.Params{"n": 40, "hash": "sha", "bogus": 1}})
	for _, want := range []string{
		`params.n: must be 1..32, got 40`,
		`params.hash: must be one of md5, farm, got "sha"`,
		`params.bogus: unknown parameter`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not contain %q", err, want)
		}
	}
	_, err = rewrite.New(rewrite.StepConfig{Strategy: "chain", Steps: []rewrite.StepConfig{{Strategy: "shard", Params: rewrite.Params{"n": 0}}, {Strategy: "nope"}}})
	for _, want := range []string{"steps[0].params.n: must be 1..2147483648, got 0", `steps[1].strategy: unknown strategy "nope"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("chain error %v does not contain %q", err, want)
		}
	}
	_, err = rewrite.New(rewrite.StepConfig{Strategy: "chain", Steps: []rewrite.StepConfig{{Strategy: "HashPrefx"}}})
	if want := `steps[0].strategy: unknown strategy "HashPrefx"; did you mean hashprefix? (known: `; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("misspelt strategy: %v does not contain %q", err, want)
	}
	if _, err := rewrite.New(rewrite.StepConfig{Strategy: "frobnicate"}); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("nothing near \"frobnicate\": %v", err)
	}
	_, err = rewrite.New(rewrite.StepConfig{Strategy: "hashprefix", Params: rewrite.Params{"n": 20, "hash": "farm"}})
	if err == nil || !strings.Contains(err.Error(), "params.n: must be 1..16, got 20") {
		t.Errorf("farm n=20: %v", err)
	}
}

func TestRewriteRefusesKeysBreakingTargetLimits(t *testing.T) {
	hp := mustNew(t, "hashprefix", nil)
	// STRING(10) grows to STRING(15): still fits. A full-size key does not.
	big := strings.Repeat("k", rewrite.MaxSpannerKeyBytes-2)
	_, err := mustBind(t, hp, "K STRING(MAX)").Rewrite(nil, []rewrite.Value{rewrite.String(big)})
	var ke *rewrite.KeyError
	if !errors.As(err, &ke) || !strings.Contains(err.Error(), "more than Spanner's 8192") {
		t.Errorf("oversized rewritten key: %v", err)
	}
	// Datastore: a 1500-byte name plus a prefix is too long.
	ds, _ := hp.Datastore()
	if _, err := ds.Rewrite(dsKey("C", strings.Repeat("n", 1500))); err == nil || !strings.Contains(err.Error(), "more than 1500") {
		t.Errorf("oversized name: %v", err)
	}
	// A "/" in a name is refused with the key and the rule.
	if _, err := ds.Rewrite(dsKey("C", "a/b")); err == nil || !strings.Contains(err.Error(), `name contains "/"`) || !strings.Contains(err.Error(), `C:"a/b"`) {
		t.Errorf("slash in name: %v", err)
	}
}

// TestHashPrefixAppendMatchesReference checks Append, its inline path and
// the general one, against hex(hash) + sep + key built with encoding/hex:
// both hashes, every N, separators of 0, 1 and 2 bytes, keys of every
// length from 0 to 40 bytes, and dst with no room, one byte too little,
// exactly enough and plenty. The bytes of dst before its length and
// those of its capacity past the output must be left alone.
func TestHashPrefixAppendMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	keys := [][]byte{}
	for l := 0; l <= 40; l++ {
		k := make([]byte, l)
		for i := range k {
			k[i] = byte(r.Uint32())
		}
		keys = append(keys, k, []byte(strings.Repeat("k", l)))
	}
	for _, hash := range []string{"md5", "farm"} {
		maxN := 32
		if hash == "farm" {
			maxN = 16
		}
		for n := 1; n <= maxN; n++ {
			for _, sep := range []string{"", "/", "::"} {
				h := mustNew(t, "hashprefix", rewrite.Params{"hash": hash, "n": n, "sep": sep}).(*rewrite.HashPrefix)
				for _, k := range keys {
					var sum []byte
					if hash == "md5" {
						s := md5.Sum(k)
						sum = s[:]
					} else {
						sum = binary.BigEndian.AppendUint64(nil, farm.Fingerprint64(k))
					}
					want := hex.EncodeToString(sum)[:n] + sep + string(k)
					if got := string(h.Append(nil, k)); got != want {
						t.Fatalf("%s n=%d sep %q key %q, nil dst: got %q, want %q", hash, n, sep, k, got, want)
					}
					for _, room := range []int{len(want) - 1, len(want), len(want) + 64} {
						buf := bytes.Repeat([]byte{0xee}, 3+room)
						copy(buf, "pre")
						got := h.Append(buf[:3:3+room], k)
						if string(got[:3]) != "pre" || string(got[3:]) != want {
							t.Fatalf("%s n=%d sep %q key %q, room %d: got %q, want %q", hash, n, sep, k, room, got, "pre"+want)
						}
						if room >= len(want) && !bytes.Equal(buf[3+len(want):], bytes.Repeat([]byte{0xee}, room-len(want))) {
							t.Fatalf("%s n=%d sep %q key %q, room %d: wrote past the output: %q", hash, n, sep, k, room, buf[3+len(want):])
						}
					}
				}
			}
		}
	}
}

func TestSQLQuotesReservedColumnNames(t *testing.T) {
	r := mustBind(t, mustNew(t, "shard", rewrite.Params{"n": 4}), "At TIMESTAMP, Order INT64, Name STRING(MAX)")
	want := "ShardId = MOD(FARM_FINGERPRINT(CONCAT(CAST(UNIX_MICROS(`At`) AS STRING), '|', CAST(`Order` AS STRING), '|', Name)), 4)"
	if got := r.Explain()[0]; got != want {
		t.Errorf("explain:\n got %s\nwant %s", got, want)
	}
	b := mustBind(t, mustNew(t, "bucket", rewrite.Params{"name": "Group"}), "At TIMESTAMP")
	if got := b.Explain()[1]; got != "DDL: `Group` INT64 NOT NULL AS (MOD(MOD(UNIX_MILLIS(`At`), 16) + 16, 16)) STORED" {
		t.Errorf("bucket DDL: %s", got)
	}
}
