package detect

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestSpearman(t *testing.T) {
	seq := func(n int, f func(i int) float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	r := rand.New(rand.NewPCG(1, 2))
	random := seq(1000, func(int) float64 { return r.Float64() })
	tests := []struct {
		name string
		x, y []float64
		want float64 // NaN: want NaN
		tol  float64
	}{
		{"empty", nil, nil, math.NaN(), 0},
		{"one value", []float64{1}, []float64{2}, math.NaN(), 0},
		{"two values", []float64{1, 2}, []float64{2, 3}, math.NaN(), 0},
		{"lengths differ", []float64{1, 2, 3}, []float64{1, 2}, math.NaN(), 0},
		{"constant y", []float64{1, 2, 3}, []float64{5, 5, 5}, math.NaN(), 0},
		{"NaN value", []float64{1, math.NaN(), 3}, []float64{1, 2, 3}, math.NaN(), 0},
		{"identical", []float64{1, 2, 3, 4}, []float64{1, 2, 3, 4}, 1, 1e-12},
		{"monotone, not linear", []float64{1, 2, 3, 4, 5}, []float64{1, 10, 100, 1000, 1e6}, 1, 1e-12},
		{"reversed", []float64{1, 2, 3, 4, 5}, []float64{5, 4, 3, 2, 1}, -1, 1e-12},
		// Ranks x: 1 2 3 4 5; y (1,2,2,3,4): 1, 2.5, 2.5, 4, 5 → ρ = 0.9746794.
		{"ties get mean ranks", []float64{1, 2, 3, 4, 5}, []float64{1, 2, 2, 3, 4}, 0.9746794344808963, 1e-12},
		// x ranks 1..5, y ranks 2 1 4 3 5: 1 − 6·4/(5·24) = 0.8.
		{"swapped pairs", []float64{1, 2, 3, 4, 5}, []float64{20, 10, 40, 30, 50}, 0.8, 1e-12},
		{"unrelated", seq(1000, func(i int) float64 { return float64(i) }), random, 0, 0.1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Spearman(tt.x, tt.y)
			if math.IsNaN(tt.want) {
				if !math.IsNaN(got) {
					t.Fatalf("Spearman = %v, want NaN", got)
				}
				return
			}
			if math.Abs(got-tt.want) > tt.tol {
				t.Fatalf("Spearman = %v, want %v ± %v", got, tt.want, tt.tol)
			}
		})
	}
}

func TestDenseSequence(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var full, sample1pc, random []int64
	for i := int64(1); i <= 10000; i++ {
		full = append(full, i)
		if r.IntN(100) == 0 {
			sample1pc = append(sample1pc, i)
		}
	}
	for range 1000 {
		random = append(random, r.Int64())
	}
	shuffled := append([]int64(nil), full...)
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	tests := []struct {
		name     string
		vals     []int64
		fraction float64
		want     bool
		evidence string // a substring of the evidence
	}{
		{"empty", nil, 1, false, ""},
		{"one value", []int64{7}, 1, false, ""},
		{"too few", []int64{1, 2}, 1, false, ""},
		{"three in a row", []int64{1, 2, 3}, 1, true, "3 distinct values of 3 lie in 1..3, 100% of that range"},
		{"1..10,000", full, 1, true, "10,000 distinct values of 10,000 lie in 1..10,000, 100% of that range"},
		{"order does not matter", shuffled, 0, true, "lie in 1..10,000"},
		{"1% sample, fraction given", sample1pc, 0.01, true, "(a 1% sample of a sequence would fill 1%)"},
		{"1% sample, taken as all", sample1pc, 1, false, ""},
		{"random int64s", random, 0.01, false, ""},
		{"duplicates", []int64{1, 1, 1, 2, 2, 2, 3, 3, 3}, 1, false, ""},
		{"gaps of three", []int64{3, 6, 9, 12, 15, 18}, 1, false, ""},
		{"every other", []int64{2, 4, 6, 8, 10, 12}, 1, true, "55% of that range"},
		{"negative", []int64{-5, -4, -3, -2, -1}, 1, true, "lie in -5..-1"},
		{"extremes do not overflow", []int64{math.MinInt64, 0, math.MaxInt64}, 1, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, ev := DenseSequence(tt.vals, tt.fraction)
			if ok != tt.want {
				t.Fatalf("DenseSequence = %v (%q), want %v", ok, ev, tt.want)
			}
			if !strings.Contains(ev, tt.evidence) {
				t.Fatalf("evidence %q, want it to contain %q", ev, tt.evidence)
			}
			if !ok && ev != "" {
				t.Fatalf("evidence %q without a finding", ev)
			}
		})
	}
}

func TestSequentialNames(t *testing.T) {
	numbered := func(stem string, from, to int) []string {
		var out []string
		for i := from; i <= to; i++ {
			out = append(out, fmt.Sprintf("%s%d", stem, i))
		}
		return out
	}
	r := rand.New(rand.NewPCG(5, 6))
	var randomNumbers, sampled []string
	for range 1000 {
		randomNumbers = append(randomNumbers, fmt.Sprintf("Customer%d", r.Int64N(1e12)))
	}
	for i := 1; i <= 100000; i++ {
		if r.IntN(100) == 0 {
			sampled = append(sampled, fmt.Sprintf("Customer%d", i))
		}
	}
	mostly := append(numbered("Customer", 1, 930), numbered("x-", 1, 0)...)
	for i := range 70 {
		mostly = append(mostly, fmt.Sprintf("alice-%c", 'a'+i%26))
	}
	tests := []struct {
		name     string
		names    []string
		want     bool
		evidence string
	}{
		{"empty", nil, false, ""},
		{"one name", []string{"Customer1"}, false, ""},
		{"three", numbered("Customer", 1, 3), true, "100% of 3 names are Customer<n>, n from 1 to 3"},
		{"10,000", numbered("Customer", 1, 10000), true, "100% of 10,000 names are Customer<n>, n from 1 to 10,000"},
		{"93% of them", mostly, true, "93% of 1,000 names are Customer<n>, n from 1 to 930"},
		{"two stems", append(numbered("Customer", 1, 600), numbered("Supplier", 1, 400)...), true,
			"100% of 1,000 names are Customer<n>, n from 1 to 600; or Supplier<n>, n from 1 to 400"},
		{"separator in the stem", numbered("order-", 100, 199), true, "order-<n>, n from 100 to 199"},
		{"zero padded", []string{"item0001", "item0002", "item0003", "item0004"}, true, "item<n>, n from 1 to 4"},
		{"non-ASCII stem", numbered("Kunde_ä", 1, 50), true, "Kunde_ä<n>"},
		{"random numbers", randomNumbers, false, ""},
		{"sample, taken as all", sampled, false, ""},
		{"no numbers", []string{"alice", "bob", "carol"}, false, ""},
		{"only numbers", []string{"1", "2", "3"}, false, ""},
		{"dates are not stems", []string{"2024-01-01", "2024-01-02", "2024-01-03"}, false, ""},
		{"too few of them", append(numbered("c", 1, 5), "a", "b", "d", "e", "f"), false, ""},
		{"duplicates", []string{"c1", "c1", "c1", "c2", "c2", "c2"}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, ev := SequentialNames(tt.names)
			if ok != tt.want || !strings.Contains(ev, tt.evidence) {
				t.Fatalf("SequentialNames = %v, %q; want %v, containing %q", ok, ev, tt.want, tt.evidence)
			}
		})
	}
	t.Run("sample with its fraction", func(t *testing.T) {
		ok, ev := SequentialNamesSampled(sampled, 0.01)
		if !ok || !strings.Contains(ev, "Customer<n>") || !strings.Contains(ev, "1% sample") {
			t.Fatalf("SequentialNamesSampled = %v, %q", ok, ev)
		}
	})
}

func TestIsUUIDv1(t *testing.T) {
	tests := []struct {
		s    string
		want bool
	}{
		{"", false},
		{"c232ab00-9414-11ec-b3c8-9f6bdeced846", true},
		{"C232AB00-9414-11EC-B3C8-9F6BDECED846", true},
		{"{c232ab00-9414-11ec-b3c8-9f6bdeced846}", true},
		{"urn:uuid:c232ab00-9414-11ec-b3c8-9f6bdeced846", true},
		{"c232ab00941411ecb3c89f6bdeced846", false},             // not canonical
		{"f47ac10b-58cc-4372-a567-0e02b2c3d479", false},         // v4
		{"c232ab00-9414-11ec-73c8-9f6bdeced846", false},         // NCS variant, not RFC 4122
		{"c232ab00-9414-11ec-b3c8-9f6bdeced84", false},          // short
		{"c232ab00-9414-11ec-b3c8-9f6bdeced8466", false},        // long
		{"c232ab00x9414-11ec-b3c8-9f6bdeced846", false},         // separator
		{"g232ab00-9414-11ec-b3c8-9f6bdeced846", false},         // not hex
		{"{c232ab00-9414-11ec-b3c8-9f6bdeced846", false},        // one brace
		{"c232ab00-9414-11ec-b3c8-9f6bdecéd84", false},          // non-ASCII
		{"01890a5d-ac96-774b-bcce-b302099a8057", false},         // v7
		{"c232ab00-9414-11ec-b3c8-9f6bdeced846\n", false},       // trailing newline
		{"URN:UUID:c232ab00-9414-11ec-b3c8-9f6bdeced846", true}, // case of the urn
	}
	for _, tt := range tests {
		if got := IsUUIDv1(tt.s); got != tt.want {
			t.Errorf("IsUUIDv1(%q) = %v, want %v", tt.s, got, tt.want)
		}
	}
}

func TestUUIDv1Share(t *testing.T) {
	v1, v4 := "c232ab00-9414-11ec-b3c8-9f6bdeced846", "f47ac10b-58cc-4372-a567-0e02b2c3d479"
	tests := []struct {
		vals  []string
		share float64
		n     int
	}{
		{nil, 0, 0},
		{[]string{v1}, 1, 1},
		{[]string{v4}, 0, 0},
		{[]string{v1, v1, v4, "x"}, 0.5, 2},
	}
	for _, tt := range tests {
		share, n := UUIDv1Share(tt.vals)
		if share != tt.share || n != tt.n {
			t.Errorf("UUIDv1Share(%q) = %v, %d; want %v, %d", tt.vals, share, n, tt.share, tt.n)
		}
	}
}

func TestCommonPrefix(t *testing.T) {
	many := func(n int, f func(i int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	tests := []struct {
		name   string
		vals   []string
		prefix string
		share  float64
	}{
		{"empty", nil, "", 0},
		{"one value", []string{"abc"}, "abc", 1},
		{"all the same", []string{"x", "x", "x"}, "x", 1},
		{"shared by all", []string{"user:17", "user:42", "user:7"}, "user:", 1},
		{"nothing shared", []string{"a", "b", "c"}, "", 1},
		{"90% share one", append(many(9, func(i int) string { return fmt.Sprintf("tenant-a/%d", i) }), "zzz"),
			"tenant-a/", 0.9},
		{"80% is too few", append(many(8, func(i int) string { return fmt.Sprintf("tenant-a/%d", i) }), "y", "z"),
			"", 1},
		{"longest among several", append(many(95, func(i int) string { return fmt.Sprintf("eu/west/%02d", i) }),
			many(5, func(i int) string { return fmt.Sprintf("eu/east/%d", i) })...), "eu/west/", 0.95},
		// "ä" is 0xC3 0xA4 and "ö" 0xC3 0xB6: the shared byte 0xC3 is half a
		// character and is not part of the prefix.
		{"whole characters", []string{"käse", "köln", "kürbis"}, "k", 1},
		{"non-ASCII prefix", []string{"日本-1", "日本-2", "日本-3"}, "日本-", 1},
		{"empty strings", []string{"", "", "a"}, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix, share := CommonPrefix(tt.vals)
			if prefix != tt.prefix || math.Abs(share-tt.share) > 1e-12 {
				t.Fatalf("CommonPrefix = %q, %v; want %q, %v", prefix, share, tt.prefix, tt.share)
			}
		})
	}
}

func TestCardinality(t *testing.T) {
	tests := []struct {
		name     string
		vals     []string
		distinct int
		share    float64
		top      string
	}{
		{"empty", nil, 0, 0, ""},
		{"one value", []string{"DE"}, 1, 1, "DE"},
		{"skewed", []string{"US", "US", "US", "DE", "FR", "US"}, 3, 4.0 / 6, "US"},
		{"tie goes to the least", []string{"b", "a", "b", "a", "c"}, 3, 0.4, "a"},
		{"empty string is a value", []string{"", "", "x"}, 2, 2.0 / 3, ""},
		{"non-ASCII", []string{"ü", "ü", "u"}, 2, 2.0 / 3, "ü"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, share, top := Cardinality(tt.vals)
			if d != tt.distinct || math.Abs(share-tt.share) > 1e-12 || top != tt.top {
				t.Fatalf("Cardinality = %d, %v, %q; want %d, %v, %q", d, share, top, tt.distinct, tt.share, tt.top)
			}
		})
	}
}

func TestLooksMonotonicName(t *testing.T) {
	yes := []string{"created", "Created", "created_at", "CreatedAt", "createdAt", "createdat", "updated",
		"UpdateTime", "update_time", "timestamp", "Timestamp", "ts", "TS", "event_ts", "time", "date",
		"OrderDate", "seq", "sequence", "SequenceNumber", "seq_no", "id_seq", "insert_time", "InsertTime",
		"inserttime", "modified_on", "LastModified", "commit_ts", "event_time_utc", "timestamp_ms",
		"EpochMillis", "epoch", "serial", "creation_date", "HTTPRequestTime", "Zeit_time"}
	no := []string{"", "id", "Id", "UserId", "name", "TimeZone", "timezone", "update", "UpdateCount",
		"status", "lifetime", "runtime", "data", "dated_by", "counts", "posts", "last", "at", "no",
		"event", "sequencer", "Tsunami", "attime", "123", "__key__", "größe"}
	for _, n := range yes {
		if !LooksMonotonicName(n) {
			t.Errorf("LooksMonotonicName(%q) = false, want true", n)
		}
	}
	for _, n := range no {
		if LooksMonotonicName(n) {
			t.Errorf("LooksMonotonicName(%q) = true, want false", n)
		}
	}
}

func TestSplitWords(t *testing.T) {
	tests := map[string]string{
		"created_at":     "created at",
		"CreatedAt":      "created at",
		"HTTPServerTime": "http server time",
		"id2seq":         "id seq",
		"Größe-Datum":    "größe datum",
		"":               "",
		"__":             "",
	}
	for in, want := range tests {
		if got := strings.Join(splitWords(in), " "); got != want {
			t.Errorf("splitWords(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestThousands(t *testing.T) {
	tests := map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", -1234567: "-1,234,567",
		math.MinInt64: "-9,223,372,036,854,775,808"}
	for n, want := range tests {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestPercent(t *testing.T) {
	tests := map[float64]string{0: "0%", 1: "100%", 0.93: "93%", 0.9999: "99%", 0.995: "99%", 0.29: "29%", 0.025: "2.5%", 0.0004: "<0.1%", 0.05: "5%", 0.0996: "10%", 6.0 / 11: "55%"}
	for share, want := range tests {
		if got := percent(share); got != want {
			t.Errorf("percent(%v) = %q, want %q", share, got, want)
		}
	}
}
