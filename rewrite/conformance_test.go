package rewrite_test

import (
	"testing"

	"github.com/rekeyio/rekey/rewrite"
	"github.com/rekeyio/rekey/rewrite/rewritetest"
)

// conformanceConfigs are the strategy configurations the conformance suite
// runs on: every strategy, with its main parameter variants.
var conformanceConfigs = []rewrite.StepConfig{
	{Strategy: "none"},
	{Strategy: "hashprefix"},
	{Strategy: "hashprefix", Params: rewrite.Params{"n": 32, "sep": ""}},
	{Strategy: "hashprefix", Params: rewrite.Params{"n": 16, "hash": "farm", "sep": "_", "elements": "root"}},
	{Strategy: "hashprefix", Params: rewrite.Params{"n": 1, "elements": "leaf"}},
	{Strategy: "shard"},
	{Strategy: "shard", Params: rewrite.Params{"n": 7, "mode": "abs"}},
	{Strategy: "shard", Params: rewrite.Params{"n": 1}},
	{Strategy: "bitreverse"},
	{Strategy: "bitreverse", Params: rewrite.Params{"preserve_sign": false}},
	{Strategy: "uuid"},
	{Strategy: "uuid", Params: rewrite.Params{"keep": true, "elements": "leaf"}},
	{Strategy: "uuid", Params: rewrite.Params{"version": 4}},
	{Strategy: "swap", Params: rewrite.Params{"order": "1"}},
	{Strategy: "reverse"},
	{Strategy: "reverse", Params: rewrite.Params{"elements": "root"}},
	{Strategy: "bucket", Params: rewrite.Params{"n": 10}},
	{Strategy: "bucket", Params: rewrite.Params{"n": 7, "unit": "us"}},
	{Strategy: "generation", Params: rewrite.Params{"g": 3}},
	{Strategy: "generation", Params: rewrite.Params{"g": 4, "as": "column"}},
	{Strategy: "generation", Params: rewrite.Params{"g": 5, "as": "parent", "name": "Gen"}},
	{Strategy: "generation", Params: rewrite.Params{"g": 12, "as": "prefix", "sep": "."}},
	{Strategy: "chain", Steps: []rewrite.StepConfig{{Strategy: "reverse"}, {Strategy: "hashprefix"}, {Strategy: "generation", Params: rewrite.Params{"g": 2, "as": "prefix"}}}},
	{Strategy: "chain", Steps: []rewrite.StepConfig{{Strategy: "bitreverse"}, {Strategy: "shard", Params: rewrite.Params{"n": 4}}, {Strategy: "generation"}}},
}

func TestConformance(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range conformanceConfigs {
		s, err := rewrite.New(c)
		if err != nil {
			t.Fatalf("New(%+v): %v", c, err)
		}
		covered[s.Info().Name] = true
		t.Run(s.Spec().String(), func(t *testing.T) { rewritetest.Run(t, s) })
	}
	for _, info := range rewrite.Strategies() {
		if !covered[info.Name] {
			t.Errorf("strategy %s is not in the conformance configs", info.Name)
		}
	}
}
