package plan

import (
	"reflect"
	"testing"
)

func TestLabelTexts(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		// A namespace all keys share is left out of the labels.
		{[]string{`ns="ns-1234567",Account/"u1"`, `ns="ns-1234567",Account/"u2"`}, []string{`Account/"u1"`, `Account/"u2"`}},
		{[]string{`db="d",ns="n",A/1`, `db="d",ns="n",A/2`}, []string{`A/1`, `A/2`}},
		// Namespaces that differ are kept: they tell the ranges apart.
		{[]string{`ns="a",A/1`, `ns="b",A/1`}, []string{`ns="a",A/1`, `ns="b",A/1`}},
		// Spanner keys have no scope.
		{[]string{`(1, "x")`, `(2, "y")`}, []string{`(1, "x")`, `(2, "y")`}},
		{[]string{`ns="q\"uote",A/1`}, []string{`A/1`}},
	} {
		if got := labelTexts(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("labelTexts(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
