package integration

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// cohortIDs are the user ids of the cohort tests: those of the cohort
// package's test vectors (every length 0-300 bytes and longer ones,
// non-ASCII text, numbers), then the STRING edges and random strings of
// the other equality tests, keysPerTest or more in all.
func cohortIDs(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../cohort/testdata/vectors.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ids []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			ids = append(ids, s)
		}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for line := 0; sc.Scan(); line++ {
		if line > 0 { // the header
			id, _, _ := strings.Cut(sc.Text(), "\t")
			add(id)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(ids) < 500 {
		t.Fatalf("%d ids in cohort/testdata/vectors.tsv", len(ids))
	}
	for _, s := range strs(newRand(60), keysPerTest) {
		add(s)
	}
	return ids
}

// TestCohortSpanner checks, on the Spanner emulator, that cohort.SQL over
// a user id column computes the cohort that cohort.Of computes in Go, for
// keysPerTest and more user ids stored in a table (STRING, and INT64 and
// BYTES through cohort.SQLExpr), and that a filter on it returns exactly
// the rows of the cohorts Go puts them in.
func TestCohortSpanner(t *testing.T) {
	emulator.RequireSpanner(t)
	ctx := t.Context()
	ids := cohortIDs(t)
	nums := int64s(newRand(61), len(ids))
	bs := byteStrings(newRand(62), len(ids))
	c := emulator.TestDB(t, `CREATE TABLE CohortUsers (
  Idx INT64 NOT NULL,
  UserId STRING(MAX) NOT NULL,
  UserNum INT64 NOT NULL,
  UserBytes BYTES(MAX) NOT NULL
) PRIMARY KEY (Idx)`)
	var ms []*spanner.Mutation
	for i, id := range ids {
		ms = append(ms, spanner.Insert("CohortUsers", []string{"Idx", "UserId", "UserNum", "UserBytes"}, []any{int64(i), id, nums[i], bs[i]}))
		if len(ms) == maxRowsPerApply || i == len(ids)-1 {
			if _, err := c.Apply(ctx, ms); err != nil {
				t.Fatalf("insert %d rows: %v", len(ms), err)
			}
			ms = ms[:0]
		}
	}
	// Go's cohort of row i for a user column, through cohort.User as a
	// migration reads it from a record.
	rows := make([]*record.Record, len(ids))
	for i := range ids {
		rows[i] = &record.Record{Table: "CohortUsers", Fields: []record.Field{
			{Name: "Idx", Value: record.Int(int64(i))},
			{Name: "UserId", Value: record.String(ids[i])},
			{Name: "UserNum", Value: record.Int(nums[i])},
			{Name: "UserBytes", Value: record.Bytes(bs[i])},
		}}
	}
	columns := []struct {
		name string
		typ  rewrite.Type
	}{{"UserId", rewrite.TypeString}, {"UserNum", rewrite.TypeInt64}, {"UserBytes", rewrite.TypeBytes}}
	userExpr := func(col string, typ rewrite.Type) (cohort.User, string) {
		u, err := cohort.ParseUser(col)
		if err != nil {
			t.Fatal(err)
		}
		expr, err := cohort.SQLExpr(u, typ)
		if err != nil {
			t.Fatal(err)
		}
		return u, expr
	}

	t.Run("SQLAgreesWithGo", func(t *testing.T) {
		type computed struct {
			user    cohort.User
			buckets int
			sql     string
			m       *mismatches
		}
		var cs []computed
		for _, col := range columns {
			u, expr := userExpr(col.name, col.typ)
			for _, b := range []int{cohort.DefaultBuckets, 100, 7} {
				sql := cohort.SQL(expr, b)
				cs = append(cs, computed{u, b, sql, &mismatches{t: t, what: fmt.Sprintf("%s %s, %d buckets: cohort.Of vs %s", col.name, col.typ, b, sql)}})
			}
		}
		sel := []string{"Idx", "UserId"}
		for _, x := range cs {
			sel = append(sel, x.sql)
		}
		got := 0
		err := c.Single().Query(ctx, spanner.Statement{SQL: "SELECT " + strings.Join(sel, ", ") + " FROM CohortUsers"}).Do(func(row *spanner.Row) error {
			var idx int64
			var id string
			if err := row.Column(0, &idx); err != nil {
				return err
			}
			if err := row.Column(1, &id); err != nil {
				return err
			}
			if id != ids[idx] {
				return fmt.Errorf("row %d: Spanner stored %q, wrote %q", idx, id, ids[idx])
			}
			got++
			for j, x := range cs {
				var sqlCohort int64
				if err := row.Column(2+j, &sqlCohort); err != nil {
					return err
				}
				goCohort, err := x.user.Cohort(rows[idx], x.buckets)
				if err != nil {
					return err
				}
				if int64(goCohort) != sqlCohort {
					text, _ := x.user.ID(rows[idx])
					x.m.add(fmt.Sprintf("row %d (%.40q, %d bytes)", idx, text, len(text)), goCohort, sqlCohort)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got != len(ids) {
			t.Fatalf("read %d rows, wrote %d", got, len(ids))
		}
		for _, x := range cs {
			x.m.done(got)
		}
	})

	t.Run("Filter", func(t *testing.T) {
		const b = cohort.DefaultBuckets
		goCohorts := make([]int, len(ids))
		for i, id := range ids {
			goCohorts[i] = cohort.Of(id, b)
		}
		for _, spec := range []string{"0-99", "5000-5099", "9900-9999", "1234", "0", "9999", "0-9999", "0-49,2500-2599,9990-9999"} {
			rs, err := cohort.Parse(spec, b)
			if err != nil {
				t.Fatal(err)
			}
			for _, col := range columns {
				u, expr := userExpr(col.name, col.typ)
				var conds []string
				params := map[string]any{}
				for i, r := range rs {
					conds = append(conds, fmt.Sprintf("%s BETWEEN @first%d AND @last%d", cohort.SQL(expr, b), i, i))
					params[fmt.Sprintf("first%d", i)] = int64(r.First)
					params[fmt.Sprintf("last%d", i)] = int64(r.Last)
				}
				var want []int64
				for i := range ids {
					ci, err := u.Cohort(rows[i], b)
					if err != nil {
						t.Fatal(err)
					}
					if col.name == "UserId" && ci != goCohorts[i] {
						t.Fatalf("row %d: User.Cohort %d, Of %d", i, ci, goCohorts[i])
					}
					if slices.ContainsFunc(rs, func(r cohort.Range) bool { return r.Contains(ci) }) {
						want = append(want, int64(i))
					}
				}
				stmt := spanner.Statement{SQL: "SELECT Idx FROM CohortUsers WHERE " + strings.Join(conds, " OR ") + " ORDER BY Idx", Params: params}
				var got []int64
				err := c.Single().Query(ctx, stmt).Do(func(row *spanner.Row) error {
					var idx int64
					if err := row.Column(0, &idx); err != nil {
						return err
					}
					got = append(got, idx)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s in cohorts %s: Spanner returned %d rows, Go puts %d there; first differences: %s", col.name, spec, len(got), len(want), firstDifferences(got, want, 5))
					continue
				}
				if spec == "0-9999" && len(got) != len(ids) {
					t.Errorf("%s in every cohort: %d rows of %d", col.name, len(got), len(ids))
				}
				if strings.Contains(spec, "-") && len(got) == 0 {
					t.Errorf("%s in cohorts %s: no rows; the test shows nothing", col.name, spec)
				}
				t.Logf("%s in cohorts %s: %d rows, the same in Spanner and Go", col.name, spec, len(got))
			}
		}
	})
}

// firstDifferences names the first n values in only one of two sorted
// lists.
func firstDifferences(got, want []int64, n int) string {
	var out []string
	for i, j := 0, 0; (i < len(got) || j < len(want)) && len(out) < n; {
		switch {
		case j == len(want) || i < len(got) && got[i] < want[j]:
			out = append(out, fmt.Sprintf("row %d only from Spanner", got[i]))
			i++
		case i == len(got) || want[j] < got[i]:
			out = append(out, fmt.Sprintf("row %d only from Go", want[j]))
			j++
		default:
			i++
			j++
		}
	}
	return strings.Join(out, ", ")
}
