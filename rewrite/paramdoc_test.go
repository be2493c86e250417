package rewrite_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/rekeyio/rekey/rewrite"
)

// buildable are the least parameters each strategy needs to build.
var buildable = map[string]rewrite.StepConfig{
	"swap":  {Strategy: "swap", Params: rewrite.Params{"order": []any{"UserId"}}},
	"chain": {Strategy: "chain", Steps: []rewrite.StepConfig{{Strategy: "none"}}},
}

// Every parameter a strategy reads is declared in its Info.Params with a
// Doc, every declared one is read, and the documented defaults are the
// ones the strategy uses (its Spec with no parameters given).
func TestParamDocsMatchWhatStrategiesRead(t *testing.T) {
	for _, info := range rewrite.Strategies() {
		t.Run(info.Name, func(t *testing.T) {
			var names []string
			for _, p := range info.Params {
				names = append(names, p.Name)
				switch {
				case p.Doc == "":
					t.Errorf("parameter %q is read but not documented: add it to the Params of %s's Info", p.Name, info.Name)
				case p.Type == "":
					t.Errorf("parameter %q is documented but never read", p.Name)
				}
			}
			if i, j, dup := firstDuplicate(names); dup {
				t.Errorf("parameter %q is declared twice (%d and %d)", names[i], i, j)
			}
			cfg, ok := buildable[info.Name]
			if !ok {
				cfg = rewrite.StepConfig{Strategy: info.Name}
			}
			s, err := rewrite.New(cfg)
			if err != nil {
				t.Fatalf("New(%+v): %v", cfg, err)
			}
			spec := s.Spec()
			if len(spec.Steps) > 0 {
				return // chain: its steps' parameters are theirs
			}
			specNames := slices.Sorted(maps.Keys(spec.Params))
			if got := slices.Sorted(slices.Values(names)); !slices.Equal(got, specNames) {
				t.Errorf("documented parameters %q, the strategy's spec has %q", got, specNames)
			}
			for _, p := range info.Params {
				if _, given := cfg.Params[p.Name]; !given && spec.Params[p.Name] != p.Default {
					t.Errorf("parameter %q: documented default %q, the strategy uses %q", p.Name, p.Default, spec.Params[p.Name])
				}
			}
		})
	}
}

func TestParamDocTypes(t *testing.T) {
	want := map[string]rewrite.ParamDoc{
		"hashprefix/n":      {Type: "integer 1..32", Default: "4"},
		"hashprefix/hash":   {Type: "one of md5, farm", Default: "md5"},
		"hashprefix/column": {Type: "string", Default: ""},
		"uuid/keep":         {Type: "true or false", Default: "false"},
		"uuid/namespace":    {Type: "string", Default: rewrite.DefaultUUIDNamespace},
		"generation/as":     {Type: "one of column, prefix, parent (or empty)", Default: ""},
		"generation/sep":    {Type: "string", Default: "-"},
		"shard/columns":     {Type: "list of strings (or one comma-separated string)", Default: ""},
	}
	got := map[string]rewrite.ParamDoc{}
	for _, info := range rewrite.Strategies() {
		for _, p := range info.Params {
			got[info.Name+"/"+p.Name] = rewrite.ParamDoc{Type: p.Type, Default: p.Default}
		}
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s: got %+v (present %v), want %+v", k, g, ok, w)
		}
	}
}

func firstDuplicate(list []string) (i, j int, ok bool) {
	for j := range list {
		if i := slices.Index(list[:j], list[j]); i >= 0 {
			return i, j, true
		}
	}
	return 0, 0, false
}
