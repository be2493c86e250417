package cutover_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/migration/config"
)

// TestOpenSpannerConfig opens the library as an application outside the
// module would: the migration's config a Go value, the client of new the
// application's own. A client of another database than the target is
// refused, a config without cohort.user too; the library writes new
// through the given client in dual_write and leaves it open on Close.
func TestOpenSpannerConfig(t *testing.T) {
	ctx := context.Background()
	oldC := emulator.TestDB(t, logsDDL)
	newC := emulator.TestDB(t, append([]string{logsV2DDL}, cutover.SpannerDDL...)...)
	dbID := func(c *spanner.Client) string { return c.DatabaseName()[strings.LastIndex(c.DatabaseName(), "/")+1:] }
	cfg := config.Config{
		Source:  config.Endpoint{Type: config.TypeSpanner, Project: emulator.SpannerProject(), Instance: emulator.SpannerInstance(), Database: dbID(oldC), Table: "Logs"},
		Target:  config.Endpoint{Type: config.TypeSpanner, Project: emulator.SpannerProject(), Instance: emulator.SpannerInstance(), Database: dbID(newC), Table: "LogsV2"},
		Rewrite: config.RewriteConfig{Strategy: "shard", Params: map[string]any{"n": 8, "mode": "abs"}},
		Cohort:  config.CohortConfig{User: "UserId"},
	}
	mig := fmt.Sprintf("logs-%d", time.Now().UnixNano())
	o := cutover.Options{Migration: mig, CacheTTL: envTTL, Skew: envSkew}

	wrong := o
	wrong.NewSpannerClient = oldC
	if lib, err := cutover.OpenSpannerConfig(ctx, oldC, cfg, wrong); err == nil || !strings.Contains(err.Error(), "not of the migration's target") {
		if lib != nil {
			lib.Close()
		}
		t.Errorf("a client of the source database as new's: got %v, want it refused", err)
	}
	noUser := cfg
	noUser.Cohort.User = ""
	if lib, err := cutover.OpenSpannerConfig(ctx, oldC, noUser, o); err == nil || !strings.Contains(err.Error(), "set cohort.user") {
		if lib != nil {
			lib.Close()
		}
		t.Errorf("no cohort.user: got %v, want it refused", err)
	}

	o.NewSpannerClient = newC
	lib, err := cutover.OpenSpannerConfig(ctx, oldC, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	e := &spannerEnv{lib: lib, old: oldC, new: newC, store: cutover.SpannerStore{Client: newC}, migration: mig}
	e.setPhase(t, "alice", cutover.DualWrite)
	if err := lib.Write(ctx, logRow("alice", 1, "v1")); err != nil {
		t.Fatal(err)
	}
	if got := pages(t, newC, "LogsV2", "alice"); len(got) != 1 || got[0] != "v1" {
		t.Errorf("new holds %q, want [v1] written through the given client", got)
	}
	lib.Close()
	if got := pages(t, newC, "LogsV2", "alice"); len(got) != 1 {
		t.Errorf("after Close, the application's client of new reads %q", got)
	}
}
