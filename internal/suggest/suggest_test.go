package suggest

import "testing"

func TestClosest(t *testing.T) {
	known := []string{"none", "hashprefix", "shard", "bitreverse"}
	for in, want := range map[string]string{
		"hashprefx":  "hashprefix", // one deleted
		"shrad":      "shard",      // two swapped: distance 2
		"bitrevers":  "bitreverse",
		"nope":       "none",
		"uuidv4":     "", // nothing within 2
		"":           "",
		"hashprefix": "hashprefix",
	} {
		if got := Closest(in, known); got != want {
			t.Errorf("Closest(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Closest("ab", []string{"ax", "ay"}); got != "ax" {
		t.Errorf("a tie gives %q, want the first, ax", got)
	}
}
