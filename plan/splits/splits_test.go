package splits

import (
	"bytes"
	"fmt"
	"math/big"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/internal/testkit/golden"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// checkGolden compares got with testdata/name.golden (-update-golden rewrites it).
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name+".golden"), got)
}

// uniformCase is a strategy with its source key and a generator of
// source keys (the i-th of a load).
type uniformCase struct {
	name   string
	config rewrite.StepConfig
	key    string
	points int
	source func(i int) []rewrite.Value
}

var (
	userIDs = func(i int) []rewrite.Value { return []rewrite.Value{rewrite.String(fmt.Sprintf("user-%d", i))} }
	seqIDs  = func(i int) []rewrite.Value { return []rewrite.Value{rewrite.Int64(int64(i + 1))} }
	logKeys = func(i int) []rewrite.Value {
		t := time.Date(2024, 1, 31, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
		return []rewrite.Value{rewrite.Timestamp(t), rewrite.String(fmt.Sprintf("u%d", i))}
	}
)

var uniformCases = []uniformCase{
	{"hashprefix", rewrite.StepConfig{Strategy: "hashprefix"}, "UserId STRING(MAX)", 20, userIDs},
	{"hashprefix-n1", rewrite.StepConfig{Strategy: "hashprefix", Params: rewrite.Params{"n": 1}}, "UserId STRING(MAX)", 30, userIDs},
	{"hashprefix-bytes", rewrite.StepConfig{Strategy: "hashprefix", Params: rewrite.Params{"n": 3}}, "Id BYTES(16)", 5, func(i int) []rewrite.Value { return []rewrite.Value{rewrite.Bytes([]byte(fmt.Sprint(i)))} }},
	{"hashprefix-farm-int64", rewrite.StepConfig{Strategy: "hashprefix", Params: rewrite.Params{"hash": "farm", "n": 6}}, "Id INT64", 10, seqIDs},
	{"shard-signed", rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 64}}, "LastAccess TIMESTAMP, UserId STRING(MAX)", 20, logKeys},
	{"shard-signed-few", rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 4}}, "LastAccess TIMESTAMP, UserId STRING(MAX)", 20, logKeys},
	{"shard-abs", rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 16, "mode": "abs", "columns": []string{"UserId"}}}, "LastAccess TIMESTAMP, UserId STRING(MAX)", 5, logKeys},
	{"bitreverse", rewrite.StepConfig{Strategy: "bitreverse"}, "Id INT64", 20, seqIDs},
	{"bitreverse-unsigned", rewrite.StepConfig{Strategy: "bitreverse", Params: rewrite.Params{"preserve_sign": false}}, "Id INT64", 20, seqIDs},
	{"uuid", rewrite.StepConfig{Strategy: "uuid"}, "Id INT64", 20, seqIDs},
	{"uuid-keep-chain", rewrite.StepConfig{Strategy: "chain", Steps: []rewrite.StepConfig{{Strategy: "uuid", Params: rewrite.Params{"keep": true, "name": "Key"}}}}, "LastAccess TIMESTAMP, UserId STRING(MAX)", 10, logKeys},
}

// bind builds a case's strategy and binds it to its source key.
func bind(t *testing.T, c uniformCase) (rewrite.Strategy, rewrite.KeySchema, *rewrite.SpannerRewriter) {
	t.Helper()
	st, err := rewrite.New(c.config)
	if err != nil {
		t.Fatal(err)
	}
	in, err := rewrite.ParseKeySchema("Events", c.key)
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Spanner(in)
	if err != nil {
		t.Fatal(err)
	}
	return st, in, r
}

func uniformPoints(t *testing.T, c uniformCase) (Space, []Point, *rewrite.SpannerRewriter) {
	t.Helper()
	st, in, r := bind(t, c)
	sp, ok := UniformSpace(st, in)
	if !ok {
		t.Fatalf("%s on (%s): not taken as uniform", c.config.Strategy, c.key)
	}
	pts, err := sp.Points(r.Out(), c.points)
	if err != nil {
		t.Fatal(err)
	}
	return sp, pts, r
}

func TestUniformGolden(t *testing.T) {
	for _, c := range uniformCases {
		t.Run(c.name, func(t *testing.T) {
			_, pts, _ := uniformPoints(t, c)
			var b bytes.Buffer
			if err := Write(&b, pts); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, c.name, b.String())
		})
	}
}

// TestUniformMatchesTheRewrite rewrites a load of keys and checks that
// the share of them below each point is the share the space's model
// gives (so the model is the strategy's: a signed shard's 0 is twice as
// likely, sign-kept bit reversal fills only the upper half of INT64...),
// and, where the space has many more values than points, that the
// points cut the load into equal parts.
func TestUniformMatchesTheRewrite(t *testing.T) {
	const load = 40000
	for _, c := range uniformCases {
		t.Run(c.name, func(t *testing.T) {
			sp, pts, r := uniformPoints(t, c)
			out := r.Out()
			lead := rewrite.KeySchema{Table: out.Table, Columns: out.Columns[:1]}
			keys := make([][]rewrite.Value, load)
			for i := range keys {
				k, err := r.Rewrite(nil, c.source(i))
				if err != nil {
					t.Fatal(err)
				}
				keys[i] = k[:1]
			}
			many := sp.Size.Cmp(big.NewInt(int64(100*c.points))) > 0
			if many && len(pts) != c.points {
				t.Errorf("%d points, want %d", len(pts), c.points)
			}
			for i, p := range pts {
				below := 0
				for _, k := range keys {
					if rewrite.CompareSpanner(lead, k, p.Key) < 0 {
						below++
					}
				}
				got := float64(below) / load
				want := modelShare(sp, lead, p.Key[0])
				if d := got - want; d > 0.015 || d < -0.015 {
					t.Errorf("point %d %s: %.4f of the keys below it, the model says %.4f", i+1, p.Key[0], got, want)
				}
				if even := float64(i+1) / float64(c.points+1); many && (want-even > 0.001 || even-want > 0.001) {
					t.Errorf("point %d %s: the model puts %.4f below it, want %.4f (evenly spaced)", i+1, p.Key[0], want, even)
				}
			}
		})
	}
}

// modelShare is the share of the space's units whose value sorts before
// v: the first unit of value v over the size (a binary search; values
// grow with units).
func modelShare(sp Space, lead rewrite.KeySchema, v rewrite.Value) float64 {
	lo, hi := new(big.Int), new(big.Int).Set(sp.Size)
	for lo.Cmp(hi) < 0 {
		mid := new(big.Int).Add(lo, hi)
		mid.Rsh(mid, 1)
		if rewrite.CompareSpanner(lead, []rewrite.Value{sp.value(mid)}, []rewrite.Value{v}) < 0 {
			lo.Add(mid, big.NewInt(1))
		} else {
			hi.Set(mid)
		}
	}
	f, _ := new(big.Rat).SetFrac(lo, sp.Size).Float64()
	return f
}

func TestShardPoints(t *testing.T) {
	// Fewer shards than points: one point per value but the lowest.
	_, pts, _ := uniformPoints(t, uniformCase{config: rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 4}}, key: "Id INT64", points: 20})
	var got []int64
	for _, p := range pts {
		got = append(got, p.Key[0].Int)
	}
	if fmt.Sprint(got) != "[-2 -1 0 1 2 3]" {
		t.Errorf("signed shard n=4, 20 points: %v, want [-2 -1 0 1 2 3] (every value of -3..3 but the lowest)", got)
	}
	_, pts, _ = uniformPoints(t, uniformCase{config: rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 4, "mode": "abs"}}, key: "Id INT64", points: 20})
	if len(pts) != 3 || pts[0].Key[0].Int != 1 || pts[2].Key[0].Int != 3 {
		t.Errorf("abs shard n=4, 20 points: %v, want 1, 2, 3", pts)
	}
}

func TestNotUniform(t *testing.T) {
	for _, c := range []struct {
		config rewrite.StepConfig
		key    string
	}{
		{rewrite.StepConfig{Strategy: "none"}, "Id INT64"},
		{rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 1}}, "Id INT64"},
		{rewrite.StepConfig{Strategy: "swap", Params: rewrite.Params{"order": []string{"UserId"}}}, "LastAccess TIMESTAMP, UserId STRING(MAX)"},
		{rewrite.StepConfig{Strategy: "reverse"}, "UserId STRING(MAX)"},
		{rewrite.StepConfig{Strategy: "generation", Params: rewrite.Params{"g": 3}}, "Id INT64"},
		{rewrite.StepConfig{Strategy: "hashprefix", Params: rewrite.Params{"column": "UserId"}}, "LastAccess TIMESTAMP, UserId STRING(MAX)"},
		{rewrite.StepConfig{Strategy: "bitreverse", Params: rewrite.Params{"column": "Id"}}, "Region STRING(10), Id INT64"},
		{rewrite.StepConfig{Strategy: "chain", Steps: []rewrite.StepConfig{{Strategy: "hashprefix"}, {Strategy: "generation", Params: rewrite.Params{"g": 2, "as": "prefix"}}}}, "UserId STRING(MAX)"},
	} {
		st, err := rewrite.New(c.config)
		if err != nil {
			t.Fatal(err)
		}
		in, _ := rewrite.ParseKeySchema("T", c.key)
		if sp, ok := UniformSpace(st, in); ok {
			t.Errorf("%s on (%s): taken as uniform (%s); its points must come from a sample", st.Spec(), c.key, sp.Desc)
		}
	}
}

func TestPointsChecksTheKey(t *testing.T) {
	sp, _, _ := uniformPoints(t, uniformCases[0])
	other, _ := rewrite.ParseKeySchema("Events", "Id INT64")
	if _, err := sp.Points(other, 10); err == nil || !strings.Contains(err.Error(), "does not start with the STRING column UserId") {
		t.Errorf("points for a key the rewrite does not make: %v", err)
	}
	if _, err := sp.Points(other, 0); err == nil {
		t.Error("0 points: no error")
	}
}

// sampleRows are rows of a swapped UserAccessLogs, keyed (UserId,
// LastAccess), with user u{i} holding i+1 rows: the load is skewed
// towards the high users, and quantiles follow it.
func sampleRows() []record.Record {
	var recs []record.Record
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for u := 0; u < 40; u++ {
		for j := 0; j <= u; j++ {
			recs = append(recs, record.Record{Table: "UserAccessLogsByUser", Fields: []record.Field{
				{Name: "Payload", Value: record.String("x")},
				{Name: "LastAccess", Value: record.Time(base.Add(time.Duration(j) * time.Hour))},
				{Name: "UserId", Value: record.String(fmt.Sprintf("u%02d", u))},
			}})
		}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	return recs
}

var byUser, _ = rewrite.ParseKeySchema("UserAccessLogsByUser", "UserId STRING(MAX), LastAccess TIMESTAMP")

func TestQuantilesGolden(t *testing.T) {
	recs := sampleRows()
	pts, err := Quantiles(byUser, recs, 9)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 9 {
		t.Fatalf("%d points, want 9", len(pts))
	}
	// Each of the 10 parts holds about a tenth of the 820 rows.
	for i := 0; i <= len(pts); i++ {
		n := 0
		for j := range recs {
			k, _ := keyOf(&recs[j], byUser)
			if (i == 0 || rewrite.CompareSpanner(byUser, k, pts[i-1].Key) >= 0) && (i == len(pts) || rewrite.CompareSpanner(byUser, k, pts[i].Key) < 0) {
				n++
			}
		}
		if n < 80 || n > 84 {
			t.Errorf("part %d holds %d of %d rows, want about %d", i, n, len(recs), len(recs)/10)
		}
	}
	var b bytes.Buffer
	if err := Write(&b, pts); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "quantiles", b.String())
}

func TestQuantilesEdges(t *testing.T) {
	row := func(table, user string, hour int, extra ...record.Field) record.Record {
		return record.Record{Table: table, Fields: append([]record.Field{
			{Name: "UserId", Value: record.String(user)},
			{Name: "LastAccess", Value: record.Time(time.Date(2024, 5, 1, hour, 0, 0, 0, time.UTC))},
		}, extra...)}
	}
	// A sample smaller than the points asked: every distinct key but the
	// lowest; equal keys give one point.
	recs := []record.Record{row("T", "b", 1), row("T", "a", 1), row("T", "b", 1), row("T", "c", 2)}
	pts, err := Quantiles(byUser, recs, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pts {
		got = append(got, rewrite.FormatKey(p.Key, false))
	}
	if want := `[["b","2024-05-01T01:00:00Z"] ["c","2024-05-01T02:00:00Z"]]`; fmt.Sprint(got) != want {
		t.Errorf("small sample: %v, want %s", got, want)
	}
	// Interleaved children count under their parent's key: the median
	// of a, b, b, c is b, but four child rows of z move it to z.
	if pts, _ := Quantiles(byUser, recs, 1); len(pts) != 1 || pts[0].Key[0].Str != "b" {
		t.Errorf("median: %v, want user b", pts)
	}
	child := row("UserAccessEvents", "z", 3, record.Field{Name: "EventId", Value: record.Int(7)})
	pts, err = Quantiles(byUser, append(recs, child, child, child, child), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 1 || pts[0].Key[0].Str != "z" || len(pts[0].Key) != 2 || pts[0].Table != "UserAccessLogsByUser" {
		t.Errorf("with children's rows: %v, want one point of the table at user z (the parent key only)", pts)
	}
	if _, err := Quantiles(byUser, nil, 5); err == nil || !strings.Contains(err.Error(), "sample of table UserAccessLogsByUser is empty") {
		t.Errorf("empty sample: %v", err)
	}
	bad := record.Record{Table: "T", Fields: []record.Field{{Name: "UserId", Value: record.String("a")}}}
	if _, err := Quantiles(byUser, []record.Record{bad}, 5); err == nil || !strings.Contains(err.Error(), "has no key column LastAccess") {
		t.Errorf("a record without a key column: %v", err)
	}
	wrong := row("T", "a", 1)
	wrong.Fields[1].Value = record.Bool(true)
	if _, err := Quantiles(byUser, []record.Record{wrong}, 5); err == nil || !strings.Contains(err.Error(), "key column LastAccess") {
		t.Errorf("a key value of the wrong type: %v", err)
	}
}

func TestAdvice(t *testing.T) {
	exp := time.Date(2025, 3, 11, 9, 30, 0, 0, time.UTC)
	got := strings.Join(Advice("Singers", []string{"Albums", "Songs"}, exp), "\n")
	for _, want := range []string{
		"for Singers, the root table written",
		"interleaved children (Albums, Songs)",
		"between 7 days and 12 hours before the load",
		"expire at 2025-03-11T09:30:00Z",
		"before dropping the table",
		"backups do not keep split points",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("advice lacks %q:\n%s", want, got)
		}
	}
	if got := strings.Join(Advice("Singers", nil, exp), "\n"); strings.Contains(got, "children") {
		t.Errorf("advice without children mentions them:\n%s", got)
	}
}
