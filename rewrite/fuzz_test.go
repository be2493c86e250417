package rewrite_test

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"testing"
	"time"

	farm "github.com/dgryski/go-farm"

	"github.com/rekeyio/rekey/rewrite"
	"github.com/rekeyio/rekey/rewrite/rewritetest"
)

// fuzzStrategy runs the conformance checks on keys built from fuzzed
// values: one-column keys of each type, a composite key, and Datastore keys
// with fuzzed names and ids (valid or not).
func fuzzStrategy(f *testing.F, c rewrite.StepConfig) {
	s, err := rewrite.New(c)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("Customer1", int64(1), []byte("x"))
	f.Add("", int64(0), []byte{})
	f.Add("日本語'", int64(-1), []byte{0, 0xff})
	f.Add("120", int64(9223372036854775807), []byte("a|b"))
	f.Add("a\xffb/", int64(-9223372036854775808), []byte(nil))
	f.Fuzz(func(t *testing.T, str string, n int64, raw []byte) {
		if s.Info().Spanner {
			ts := rewrite.Timestamp(time.Unix(n%(1<<35), n%1e9).UTC())
			for _, spec := range []string{"K STRING(MAX)", "K INT64", "K BYTES(MAX)", "At TIMESTAMP, UserId STRING(MAX), N INT64 DESC"} {
				schema := mustSchema(t, spec)
				var keys [][]rewrite.Value
				switch len(schema.Columns) {
				case 3:
					keys = [][]rewrite.Value{{ts, rewrite.String(str), rewrite.Int64(n)}, {ts, rewrite.String(str + "x"), rewrite.Int64(n)}}
				default:
					switch schema.Columns[0].Type {
					case rewrite.TypeString:
						keys = [][]rewrite.Value{{rewrite.String(str)}, {rewrite.String(string(raw))}}
					case rewrite.TypeInt64:
						keys = [][]rewrite.Value{{rewrite.Int64(n)}, {rewrite.Int64(n ^ 1)}}
					default:
						keys = [][]rewrite.Value{{rewrite.Bytes(raw)}, {rewrite.Bytes([]byte(str))}}
					}
				}
				rewritetest.Spanner(t, s, schema, keys)
			}
		}
		if s.Info().Datastore {
			rewritetest.Datastore(t, s, []rewrite.DatastoreKey{
				dsKey("K", str),
				dsKey("K", n),
				dsKey("K", string(raw)),
				dsKey("P", str, "K", n),
				dsKey("P", n, "K", str),
			})
		}
	})
}

func FuzzHashPrefix(f *testing.F) { fuzzStrategy(f, rewrite.StepConfig{Strategy: "hashprefix"}) }
func FuzzHashPrefixFarm(f *testing.F) {
	fuzzStrategy(f, rewrite.StepConfig{Strategy: "hashprefix", Params: rewrite.Params{"hash": "farm", "n": 16, "sep": ""}})
}

// FuzzHashPrefixFarmInline runs the conformance checks with the settings
// of Append's inline path (farm, a one-byte separator).
func FuzzHashPrefixFarmInline(f *testing.F) {
	fuzzStrategy(f, rewrite.StepConfig{Strategy: "hashprefix", Params: rewrite.Params{"hash": "farm", "n": 6, "sep": "-"}})
}

// FuzzHashPrefixAppend compares Append with hex(hash) + sep + key built
// with encoding/hex, for fuzzed keys, N, separator and room in dst.
func FuzzHashPrefixAppend(f *testing.F) {
	f.Add([]byte("Customer0000001"), uint8(6), "-", uint8(0), true)
	f.Add([]byte("12345678"), uint8(8), "/", uint8(1), true)
	f.Add([]byte("x"), uint8(32), "", uint8(40), false)
	f.Fuzz(func(t *testing.T, key []byte, n uint8, sep string, extra uint8, useFarm bool) {
		hash, maxN := "md5", 32
		if useFarm {
			hash, maxN = "farm", 16
		}
		p := rewrite.Params{"hash": hash, "n": 1 + int(n)%maxN, "sep": sep}
		s, err := rewrite.New(rewrite.StepConfig{Strategy: "hashprefix", Params: p})
		if err != nil {
			return // sep not valid UTF-8
		}
		var sum []byte
		if useFarm {
			sum = binary.BigEndian.AppendUint64(nil, farm.Fingerprint64(key))
		} else {
			m := md5.Sum(key)
			sum = m[:]
		}
		want := "pre" + hex.EncodeToString(sum)[:1+int(n)%maxN] + sep + string(key)
		dst := append(make([]byte, 0, len(want)+int(extra)-1), "pre"...)
		if got := string(s.(*rewrite.HashPrefix).Append(dst, key)); got != want {
			t.Fatalf("%v key %q: got %q, want %q", p, key, got, want)
		}
	})
}

func FuzzShard(f *testing.F) { fuzzStrategy(f, rewrite.StepConfig{Strategy: "shard"}) }
func FuzzShardAbs(f *testing.F) {
	fuzzStrategy(f, rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"mode": "abs", "n": 7}})
}
func FuzzBitReverse(f *testing.F) { fuzzStrategy(f, rewrite.StepConfig{Strategy: "bitreverse"}) }
func FuzzUUID(f *testing.F)       { fuzzStrategy(f, rewrite.StepConfig{Strategy: "uuid"}) }
func FuzzSwap(f *testing.F) {
	fuzzStrategy(f, rewrite.StepConfig{Strategy: "swap", Params: rewrite.Params{"order": "1"}})
}
func FuzzReverse(f *testing.F) { fuzzStrategy(f, rewrite.StepConfig{Strategy: "reverse"}) }
func FuzzBucket(f *testing.F)  { fuzzStrategy(f, rewrite.StepConfig{Strategy: "bucket"}) }
func FuzzGeneration(f *testing.F) {
	fuzzStrategy(f, rewrite.StepConfig{Strategy: "generation", Params: rewrite.Params{"as": "prefix"}})
}
func FuzzChain(f *testing.F) {
	fuzzStrategy(f, rewrite.StepConfig{Strategy: "chain", Steps: []rewrite.StepConfig{{Strategy: "reverse"}, {Strategy: "hashprefix"}}})
}

// FuzzParseKey checks that the key notation never panics and that what it
// parses formats back to something it parses to the same key.
func FuzzParseKey(f *testing.F) {
	for _, in := range append(append(append([]string{}, dsInputs...), logInputs...), idInputs...) {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, line string) {
		pk, err := rewrite.ParseKey(line, nil)
		if err != nil {
			return
		}
		var again string
		if pk.IsDatastore {
			again = rewrite.FormatDatastoreKey(pk.Datastore)
		} else {
			again = rewrite.FormatKey(pk.Values, pk.Bare)
		}
		pk2, err := rewrite.ParseKey(again, nil)
		if err != nil {
			t.Fatalf("ParseKey(%q) ok, but its rendering %q fails: %v", line, again, err)
		}
		if pk.IsDatastore && rewrite.CompareDatastore(pk.Datastore, pk2.Datastore) != 0 {
			t.Fatalf("%q -> %q changes the key", line, again)
		}
	})
}
