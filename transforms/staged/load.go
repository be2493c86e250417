package staged

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/transforms"
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
	register.DoFn3x1[context.Context, []byte, func(string), error](&LoadFn{})
}

// loadApp is what LoadFn needs of the library.
type loadApp interface {
	WriteBatch(ctx context.Context, recs []record.Record) []error
	Phases() *cutover.Map
	Close()
}

// LoadFn writes each record through the library.
type LoadFn struct {
	Config    string `json:"config"`
	Migration string `json:"migration"`

	lib     loadApp
	closeFn func()
	user    cohort.User
	buckets int
}

func (f *LoadFn) Setup(ctx context.Context) error {
	var cfg config.Config
	if err := json.Unmarshal([]byte(f.Config), &cfg); err != nil {
		return err
	}
	j, err := migration.Resolve(ctx, &cfg)
	if err != nil {
		return err
	}
	if f.lib, f.closeFn, err = cutover.OpenLibrary(ctx, j, cutover.Options{Migration: f.Migration}); err != nil {
		return err
	}
	f.user, _, err = cfg.Cohort.UserSpec()
	f.buckets = cfg.Cohort.Buckets
	return err
}

func (f *LoadFn) Teardown() {
	if f.closeFn != nil {
		f.closeFn()
	}
}

func (f *LoadFn) ProcessElement(ctx context.Context, batch []byte, dead func(string)) error {
	recs, err := record.DecodeBatch(batch)
	if err != nil {
		return err
	}
	type result struct {
		err   error
		phase cutover.Phase
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
			errs := f.lib.WriteBatch(ctx, batch)
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
		case cutover.Old:
			oldOnly++
		case cutover.NewOnly, cutover.Done:
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

// isPermanent reports an error no retry of the call mends: the record
// itself is refused (no user id, a value the store refuses).
func isPermanent(err error) bool {
	return errors.Is(err, cohort.ErrNoUser) || status.Code(err) == codes.InvalidArgument
}
