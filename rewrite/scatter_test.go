package rewrite

import "testing"

func TestScatters(t *testing.T) {
	two, err := ParseKeySchema("T", "AccountId STRING(36), Seq INT64")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		cfg       StepConfig
		datastore bool
		want      bool
	}{
		{"hashprefix, first column by default", StepConfig{Strategy: "hashprefix"}, false, true},
		{"hashprefix of the first column by name", StepConfig{Strategy: "hashprefix", Params: Params{"column": "accountid"}}, false, true},
		{"hashprefix of the second column: the first still orders", StepConfig{Strategy: "hashprefix", Params: Params{"column": "Seq"}}, false, false},
		{"hashprefix of 2 digits: 256 values", StepConfig{Strategy: "hashprefix", Params: Params{"n": 2}}, false, false},
		{"hashprefix of 3 digits", StepConfig{Strategy: "hashprefix", Params: Params{"n": 3}}, false, true},
		{"hashprefix, Datastore, every element", StepConfig{Strategy: "hashprefix"}, true, true},
		{"hashprefix, Datastore, root", StepConfig{Strategy: "hashprefix", Params: Params{"elements": "root"}}, true, true},
		{"hashprefix, Datastore, leaf only", StepConfig{Strategy: "hashprefix", Params: Params{"elements": "leaf"}}, true, false},
		{"bitreverse of the second column", StepConfig{Strategy: "bitreverse", Params: Params{"column": "Seq"}}, false, false},
		{"bitreverse, Datastore", StepConfig{Strategy: "bitreverse"}, true, true},
		{"uuid", StepConfig{Strategy: "uuid"}, false, true},
		{"uuid, kept key", StepConfig{Strategy: "uuid", Params: Params{"keep": true}}, false, true},
		{"uuid, Datastore", StepConfig{Strategy: "uuid", Params: Params{"version": 4}}, true, true},
		{"none", StepConfig{Strategy: "none"}, false, false},
		{"swap", StepConfig{Strategy: "swap", Params: Params{"order": []any{"Seq"}}}, false, false},
		{"shard", StepConfig{Strategy: "shard", Params: Params{"n": 16}}, false, false},
		{"reverse", StepConfig{Strategy: "reverse"}, false, false},
		{"chain", StepConfig{Strategy: "chain", Steps: []StepConfig{{Strategy: "hashprefix"}}}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := Scatters(st, two, tc.datastore); got != tc.want {
				t.Errorf("Scatters(%s) = %v, want %v", st.Spec(), got, tc.want)
			}
		})
	}
	st, _ := New(StepConfig{Strategy: "hashprefix"})
	if Scatters(st, KeySchema{}, false) {
		t.Error("Scatters with no key columns = true, want false")
	}
}
