package demo

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/plan/detect"
)

// planRows is the table the demo's plan stands its 2,000 access-log rows
// for: at that size a load takes long enough for splits to matter.
const planRows = 10_000_000

// plan makes `rekey plan`'s report for the first migration (UserAccessLogs,
// keyed by time, rewritten with a shard column) and checks that it shows
// the hotspot in the old keys' load and not in the new keys'.
func (e *demoEnv) plan(ctx context.Context) error {
	if e.logs == nil {
		return nil
	}
	out, err := e.planDir()
	if err != nil {
		return err
	}
	fmt.Fprintf(e.w, "\n4. rekey plan for migration 1: its %s rows stand for a table of %s, loaded into 3 nodes (writes nothing):\n", "2,000", detect.Thousands(planRows))
	p, files, err := pipeline.Plan(ctx, e.logs, pipeline.PlanRequest{Out: out, Sample: 100_000, Rows: planRows, PreSplitPerNode: 10}, pipeline.Runner{Runner: e.runner})
	if err != nil {
		return err
	}
	p.Summary(e.w, files)
	e.check(p.Before.HotspotScore >= 2.5 && p.After.HotspotScore <= 1.5,
		"the old keys' load is pinned to one node at a time (hotspot score %.2f of 3), the new keys' is spread (%.2f)", p.Before.HotspotScore, p.After.HotspotScore)
	fmt.Fprintf(e.w, "\nThe plan's report (open it in a browser; it needs no network): %s\n", files.HTML)
	return nil
}

// planDir is where the demo's report goes: plan in the folder of --out,
// else rekey-demo-plan in the temporary directory, replaced if it holds an
// earlier plan, else a new directory next to it (nothing of the user's is
// replaced).
func (e *demoEnv) planDir() (string, error) {
	if e.outGiven {
		return filepath.Join(e.dir, "plan"), nil
	}
	return tempDir("rekey-demo-plan", "plan.json")
}
