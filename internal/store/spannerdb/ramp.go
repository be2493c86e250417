package spannerdb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/internal/write/throttle"
)

// RampTable holds the ramp-ups' leases (throttle.Lease): per run, a row
// with an empty Process whose BeatAt is the run's start, and a row per
// process writing the run's data, BeatAt its last beat.
const RampTable = "RekeyRamp"

// RampDDL creates RampTable.
const RampDDL = `CREATE TABLE RekeyRamp (
  Run STRING(MAX) NOT NULL,
  Process STRING(MAX) NOT NULL,
  BeatAt TIMESTAMP NOT NULL
) PRIMARY KEY (Run, Process)`

var rampColumns = []string{"Run", "Process", "BeatAt"}

// RampLease keeps ramp-up leases in a database's RampTable.
type RampLease struct{ Client *spanner.Client }

// Beat implements throttle.Lease: a strong read of the run's rows, a
// transaction only when the run has no start yet, and one blind write of
// the process's row.
func (l RampLease) Beat(ctx context.Context, run, proc string, now time.Time, ttl time.Duration) (throttle.Beat, error) {
	var b throttle.Beat
	err := l.Client.Single().Read(ctx, RampTable, spanner.Key{run}.AsPrefix(), rampColumns).Do(func(r *spanner.Row) error {
		var rn, p string
		var at time.Time
		if err := r.Columns(&rn, &p, &at); err != nil {
			return err
		}
		switch live := now.Sub(at) < ttl; {
		case p == "":
			b.Start = at
		case p == proc:
			b.WasLive = live
		case live:
			b.Live++
		}
		return nil
	})
	if err != nil {
		return b, fmt.Errorf("reading %s: %w", RampTable, err)
	}
	if b.Start.IsZero() {
		_, err := Transact(ctx, l.Client, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
			row, err := txn.ReadRow(ctx, RampTable, spanner.Key{run, ""}, []string{"BeatAt"})
			switch {
			case errors.Is(err, spanner.ErrRowNotFound):
				b.Start, b.Started = now, true
				return txn.BufferWrite([]*spanner.Mutation{spanner.Insert(RampTable, rampColumns, []any{run, "", now})})
			case err != nil:
				return err
			}
			b.Started = false
			return row.Columns(&b.Start)
		})
		if err != nil {
			return b, fmt.Errorf("starting run %s in %s: %w", run, RampTable, err)
		}
	}
	if _, err := l.Client.Apply(ctx, []*spanner.Mutation{spanner.InsertOrUpdate(RampTable, rampColumns, []any{run, proc, now})}, spanner.ApplyAtLeastOnce()); err != nil {
		return b, fmt.Errorf("writing %s: %w", RampTable, err)
	}
	b.Live++
	return b, nil
}

// Restart implements throttle.Lease: a transaction that moves the run's
// start when it is still from (times compared at the microsecond, which
// Spanner keeps).
func (l RampLease) Restart(ctx context.Context, run string, from, to time.Time) (time.Time, error) {
	var got time.Time
	_, err := Transact(ctx, l.Client, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		row, err := txn.ReadRow(ctx, RampTable, spanner.Key{run, ""}, []string{"BeatAt"})
		if err != nil {
			return err
		}
		if err := row.Columns(&got); err != nil {
			return err
		}
		if !got.Equal(from.Truncate(time.Microsecond)) {
			return nil
		}
		got = to.Truncate(time.Microsecond)
		return txn.BufferWrite([]*spanner.Mutation{spanner.Update(RampTable, rampColumns, []any{run, "", got})})
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("moving the start of run %s in %s: %w", run, RampTable, err)
	}
	return got, nil
}

// Transact runs f in a read-write transaction of c and returns its commit
// time. Spanner aborts a transaction that conflicts with another and
// ReadWriteTransaction runs f again; the emulator, which runs one
// read-write transaction at a time, refuses a concurrent one with other
// errors ("Invalid transaction ID", "Transaction not found"), which
// Transact retries the same way (f must be safe to run again).
func Transact(ctx context.Context, c *spanner.Client, f func(context.Context, *spanner.ReadWriteTransaction) error) (time.Time, error) {
	var ts time.Time
	err := retryRefused(ctx, func() (err error) {
		ts, err = c.ReadWriteTransaction(ctx, f)
		return err
	})
	return ts, err
}

// ReadOnly runs f in a read-only transaction of c, again when the
// emulator refused the transaction for one running concurrently (see
// Transact).
func ReadOnly(ctx context.Context, c *spanner.Client, f func(context.Context, *spanner.ReadOnlyTransaction) error) error {
	return retryRefused(ctx, func() error {
		txn := c.ReadOnlyTransaction()
		defer txn.Close()
		return f(ctx, txn)
	})
}

// retryRefused runs f again while it fails with a refusal of the
// emulator (EmulatorAborted), for up to emulatorRetryFor.
func retryRefused(ctx context.Context, f func() error) error {
	start := time.Now()
	for attempt := 0; ; attempt++ {
		err := f()
		if err == nil || !EmulatorAborted(err) || time.Since(start) > emulatorRetryFor {
			return err
		}
		select {
		case <-time.After(time.Duration(min(attempt+1, 10)) * 10 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// emulatorRetryFor is how long Transact and ReadOnly try again a
// transaction the emulator refused for one running concurrently: under
// a busy application's transactions (the staged end-to-end test) it can
// refuse for seconds.
const emulatorRetryFor = 30 * time.Second

// EmulatorAborted reports the Spanner emulator's refusals of a transaction
// concurrent with another, which it runs one at a time: FailedPrecondition
// errors about the transaction ("Invalid transaction ID", "Cannot commit
// a transaction after it has been rolled back", "Cannot read or query
// using a transaction after it has been committed or rolledback"), or
// NotFound "Transaction not found" for one it dropped. Only against the
// emulator (SPANNER_EMULATOR_HOST set): Spanner itself aborts such a
// transaction with Aborted, which its client retries.
func EmulatorAborted(err error) bool {
	if err == nil || os.Getenv("SPANNER_EMULATOR_HOST") == "" {
		return false
	}
	msg := strings.ToLower(err.Error())
	code := spanner.ErrCode(err)
	if se := (*spanner.Error)(nil); errors.As(err, &se) {
		code = se.Code // wrapped by a caller's context
	}
	switch code {
	case codes.FailedPrecondition:
		return strings.Contains(msg, "transaction")
	case codes.NotFound:
		return strings.Contains(msg, "transaction not found")
	}
	return false
}
