package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/internal/progress"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
)

// TestProgressPlainWithTotal: off a terminal, the run's progress is
// plain lines (no carriage returns or escapes) with the percent and ETA
// once the total estimated beside the run arrives.
func TestProgressPlainWithTotal(t *testing.T) {
	var b bytes.Buffer
	start := time.Now().Add(-4 * time.Second)
	now := func() migration.Counters {
		return migration.Counters{migration.Read: 50, migration.Written: 40, migration.DeadLettered: 10}
	}
	total := func(context.Context) (progress.Total, bool) {
		return progress.Total{N: 200, Exact: true, From: "COUNT(*)"}, true
	}
	stop := startProgress(context.Background(), &b, start, now, total, countsWritten)
	time.Sleep(1300 * time.Millisecond)
	stop()
	out := b.String()
	if !strings.HasPrefix(out, "rekey: 25% (50 of 200 records, from COUNT(*)), 50 read, 40 written, 10 dead-lettered") || !strings.Contains(out, "ETA 1") || strings.ContainsAny(out, "\r\033") { // ETA: 150 records left at 10 a second, about 15s
		t.Errorf("progress output %q", out)
	}
}

// TestEstimateTotalFiles: a JSON Lines source's total comes from its
// file; a dry run estimates none.
func TestEstimateTotalFiles(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	var lines strings.Builder
	for i := range 12 {
		fmt.Fprintf(&lines, `{"__table__":"T","Id":%d}`+"\n", i)
	}
	if err := os.WriteFile(in, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	j := migration.FromConfig(&config.Config{Source: config.Endpoint{Type: config.TypeJSONL, Path: in}})
	if got, ok := estimateTotal(context.Background(), j); !ok || got != (progress.Total{N: 12, Exact: true, From: "file sizes"}) {
		t.Errorf("total %+v %v, want 12 exact from file sizes", got, ok)
	}
	j.DryRun = true
	if _, ok := estimateTotal(context.Background(), j); ok {
		t.Error("a dry run's total")
	}
}
