package cutover_test

import (
	"context"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
)

// TestSpannerRepairTallyInReadNew: in read_new (new authoritative) old
// misses a write and a delete (the tap refuses old's commits; the repair
// log says old missed them). The repair finds the two differences,
// worded from new's side (old differs on one record and holds one new
// lacks), and counts both repaired, in old from the repair log: found =
// repaired + settled + left. Its report said "0 written, 0 deleted" for
// them before.
func TestSpannerRepairTallyInReadNew(t *testing.T) {
	ctx := context.Background()
	tapOld, tapNew := twoTaps(t, emulator.EnvSpannerHost)
	e := newSpannerEnvVia(t, false, "", tapOld.Addr(), tapNew.Addr())
	const user = "user-tally"
	c := cohort.Of(user, cohort.DefaultBuckets)
	e.setPhase(t, user, phases.ReadNew)
	for seq := range int64(3) {
		if err := e.lib.Write(ctx, logRow(user, seq, "v1")); err != nil {
			t.Fatal(err)
		}
	}
	tapOld.SetFaults(committap.Faults{Rate: 1, Kinds: []committap.Fault{{Code: codes.Unavailable}}, Tables: []string{"Logs"}})
	if err := e.lib.Write(ctx, logRow(user, 1, "v2")); err != nil {
		t.Fatalf("a write whose second write failed: %v, want success (new took it)", err)
	}
	if err := e.lib.Delete(ctx, logKey(user, 2)); err != nil {
		t.Fatalf("a delete whose second write failed: %v, want success (new took it)", err)
	}
	tapOld.SetFaults(committap.Faults{})
	cfg, err := config.LoadFile(e.configPath)
	if err != nil {
		t.Fatal(err)
	}
	r, err := operator.RepairTallied(ctx, cfg, operator.RepairOptions{Migration: e.migration, Cohorts: []cohort.Range{{First: c, Last: c}}, ReportPath: filepath.Join(t.TempDir(), "repair.jsonl"), Who: "test"}, pipeline.Runner{Runner: "prism"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("repair: %s; tally %+v", r.Result.Counters, r.Sides)
	if len(r.Sides) != 1 {
		t.Fatalf("repair tally %+v, want one side", r.Sides)
	}
	s := r.Sides[0]
	if s.Authoritative != "new" || s.Lacks != 0 || s.Extra != 1 || s.Differ != 1 || s.Settled != 0 || s.RepairedOld != 2 || s.Found() != 2 || s.Repaired() != 2 || s.Left() != 0 {
		t.Errorf("repair tally %+v (found %d, repaired %d, left %d); want new authoritative, old holding 1 new lacks and 1 differing, both repaired in old from the log", s, s.Found(), s.Repaired(), s.Left())
	}
	if got := pages(t, e.old, "Logs", user); len(got) != 2 || got[1] != "v2" {
		t.Errorf("old after the repair holds %q, want [v1 v2]", got)
	}
}
