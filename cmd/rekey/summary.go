package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
)

// runSummary is what `--summary FILE` writes for automation: one JSON
// object, written when the run ends, failed or not.
type runSummary struct {
	Command string `json:"command"`
	Config  string `json:"config"`
	Runner  string `json:"runner"`
	JobID   string `json:"job_id,omitempty"`
	DryRun  bool   `json:"dry_run"`
	// Status is "ok", "partial" (some records were dead-lettered),
	// "interrupted" (a SIGINT or SIGTERM stopped it; Stopped says what
	// the runner reported of the stop) or "failed" (Error says why).
	Status         string           `json:"status"`
	Error          string           `json:"error,omitempty"`
	Stopped        string           `json:"stopped,omitempty"`
	Started        time.Time        `json:"started"`
	Finished       time.Time        `json:"finished"`
	ElapsedSeconds float64          `json:"elapsed_seconds"`
	Source         string           `json:"source,omitempty"`
	Target         string           `json:"target,omitempty"`
	Counters       map[string]int64 `json:"counters"`
	DeadLetters    deadSummary      `json:"dead_letters"`
}

// deadSummary counts a run's dead letters: from the counters, and, for a
// local dead-letter file, by stage and by reason (the most frequent
// first, at most maxReasons).
type deadSummary struct {
	Path    string           `json:"path,omitempty"`
	Total   int64            `json:"total"`
	ByStage map[string]int64 `json:"by_stage,omitempty"`
	Reasons []reasonCount    `json:"reasons,omitempty"`
}

type reasonCount struct {
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
}

const maxReasons = 20

// notStarted is what the summary of a run stopped before its job
// started says of the stop.
const notStarted = "the run was stopped before its job started: no record was read or written"

// newSummary is the summary of a run of command that started at started
// and ended with res and err; interrupted says that a signal stopped it
// (its context was cancelled), whatever error the stop caused (a store's
// client may report it as its own "Canceled").
func newSummary(command string, o *RunOptions, job *migration.Job, res *migration.Result, err error, started time.Time, dryRun, interrupted bool) runSummary {
	s := runSummary{Command: command, Config: o.Config, Runner: o.Runner, DryRun: dryRun, Status: "ok",
		Started: started.UTC(), Finished: time.Now().UTC(), Counters: map[string]int64{}}
	s.ElapsedSeconds = s.Finished.Sub(s.Started).Seconds()
	switch {
	case interrupted || errors.Is(err, context.Canceled):
		s.Status = "interrupted"
		s.Stopped = "the run was stopped before its end; what was committed stays and a re-run of the same config converges"
		switch {
		case err == nil || errors.Is(err, errPartial):
			s.Stopped = "the stop came as the run ended: its job had finished"
		case res == nil:
			s.Stopped = notStarted
		case res.Stop != nil:
			s.Stopped = res.Stop.String() + "; " + s.Stopped
		}
	case errors.Is(err, errPartial):
		s.Status = "partial"
	case err != nil:
		s.Status, s.Error = "failed", err.Error()
	}
	if res != nil {
		s.JobID = res.JobID
		for k, v := range res.Counters {
			s.Counters[k] = v
		}
		s.DeadLetters.Total = res.Counters[migration.DeadLettered]
	}
	if job != nil {
		src, tgt := job.Config.Source, job.Config.Target
		s.Source = src.Type + " " + src.Name()
		s.Target = tgt.Type + " " + tgt.Name()
		s.DeadLetters.Path = job.DeadLetterPath
		if s.DeadLetters.Total > 0 && !strings.Contains(job.DeadLetterPath, "://") {
			s.DeadLetters.ByStage, s.DeadLetters.Reasons = tallyDeadLetters(job.DeadLetterPath)
		}
	}
	return s
}

// tallyDeadLetters counts a dead-letter file's lines by stage and reason.
func tallyDeadLetters(path string) (map[string]int64, []reasonCount) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	stages, reasons := map[string]int64{}, map[string]int64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		// A dead letter whose record a redrive cannot take (one not in
		// UTF-8, in record_base64) is still one of its stage.
		d, _, err := record.ParseDeadLetter(sc.Bytes())
		if errors.Is(err, record.ErrNotDeadLetter) {
			stages["unreadable"]++
			continue
		}
		stages[d.Stage]++
		reasons[d.Reason]++
	}
	out := make([]reasonCount, 0, len(reasons))
	for r, n := range reasons {
		out = append(out, reasonCount{Reason: r, Count: n})
	}
	slices.SortFunc(out, func(a, b reasonCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Reason, b.Reason))
	})
	if len(out) > maxReasons {
		out = out[:maxReasons]
	}
	return stages, out
}

// writeSummary writes s to path as indented JSON, through a temporary
// file in the same folder, so a reader never sees half of it.
func writeSummary(path string, s runSummary) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".rekey-summary-*")
	if err != nil {
		return fmt.Errorf("--summary: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("--summary: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("--summary: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("--summary: %w", err)
	}
	return nil
}
