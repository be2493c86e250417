package integration

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/rekeyio/rekey/rewrite"
)

// keysPerTest is how many distinct keys each equality test compares (edge
// cases included).
const keysPerTest = 10000

// newRand returns the fixed-seed generator every test starts from, so a
// failure names keys that come back on every run.
func newRand(stream uint64) *rand.Rand { return rand.New(rand.NewPCG(0x5eed_4e4b, stream)) }

// int64Edges are the INT64 values where bit and sign handling break first:
// 0, ±1, the extremes, and every power of two, ±1, with both signs.
func int64Edges() []int64 {
	out := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1}
	for k := range 64 {
		p := uint64(1) << k
		for _, u := range []uint64{p, p - 1, p + 1} {
			out = append(out, int64(u), -int64(u))
		}
	}
	return out
}

// int64s returns n distinct INT64 values: the edges, then random values of
// every magnitude.
func int64s(r *rand.Rand, n int) []int64 {
	seen := map[int64]bool{}
	var out []int64
	add := func(x int64) {
		if !seen[x] && len(out) < n {
			seen[x] = true
			out = append(out, x)
		}
	}
	for _, x := range int64Edges() {
		add(x)
	}
	for len(out) < n {
		switch r.IntN(4) {
		case 0: // any bit pattern
			add(int64(r.Uint64()))
		case 1: // small, both signs
			add(r.Int64N(2_000_001) - 1_000_000)
		case 2: // random magnitude
			add(int64(r.Uint64()>>r.IntN(64)) * (1 - 2*int64(r.IntN(2))))
		default: // sequential ids, as tables hold them
			add(r.Int64N(1 << 40))
		}
	}
	return out
}

// runes to build strings from: ASCII, the shard separator, quotes and
// backslashes, NUL, Latin-1, CJK, 4-byte emoji, combining sequences and the
// highest code point.
var stringPieces = []string{
	"a", "b", "z", "A", "Z", "0", "7", "9", " ", "-", "_", ".", "/", "|", "||", "'", "\"", "\\", "\x00", "\t", "\n",
	"é", "ß", "ñ", "Ω", "€", "日", "本", "語", "한", "🙂", "👍🏽", "👨‍👩‍👧", "\u0301", "\uFFFD", "\U0010FFFF",
}

// stringEdges are STRING values worth testing by name.
func stringEdges() []string {
	return []string{
		"", " ", "a", "A", "0", "42", "-1", "true", "NULL", "日本語", "🙂", "👨‍👩‍👧‍👦", "e\u0301", "\U0010FFFF", "\uFFFD",
		"|", "||", "a|b", "|a", "a|", "a||b", "1|2", "a\x00b", "\x00", "'", `\`, `a'b\c`, "tab\there", "line\nbreak",
		strings.Repeat("x", 2000), strings.Repeat("|", 2000), strings.Repeat("日", 2000), strings.Repeat("🙂", 2000),
		strings.Repeat("ab|", 667),
	}
}

func randomString(r *rand.Rand, maxPieces int) string {
	var b strings.Builder
	for range r.IntN(maxPieces + 1) {
		b.WriteString(stringPieces[r.IntN(len(stringPieces))])
	}
	return b.String()
}

// strs returns n distinct STRING values: the edges, a few long strings
// and short random ones.
func strs(r *rand.Rand, n int) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if !seen[s] && len(out) < n {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, s := range stringEdges() {
		add(s)
	}
	for range 20 {
		add(randomString(r, 1500))
	}
	for len(out) < n {
		add(randomString(r, 12))
	}
	return out
}

// byteEdges are BYTES values worth testing by name.
func byteEdges(r *rand.Rand) [][]byte {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	long := make([]byte, 2000)
	for i := range long {
		long[i] = byte(r.Uint32())
	}
	return [][]byte{
		{}, {0}, {0xff}, {0, 0}, {0xff, 0xff}, {0, 0xff, 0, 0xff}, {0xff, 0}, []byte("|"), []byte("a|b"),
		[]byte("日本語"), {0xc3, 0x28}, {0xed, 0xa0, 0x80}, all, long, make([]byte, 2000),
	}
}

// byteStrings returns n distinct BYTES values.
func byteStrings(r *rand.Rand, n int) [][]byte {
	seen := map[string]bool{}
	var out [][]byte
	add := func(b []byte) {
		if !seen[string(b)] && len(out) < n {
			seen[string(b)] = true
			out = append(out, b)
		}
	}
	for _, b := range byteEdges(r) {
		add(b)
	}
	for len(out) < n {
		b := make([]byte, r.IntN(41))
		for i := range b {
			switch r.IntN(4) {
			case 0:
				b[i] = 0
			case 1:
				b[i] = 0xff
			default:
				b[i] = byte(r.Uint32())
			}
		}
		add(b)
	}
	return out
}

// Spanner's TIMESTAMP and DATE range.
var (
	minTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// timeEdges are TIMESTAMP values worth testing by name: around the epoch
// (where flooring and truncating of negative values differ), with every
// sub-second precision, and the ends of the range.
func timeEdges() []time.Time {
	epoch := time.Unix(0, 0).UTC()
	out := []time.Time{
		epoch, minTime, maxTime,
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 999999999, time.UTC),
		time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999500, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999000000, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 500000000, time.UTC),
		time.Date(1900, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1600, 2, 29, 12, 0, 0, 123456789, time.UTC),
		time.Date(2000, 2, 29, 23, 59, 59, 999999999, time.UTC),
		time.Date(2038, 1, 19, 3, 14, 8, 0, time.UTC),
		time.Date(2016, 1, 25, 15, 10, 10, 555555000, time.UTC),
	}
	for _, d := range []time.Duration{1, 499, 500, 501, 999, 1000, 1001, 999999, 1000000, 1000001, 999999999, time.Second, time.Second + 1} {
		out = append(out, epoch.Add(d), epoch.Add(-d))
	}
	return out
}

// randomTime returns a TIMESTAMP in Spanner's range: anywhere in it, near
// the epoch, or in recent years, with nanoseconds, microseconds or
// milliseconds precision.
func randomTime(r *rand.Rand) time.Time {
	var t time.Time
	switch r.IntN(3) {
	case 0:
		span := maxTime.Unix() - minTime.Unix()
		t = time.Unix(minTime.Unix()+r.Int64N(span+1), r.Int64N(1e9))
	case 1:
		t = time.Unix(0, r.Int64N(20e9)-10e9)
	default:
		t = time.Unix(946684800+r.Int64N(30*365*86400), r.Int64N(1e9))
	}
	switch r.IntN(3) {
	case 0:
		t = t.Truncate(time.Microsecond) // Truncate on the absolute time: floors
	case 1:
		t = t.Truncate(time.Millisecond)
	}
	return t.UTC()
}

// times returns n distinct TIMESTAMP values.
func times(r *rand.Rand, n int) []time.Time {
	seen := map[time.Time]bool{}
	var out []time.Time
	add := func(t time.Time) {
		t = t.UTC()
		if !seen[t] && len(out) < n {
			seen[t] = true
			out = append(out, t)
		}
	}
	for _, t := range timeEdges() {
		add(t)
	}
	for len(out) < n {
		add(randomTime(r))
	}
	return out
}

// dateEdges are DATE values worth testing by name.
func dateEdges() []rewrite.Value {
	return []rewrite.Value{
		rewrite.Date(1, 1, 1), rewrite.Date(9999, 12, 31), rewrite.Date(1970, 1, 1), rewrite.Date(1969, 12, 31),
		rewrite.Date(2000, 2, 29), rewrite.Date(1600, 3, 1), rewrite.Date(999, 12, 31), rewrite.Date(1000, 1, 1),
	}
}

func randomDate(r *rand.Rand) rewrite.Value {
	lo, hi := rewrite.Date(1, 1, 1).Int, rewrite.Date(9999, 12, 31).Int
	return rewrite.Value{Type: rewrite.TypeDate, Int: lo + r.Int64N(hi-lo+1)}
}

// numericEdges are NUMERIC values worth testing by name.
func numericEdges() []string {
	max := strings.Repeat("9", 29) + "." + strings.Repeat("9", 9)
	return []string{
		"0", "1", "-1", "1.5", "-1.5", "0.5", "-0.5", "0.1", "0.000000001", "-0.000000001", "0.00000001", "0.0001",
		"10", "100", "1000000", "123.45", "-123.45", "1000000000", "0.999999999", "1.000000001",
		max, "-" + max, "1" + strings.Repeat("0", 28), "-1" + strings.Repeat("0", 28), "12345678901234567890123456789",
	}
}

// numerics returns n distinct NUMERIC values in canonical form.
func numerics(r *rand.Rand, n int) ([]rewrite.Value, error) {
	seen := map[string]bool{}
	var out []rewrite.Value
	add := func(s string) error {
		v, err := rewrite.Numeric(s)
		if err != nil {
			return err
		}
		if !seen[v.Str] && len(out) < n {
			seen[v.Str] = true
			out = append(out, v)
		}
		return nil
	}
	for _, s := range numericEdges() {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	for len(out) < n {
		var b strings.Builder
		if r.IntN(2) == 0 {
			b.WriteByte('-')
		}
		ip := r.IntN(30)
		if ip == 0 {
			b.WriteByte('0')
		}
		for i := range ip {
			d := r.IntN(10)
			if i == 0 && d == 0 {
				d = 1
			}
			b.WriteByte(byte('0' + d))
		}
		if fp := r.IntN(10); fp > 0 {
			b.WriteByte('.')
			for range fp {
				b.WriteByte(byte('0' + r.IntN(10)))
			}
		}
		if err := add(b.String()); err != nil {
			return nil, fmt.Errorf("random NUMERIC %q: %w", b.String(), err)
		}
	}
	return out, nil
}
