package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rekeyio/rekey/bench/internal/migrate"
	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/pipeline"
)

// compareLoad measures `rekey load` (the phase-aware load through the
// application library, every cohort done: each record to new only)
// against `rekey run` of the same JSON Lines file into an empty
// Datastore namespace: the same records, rewritten the same way, to the
// same kind of target.
func compareLoad(ctx context.Context, o options, dir string, rows []Account) error {
	in := filepath.Join(dir, "load.jsonl")
	if err := writeJSONL(in, rows, kind); err != nil {
		return err
	}
	client, err := emulator.DatastoreClient(ctx, emulator.DatastoreProject())
	if err != nil {
		return err
	}
	defer client.Close()
	sides := []side{
		{name: fmt.Sprintf("rekey run → Datastore (%s)", o.runner), tag: "load-run", run: func() (sample, error) {
			return runToDatastore(ctx, o, dir, in, client, "tlrun")
		}},
		{name: fmt.Sprintf("rekey load → Datastore, every cohort done (%s)", o.runner), tag: "load-load", run: func() (sample, error) {
			ns := emulator.UniqueNamespace("tlload")
			s, err := rekeyLoad(ctx, o, dir, in, ns)
			if err == nil {
				err = checkDatastore(ctx, client, ns, o.rows)
			}
			return s, err
		}},
	}
	if _, err := putMulti(ctx, client, emulator.UniqueNamespace("tlwarm"), rows, 8); err != nil {
		return fmt.Errorf("warming the emulator up: %w", err)
	}
	fmt.Printf("\nLoad: `rekey load` of a JSON Lines file through the cutover library (every cohort done) against `rekey run` of the same file, `rewrite: {strategy: %s}`, into an empty namespace\n\n", o.strategy)
	return compare(o, sides)
}

// rekeyLoad runs `rekey load` of the file in into a Datastore migration
// whose new entities go to namespace ns, with every cohort moved to done
// first; the time is the load's pipeline run (migration.Result.Elapsed).
func rekeyLoad(ctx context.Context, o options, dir, in, ns string) (sample, error) {
	const ttl, skew = 5 * time.Second, time.Second // a phase refresh gets ttl/3 while the load keeps the emulator busy
	path := filepath.Join(dir, "load.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`
source: {type: datastore, project: %[1]s, namespace: %[2]s, kind: %[3]s}
target: {type: datastore, project: %[1]s, namespace: %[4]s, kind: %[3]s}
rewrite: {strategy: %[5]s}
cohort: {user: AccountId, cache_ttl: %[6]s, skew: %[7]s}
`, emulator.DatastoreProject(), emulator.UniqueNamespace("tlold"), kind, ns, o.strategy, ttl, skew)), 0o644); err != nil {
		return sample{}, err
	}
	cfg, err := migrate.LoadConfig(path, filepath.Join(dir, "load-dead.jsonl"))
	if err != nil {
		return sample{}, err
	}
	c, err := emulator.DatastoreClient(ctx, emulator.DatastoreProject())
	if err != nil {
		return sample{}, err
	}
	defer c.Close()
	mig := "bench-load"
	all := []cohort.Range{{First: 0, Last: cfg.Cohort.Buckets - 1}}
	if _, _, err := (phases.DatastoreStore{Client: c, Namespace: ns}).Move(ctx, phases.Move{Migration: mig, Buckets: cfg.Cohort.Buckets, Cohorts: all, To: phases.Done, Force: true, Who: "bench"}); err != nil {
		return sample{}, err
	}
	time.Sleep(ttl + skew) // the switch to new takes effect once every instance knows it
	var res *migration.Result
	s, err := timed(datastoreCommitSpan, func() (time.Duration, error) {
		start := time.Now()
		var err error
		_, res, err = operator.Load(ctx, cfg, operator.LoadFiles{Path: in, Format: "jsonl", Delimiter: ",", Migration: mig}, pipeline.Runner{Runner: o.runner})
		return time.Since(start), err
	})
	if err != nil {
		return s, err
	}
	s.elapsed = res.Elapsed
	if w := res.Counters[operator.LoadNewOnly]; w != int64(o.rows) {
		var first []byte
		if files, _ := filepath.Glob(cfg.DeadLetter + "*"); len(files) > 0 {
			first, _ = os.ReadFile(files[0])
		}
		if i := bytes.IndexByte(first, '\n'); i > 0 {
			first = first[:i]
		}
		return s, fmt.Errorf("rekey load wrote %d records to new only, want %d (counters: %v); the first dead letter: %s", w, o.rows, res.Counters, first)
	}
	return s, nil
}
