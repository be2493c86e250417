package integration

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/beamtest"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/internal/write/throttle"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// sharedRampRows is each job's share of TestRampSharedByWorkerProcesses:
// the two jobs' 12,000 writes take about 18 s of the ramp, so the second
// job's process writes beside the first for several seconds after its
// 10 s join hold.
const sharedRampRows = 6000

// TestRampSharedByWorkerProcesses runs two Datastore → Datastore jobs at
// once into one kind, each job's SDK worker in a process of its own
// (a worker pool started by the test, its workers' Datastore address a
// commit tap in front of the emulator), both naming one ramp.run: the
// ramp-up's lease in the target is then shared by two worker processes
// for real, as it is by a Dataflow job's workers (prism starts one worker
// per job, so one job cannot show it). Judged at the store: every
// one-second bin of both jobs' data commits together stays within 1.15x
// the schedule's budget, from the first data commit; both jobs' commits
// overlap for at least 3 s; the lease holds two processes, neither of
// them the test's. Without the shared lease each process would spend
// the whole budget, twice it together, and the bins overlapping would
// fail.
func TestRampSharedByWorkerProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: two jobs on a worker pool of the test's own")
	}
	emulator.RequireDatastore(t)
	c := emulator.TestDatastore(t)
	srcA, srcB, dst := emulator.UniqueNamespace("shared-a"), emulator.UniqueNamespace("shared-b"), emulator.UniqueNamespace("shared-dst")
	for _, src := range []struct{ ns, prefix string }{{srcA, "jobA"}, {srcB, "jobB"}} {
		var recs []record.Record
		for i := range sharedRampRows {
			k := rewrite.DatastoreKey{Namespace: src.ns, Path: []rewrite.PathElement{{Kind: "Event", Name: fmt.Sprintf("%s%05d", src.prefix, i)}}}
			recs = append(recs, record.Record{Key: &k, Fields: []record.Field{{Name: "Page", Value: record.String(fmt.Sprintf("/p/%d", i))}}})
		}
		putEntities(t, c, recs)
	}
	tap := startTap(t, emulator.EnvDatastoreHost)
	pool := beamtest.StartWorkerPool(t, emulator.EnvDatastoreHost+"="+tap.Addr())
	run := "shared-" + strings.TrimPrefix(dst, "ns-")
	cfgs := map[string]*config.Config{}
	for job, src := range map[string]string{"jobA": srcA, "jobB": srcB} {
		cfgs[job] = loadYAML(t, fmt.Sprintf(`
source: {type: datastore, project: %[1]s, namespace: %[2]s, kind: Event}
target: {type: datastore, project: %[1]s, namespace: %[3]s, kind: Event}
rewrite: {strategy: none}
ramp: {profile: custom, base: %[4]d, growth: %[5]g, interval_seconds: %[6]g, run: %[7]s}
dead_letter: %[8]q
`, emulator.DatastoreProject(), src, dst, rampBase, rampGrowth, rampInterval.Seconds(), run, filepath.Join(t.TempDir(), job+"-dead.jsonl")))
	}
	var wg sync.WaitGroup
	errs := map[string]error{}
	var mu sync.Mutex
	for job, cfg := range cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := migration.Run(context.Background(), cfg, migration.Options{}, pipeline.Runner{Runner: "universal"})
			mu.Lock()
			errs[job] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	for job, err := range errs {
		if err != nil {
			t.Fatalf("%s: %v", job, err)
		}
	}
	if got := countEntities(t, c, dst, "Event"); got != 2*sharedRampRows {
		t.Fatalf("%d entities written, want %d", got, 2*sharedRampRows)
	}

	// Two worker processes, at once, in folders of their own.
	started := pool.Started(t)
	if len(started) != 2 || started[0].PID == started[1].PID || started[0].Dir == started[1].Dir {
		t.Fatalf("want two workers in two processes and folders, the pool started %+v", started)
	}
	for _, e := range pool.Workers(t) {
		if e.Event == "exit" && e.Time.Before(started[1].Time) {
			t.Fatalf("worker %s exited (%s) before worker %s started (%s): the jobs did not run at once", e.ID, e.Time, started[1].ID, started[1].Time)
		}
	}

	// The budget, at the store.
	var commits []committap.Commit
	for _, cm := range tap.Commits() {
		if cm.Err == nil && len(cm.Mutations) > 0 && cm.Mutations[0].Table == "Event" {
			commits = append(commits, cm)
		}
	}
	sort.Slice(commits, func(i, j int) bool { return commits[i].At.Before(commits[j].At) })
	first := commits[0].At
	sched, _ := throttle.NewSchedule(throttle.ProfileCustom, rampBase, rampGrowth, rampInterval, first)
	type bin struct{ a, b int }
	bins := map[int]*bin{}
	last := 0
	for _, cm := range commits {
		sec := int(cm.At.Sub(first) / time.Second)
		last = max(last, sec)
		if bins[sec] == nil {
			bins[sec] = &bin{}
		}
		for _, m := range cm.Mutations {
			if strings.Contains(m.Text, `"jobA`) {
				bins[sec].a++
			} else {
				bins[sec].b++
			}
		}
	}
	overlap, worst := 0, 0.0
	var report []string
	for sec := 0; sec <= last; sec++ {
		b := bins[sec]
		if b == nil {
			b = &bin{}
		}
		from := first.Add(time.Duration(sec) * time.Second)
		budget := sched.Budget(from, from.Add(time.Second))
		sum := float64(b.a + b.b)
		worst = math.Max(worst, sum/budget)
		if b.a > 0 && b.b > 0 {
			overlap++
		}
		report = append(report, fmt.Sprintf("%d:%d+%d/%.0f", sec, b.a, b.b, budget))
		if sum > 1.15*budget {
			t.Errorf("second %d after the first data commit: %d + %d writes, budget %.0f (more than 1.15x)", sec, b.a, b.b, budget)
		}
	}
	t.Logf("%d commits from two worker processes (%d and %d); per second (job A + job B / budget) %s; worst bin %.2fx; both wrote in %d seconds",
		len(commits), started[0].PID, started[1].PID, strings.Join(report, " "), worst, overlap)
	if overlap < 3 {
		t.Errorf("the two jobs wrote together in %d seconds, want at least 3: the lease was not shared under load", overlap)
	}
	procs := rampProcesses(t, c, dst, run)
	if len(procs) != 2 {
		t.Errorf("the lease of run %s holds processes %v, want two", run, procs)
	}
	for _, p := range procs {
		if strings.Contains(p, fmt.Sprintf("-%d-", os.Getpid())) {
			t.Errorf("process %s of the lease is the test's own", p)
		}
	}
}

// rampProcesses returns the processes of run's ramp-up lease in namespace
// ns (datastoredb.RampLease).
func rampProcesses(t *testing.T, c *datastore.Client, ns, run string) []string {
	t.Helper()
	runKey := datastore.NameKey(datastoredb.RampKind, run, nil)
	runKey.Namespace = ns
	keys, err := c.GetAll(context.Background(), datastore.NewQuery(datastoredb.RampProcessKind).Namespace(ns).Ancestor(runKey).KeysOnly(), nil)
	if err != nil {
		t.Fatalf("reading the lease of run %s: %v", run, err)
	}
	var out []string
	for _, k := range keys {
		out = append(out, k.Name)
	}
	return out
}
