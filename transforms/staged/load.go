package staged

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/write/retry"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms"
	"github.com/rekeyio/rekey/transforms/sink"
)

var (
	loadOldOnly = beam.NewCounter("rekey", operator.LoadOldOnly)
	loadBoth    = beam.NewCounter("rekey", operator.LoadBoth)
	loadNewOnly = beam.NewCounter("rekey", operator.LoadNewOnly)
)

const (
	loadParallel = 8
	loadBatch    = 100
	loadRetryFor = 20 * time.Second
)

func init() {
	register.DoFn3x1[context.Context, record.Batch, func(string), error](&LoadFn{})
}

// loadApp is what LoadFn needs of the library.
type loadApp interface {
	WriteBatch(ctx context.Context, recs []record.Record) []error
	Phases() *phases.Map
	Close()
}

// LoadFn writes each record through the library, under the job's
// ramp-up and the adaptive throttle (Guard) as a sink's writes are: each
// WriteBatch call waits for its records' budget of the ramp shared by
// every process of the run (its lease in the target, where the phase
// store is), and asks the throttle first.
type LoadFn struct {
	// Job is the migration's job as workers resolve it
	// (migration.Job.Portable).
	Job       string     `json:"job"`
	Migration string     `json:"migration"`
	Guard     sink.Guard `json:"guard"`

	lib      loadApp
	closeFn  func()
	releases []func()
	user     cohort.User
	buckets  int
	pacer    storewrite.Pacer
	throttle retry.Throttle
	// paced and throttled are the waits of the element being processed,
	// in nanoseconds; rejected counts the throttle's refusals.
	paced, throttled, rejected atomic.Int64
}

func (f *LoadFn) Setup(ctx context.Context) error {
	j, err := migration.ResolvePortable(ctx, f.Job)
	if err != nil {
		return err
	}
	if f.lib, f.closeFn, err = operator.OpenLibrary(ctx, j, cutover.Options{Migration: f.Migration}); err != nil {
		return err
	}
	if f.user, _, err = j.Cohort.UserSpec(); err != nil {
		return err
	}
	f.buckets = j.Cohort.Buckets
	if !f.Guard.Ramp.Off() {
		lease, release, err := j.RampLease("load")
		if err != nil {
			return fmt.Errorf("load: the ramp-up's lease: %w", err)
		}
		f.releases = append(f.releases, release)
		if f.pacer, err = f.Guard.Pacer(lease); err != nil {
			return fmt.Errorf("load: %w", err)
		}
	}
	t := j.Target
	f.throttle = f.Guard.Throttle(fmt.Sprintf("load:%s:%s/%s/%s", t.Type, t.Project, t.Instance, t.Database))
	return nil
}

func (f *LoadFn) Teardown() {
	if f.closeFn != nil {
		f.closeFn()
	}
	for _, release := range f.releases {
		release()
	}
}

// writeBatch writes recs through the library in pieces the ramp-up sizes
// (storewrite.Chunks), each waiting for its budget (storewrite.Pace) and
// for the adaptive throttle's leave; the throttle learns whether the
// stores took each piece (no transient error). It returns each record's
// error.
func (f *LoadFn) writeBatch(ctx context.Context, recs []record.Record) []error {
	errs := make([]error, 0, len(recs))
	var o storewrite.Outcome
	err := storewrite.Chunks(recs, f.pacer, func(piece []record.Record) error {
		if err := storewrite.Pace(ctx, f.pacer, len(piece), &o); err != nil {
			return err
		}
		if err := f.allowed(ctx); err != nil {
			return err
		}
		got := f.lib.WriteBatch(ctx, piece)
		if f.throttle != nil {
			f.throttle.Record(!slices.ContainsFunc(got, func(err error) bool { return retry.Classify(err) == retry.Transient }))
		}
		errs = append(errs, got...)
		return nil
	})
	f.paced.Add(int64(o.Paced))
	for len(errs) < len(recs) {
		errs = append(errs, err)
	}
	return errs
}

// allowed waits until the adaptive throttle (if any) lets a call go: a
// jittered Initial of the retry policy after each refusal, as a sink's
// writer waits (retry.Hooks.Throttle).
func (f *LoadFn) allowed(ctx context.Context) error {
	if f.throttle == nil {
		return nil
	}
	wait := f.Guard.Retry.WithDefaults().Initial
	for !f.throttle.Allow() {
		d := time.Duration((0.5 + rand.Float64()) * float64(wait))
		f.throttled.Add(int64(d))
		f.rejected.Add(1)
		if err := retry.Sleep(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

func (f *LoadFn) ProcessElement(ctx context.Context, batch record.Batch, dead func(string)) error {
	recs := batch.Recs
	type result struct {
		err   error
		phase phases.Phase
	}
	results := make([]result, len(recs))
	// Chunks of loadBatch records, loadParallel at once; each chunk's
	// records go through the library's WriteBatch (a few commits for the
	// chunk), and those that fail are written again, together, until
	// they succeed or loadRetryFor passes. A record refused for good in a
	// commit of several (a value the store refuses fails its whole
	// commit) is written again alone, so that only the record at fault
	// is dead-lettered.
	var write func(pending []int)
	write = func(pending []int) {
		deadline := time.Now().Add(loadRetryFor)
		for len(pending) > 0 {
			batch := make([]record.Record, len(pending))
			for j, i := range pending {
				batch[j] = recs[i]
			}
			errs := f.writeBatch(ctx, batch)
			var again, alone []int
			for j, i := range pending {
				switch err := errs[j]; {
				case err == nil || ctx.Err() != nil:
					results[i].err = err
				case isPermanent(err) && len(pending) > 1:
					alone = append(alone, i)
				case isPermanent(err) || time.Now().After(deadline):
					results[i].err = err
				default:
					results[i].err = err
					again = append(again, i)
				}
			}
			for _, i := range alone {
				write([]int{i})
			}
			if pending = again; len(pending) > 0 {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	sem := make(chan struct{}, loadParallel)
	var wg sync.WaitGroup
	for lo := 0; lo < len(recs); lo += loadBatch {
		hi := min(lo+loadBatch, len(recs))
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			pending := make([]int, 0, hi-lo)
			for i := lo; i < hi; i++ {
				pending = append(pending, i)
			}
			write(pending)
			for i := lo; i < hi; i++ {
				if c, err := f.user.Cohort(&recs[i], f.buckets); err == nil {
					results[i].phase = f.lib.Phases().Phase(c)
				}
			}
		}()
	}
	wg.Wait()
	f.countWaits(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	var oldOnly, both, newOnly, deads int64
	for i, r := range results {
		if r.err != nil {
			deads++
			dead(record.NewDeadLetter(record.StageWrite, "load", &recs[i], r.err))
			continue
		}
		switch r.phase {
		case phases.Old:
			oldOnly++
		case phases.NewOnly, phases.Done:
			newOnly++
		default:
			both++
		}
	}
	loadOldOnly.Inc(ctx, oldOnly)
	loadBoth.Inc(ctx, both)
	loadNewOnly.Inc(ctx, newOnly)
	transforms.CountWritten(ctx, oldOnly+both+newOnly)
	transforms.CountDeadLettered(ctx, deads)
	return nil
}

// countWaits counts the element's waits for the ramp-up and the
// throttle (on the bundle's goroutine, where Beam's metrics belong).
func (f *LoadFn) countWaits(ctx context.Context) {
	if d := f.paced.Swap(0); d > 0 {
		transforms.CountThrottled(ctx, time.Duration(d), false)
	}
	d, n := f.throttled.Swap(0), f.rejected.Swap(0)
	for i := range n {
		w := time.Duration(0)
		if i == 0 {
			w = time.Duration(d)
		}
		transforms.CountThrottled(ctx, w, true)
	}
}

// isPermanent reports an error no retry of the call mends: the record
// itself is refused (no user id, a value the store refuses).
func isPermanent(err error) bool {
	return errors.Is(err, cohort.ErrNoUser) || status.Code(err) == codes.InvalidArgument
}
