package integration

import (
	"fmt"
	"strings"
	"testing"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/rewrite"
)

// TestEqualityHashPrefix checks that the GoogleSQL expression hashprefix's
// Explain prints computes the same new key as Go, for STRING and INT64 keys,
// md5 and farmhash, short and full-length prefixes.
func TestEqualityHashPrefix(t *testing.T) {
	emulator.RequireSpanner(t)
	ctx := t.Context()
	c := emulator.TestDB(t)
	for _, tc := range []struct {
		spec string
		keys []any
	}{
		{"K STRING(MAX)", func() []any {
			var ks []any
			for _, s := range strs(newRand(21), keysPerTest) {
				ks = append(ks, s)
			}
			return ks
		}()},
		{"K INT64", func() []any {
			var ks []any
			for _, x := range int64s(newRand(22), keysPerTest) {
				ks = append(ks, x)
			}
			return ks
		}()},
	} {
		schema := mustSchema(t, tc.spec)
		for _, p := range []rewrite.Params{{"n": 4}, {"n": 32, "sep": "/"}, {"hash": "farm", "n": 6}, {"hash": "farm", "n": 16, "sep": ""}} {
			st, err := rewrite.New(rewrite.StepConfig{Strategy: "hashprefix", Params: p})
			if err != nil {
				t.Fatal(err)
			}
			r, err := st.Spanner(schema)
			if err != nil {
				t.Fatal(err)
			}
			expr, ok := strings.CutPrefix(r.Explain()[0], "K = ")
			if !ok {
				t.Fatalf("Explain %q", r.Explain())
			}
			m := &mismatches{t: t, what: fmt.Sprintf("hashprefix %v on %s: Go vs %s", p, tc.spec, expr)}
			compared := 0
			for i := 0; i < len(tc.keys); i += maxRowsPerApply {
				chunk := tc.keys[i:min(i+maxRowsPerApply, len(tc.keys))]
				var param any
				if tc.spec == "K INT64" {
					xs := make([]int64, len(chunk))
					for j, k := range chunk {
						xs[j] = k.(int64)
					}
					param = xs
				} else {
					ss := make([]string, len(chunk))
					for j, k := range chunk {
						ss[j] = k.(string)
					}
					param = ss
				}
				stmt := spanner.Statement{SQL: "SELECT K, " + expr + " FROM UNNEST(@ks) AS K", Params: map[string]any{"ks": param}}
				err := c.Single().Query(ctx, stmt).Do(func(row *spanner.Row) error {
					var key rewrite.Value
					var sql string
					if tc.spec == "K INT64" {
						var x int64
						if err := row.Columns(&x, &sql); err != nil {
							return err
						}
						key = rewrite.Int64(x)
					} else {
						var s string
						if err := row.Columns(&s, &sql); err != nil {
							return err
						}
						key = rewrite.String(s)
					}
					compared++
					out, err := r.Rewrite(nil, []rewrite.Value{key})
					if err != nil {
						m.add(key.String(), err, sql)
					} else if out[0].Str != sql {
						m.add(key.String(), out[0].Str, sql)
					}
					return nil
				})
				if err != nil {
					t.Fatalf("%s: %v", stmt.SQL, err)
				}
			}
			m.done(compared)
		}
	}
}
