package cohort_test

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"cloud.google.com/go/spanner"
	farm "github.com/dgryski/go-farm"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/internal/store/emulator"
)

var update = flag.Bool("update", false, "recompute "+vectorsFile+" with the Spanner emulator's FARM_FINGERPRINT (needs SPANNER_EMULATOR_HOST; see scripts/test.sh)")

// vectorsFile holds test vectors computed by Spanner, not by the Go code
// under test (see testdata/README.md).
const vectorsFile = "testdata/vectors.tsv"

// vectorBuckets are the bucket counts of the file's cohort columns.
var vectorBuckets = []int{cohort.DefaultBuckets, 100, 7, 2, 1_000_000}

func vectorsHeader() []string {
	h := []string{"id", "farm_fingerprint"}
	for _, b := range vectorBuckets {
		h = append(h, "cohort_"+strconv.Itoa(b))
	}
	return h
}

// vectorIDs are the ids of the file, in its order: the empty id, short
// and long ASCII, numbers as text, non-ASCII text, every length from 0 to
// 300 bytes and longer ones (farmhash's Fingerprint64 takes different
// paths for 0-16, 17-32, 33-64 and more than 64 bytes, and consumes 64
// bytes a round), and random ids from a fixed seed. None holds a tab, a
// line break or another control character, so that each is one TSV field
// as it is.
func vectorIDs() []string {
	var ids []string
	seen := map[string]bool{}
	add := func(ss ...string) {
		for _, s := range ss {
			if !seen[s] {
				seen[s] = true
				ids = append(ids, s)
			}
		}
	}
	add("", "a", "A", "z", "0", " ", "~", "-", "é", "日", "🙂")
	add("alice", "bob", "Alice", "ALICE", "user-000001", "user-000002", "u1", "u2", "Customer1",
		"alice@example.com", "Alice@Example.com", "user 42", " leading space", "trailing space ", "  ",
		"a b c", `quote"d`, "it's", `back\slash`, "semi;colon", "comma,separated", "slash/ed", "key:User", "#hash")
	add("0", "1", "-1", "42", "-42", "007", "1000000", "2147483647", "-2147483648", "4294967295",
		"9223372036854775807", "-9223372036854775808", "18446744073709551615", "3.14", "1e10", "+1")
	add("123e4567-e89b-12d3-a456-426614174000", "00000000-0000-0000-0000-000000000000",
		"ffffffff-ffff-ffff-ffff-ffffffffffff", "01HZX3J9Q8M5V7K2N4P6R8T0W1")
	add("José", "Zoë", "e\u0301", "Ångström", "Straße", "Ωμέγα", "Привет", "日本語", "ユーザー", "用户一",
		"한국어", "مرحبا", "שלום", "नमस्ते", "👍🏽", "👨\u200d👩\u200d👧\u200d👦", "🇫🇷", "\U0010FFFF", "\uFFFD",
		"café-日本-🙂", "naïve user")
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	ascii := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteByte(alphabet[(i*7+n)%len(alphabet)])
		}
		return b.String()
	}
	for n := range 301 {
		add(ascii(n))
	}
	for _, n := range []int{383, 384, 385, 447, 448, 449, 511, 512, 513, 1000, 1023, 1024, 1025, 1500, 2047, 2048, 2049, 4096, 10_000} {
		add(ascii(n))
	}
	for _, n := range []int{2, 5, 6, 10, 11, 21, 22, 30, 50, 100, 400} {
		add(strings.Repeat("日", n)) // 3 bytes each
	}
	for _, n := range []int{2, 4, 5, 8, 9, 16, 17, 100, 300} {
		add(strings.Repeat("🙂", n)) // 4 bytes each
	}
	add(strings.Repeat("é", 33), strings.Repeat("aé", 22), strings.Repeat("ß日🙂", 100))
	pieces := []string{"a", "b", "k", "Q", "Z", "0", "5", "9", "-", "_", ".", "@", " ", "é", "ñ", "Ω", "日", "語", "한", "🙂"}
	r := rand.New(rand.NewPCG(0xc0_4047, 1))
	for len(ids) < 700 {
		var b strings.Builder
		for range 1 + r.IntN(40) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		add(b.String())
	}
	return ids
}

// vector is one line of the file.
type vector struct {
	line    int
	id      string
	fp      int64
	cohorts []int // one per vectorBuckets
}

func readVectors(t *testing.T) []vector {
	t.Helper()
	f, err := os.Open(vectorsFile)
	if err != nil {
		t.Fatalf("%v (recompute it with: bash scripts/test.sh -count=1 -run CohortVectors ./cohort/ -update)", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var out []vector
	line := 0
	for sc.Scan() {
		line++
		fields := strings.Split(sc.Text(), "\t")
		if line == 1 {
			if !slices.Equal(fields, vectorsHeader()) {
				t.Fatalf("%s: header %q, want %q", vectorsFile, fields, vectorsHeader())
			}
			continue
		}
		if len(fields) != len(vectorsHeader()) {
			t.Fatalf("%s:%d: %d fields, want %d", vectorsFile, line, len(fields), len(vectorsHeader()))
		}
		v := vector{line: line, id: fields[0]}
		if v.fp, err = strconv.ParseInt(fields[1], 10, 64); err != nil {
			t.Fatalf("%s:%d: fingerprint: %v", vectorsFile, line, err)
		}
		for _, s := range fields[2:] {
			c, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("%s:%d: cohort: %v", vectorsFile, line, err)
			}
			v.cohorts = append(v.cohorts, c)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", vectorsFile, err)
	}
	return out
}

// TestCohortVectors checks Of, and farmhash itself, against values that
// Spanner computed.
func TestCohortVectors(t *testing.T) {
	if *update {
		writeVectors(t)
	}
	vs := readVectors(t)
	var ids []string
	for _, v := range vs {
		ids = append(ids, v.id)
	}
	if !slices.Equal(ids, vectorIDs()) {
		t.Fatalf("%s holds other ids than vectorIDs (%d, want %d); recompute it with: bash scripts/test.sh -count=1 -run CohortVectors ./cohort/ -update", vectorsFile, len(ids), len(vectorIDs()))
	}
	bad := 0
	for _, v := range vs {
		if got := int64(farm.Fingerprint64([]byte(v.id))); got != v.fp {
			bad++
			t.Errorf("line %d: id %.40q (%d bytes): Go's Fingerprint64 %d, Spanner's FARM_FINGERPRINT %d", v.line, v.id, len(v.id), got, v.fp)
		}
		for i, b := range vectorBuckets {
			if got := cohort.Of(v.id, b); got != v.cohorts[i] {
				bad++
				t.Errorf("line %d: id %.40q (%d bytes): Of(id, %d) = %d, Spanner %d", v.line, v.id, len(v.id), b, got, v.cohorts[i])
			}
		}
		if bad > 20 {
			t.Fatal("too many differences")
		}
	}

	// The file covers what it says it covers.
	var lengths [5]int // 0, 1-16, 17-32, 33-64, >64 bytes
	nonASCII, long := 0, 0
	for _, id := range ids {
		switch n := len(id); {
		case n == 0:
			lengths[0]++
		case n <= 16:
			lengths[1]++
		case n <= 32:
			lengths[2]++
		case n <= 64:
			lengths[3]++
		default:
			lengths[4]++
		}
		if len(id) > 1000 {
			long++
		}
		if utf8.RuneCountInString(id) != len(id) {
			nonASCII++
		}
	}
	if lengths[0] != 1 || slices.Min(lengths[1:]) < 20 || long < 5 || nonASCII < 50 {
		t.Errorf("ids by length (0, 1-16, 17-32, 33-64, >64 bytes): %v; over 1000 bytes: %d; non-ASCII: %d", lengths, long, nonASCII)
	}
	t.Logf("%d ids checked against Spanner's FARM_FINGERPRINT and %d bucket counts", len(vs), len(vectorBuckets))
}

// writeVectors computes the file on the Spanner emulator.
func writeVectors(t *testing.T) {
	t.Helper()
	ids := vectorIDs()
	for _, id := range ids {
		if strings.ContainsFunc(id, func(r rune) bool { return r < ' ' || r == 0x7f }) || !utf8.ValidString(id) {
			t.Fatalf("id %q is not one TSV field", id)
		}
	}
	c := emulator.TestDB(t)
	cols := []string{"id", "fp"}
	for _, b := range vectorBuckets {
		// Written out here rather than taken from cohort.SQL, so that the
		// file does not depend on the code it tests.
		cols = append(cols, fmt.Sprintf("MOD(MOD(fp, %d) + %d, %d)", b, b, b))
	}
	stmt := spanner.Statement{
		SQL:    "SELECT " + strings.Join(cols, ", ") + " FROM (SELECT id, FARM_FINGERPRINT(id) AS fp FROM UNNEST(@ids) AS id)",
		Params: map[string]any{"ids": ids},
	}
	rows := map[string][]string{}
	err := c.Single().Query(t.Context(), stmt).Do(func(row *spanner.Row) error {
		var id string
		var fp int64
		if err := row.Column(0, &id); err != nil {
			return err
		}
		if err := row.Column(1, &fp); err != nil {
			return err
		}
		fields := []string{id, strconv.FormatInt(fp, 10)}
		for i := range vectorBuckets {
			var c int64
			if err := row.Column(2+i, &c); err != nil {
				return err
			}
			fields = append(fields, strconv.FormatInt(c, 10))
		}
		rows[id] = fields
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(strings.Join(vectorsHeader(), "\t") + "\n")
	for _, id := range ids {
		fields, ok := rows[id]
		if !ok {
			t.Fatalf("Spanner returned no row for id %.40q", id)
		}
		b.WriteString(strings.Join(fields, "\t") + "\n")
	}
	if err := os.MkdirAll(filepath.Dir(vectorsFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vectorsFile, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s: %d ids", vectorsFile, len(ids))
}
