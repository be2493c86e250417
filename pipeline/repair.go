package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/internal/config"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
	"github.com/rekeyio/rekey/transforms"
)

// A repair (rekey repair) is a verify whose findings are also put right
// from the authoritative store, old (repairs run while old is
// authoritative: dual_write through shadow): a record missing in new or
// different there is written as old holds it, mapped through the rewrite;
// a record extra in new is deleted from new. Every write and delete is
// conditional on the touched marks, as a backfill's writes are, with the
// repair's start less the skew margin as every cohort's Since: a record
// the application wrote or deleted after then may be newer than what the
// repair read, and is left as the application made it (a later verify
// sees whether it still differs, and the repair log holds it if its
// second write failed). The repair log's entries of the cohorts logged
// before that Since are then cleared: the repair re-read each of their
// records. An entry logged after it touched its mark after it too, so
// the repair left its record alone: the entry stays for the next repair.

// Counters of a repair, besides those of verify and of the sinks.
const (
	// RepairWritten counts the records a repair wrote (missing or
	// different in new); RepairDeleted those it deleted (extra in new).
	RepairWritten = "repair_written"
	RepairDeleted = "repair_deleted"
	// RepairLogCleared counts the repair-log entries a repair cleared.
	RepairLogCleared = "repair_log_cleared"
	// RepairOldWritten counts the records a repair in read_new made in old
	// as new holds them (writes old missed while new was authoritative).
	RepairOldWritten = "repair_old_written"
)

var (
	repairWritten = beam.NewCounter("rekey", RepairWritten)
	repairDeleted = beam.NewCounter("rekey", RepairDeleted)
)

func init() {
	register.DoFn5x1[context.Context, string, func(*[]byte) bool, func(*[]byte) bool, func([]byte), error](&repairPickFn{})
	register.DoFn3x1[[]byte, func([]byte), func([]byte), error](&repairPutFn{})
	register.DoFn3x1[context.Context, []byte, func(string), error](&repairDeleteFn{})
	register.DoFn2x1[context.Context, []byte, []byte](&countWritesFn{})
}

// repairPickFn emits, for one new key, the record to write (missing or
// different in new) to its first output and the record to delete (extra
// in new) to its second, each as a one-record batch. In the cohorts of
// ReadNew only the records of Pending (old keys, as the repair log names
// them) are repaired.
type repairPickFn struct {
	Side    verifySide      `json:"side"`
	ReadNew string          `json:"read_new,omitempty"`
	Pending map[string]bool `json:"pending,omitempty"`
	Spec    string          `json:"spec"`
	Source  config.Endpoint `json:"source"`

	readNew map[int]bool
	rk      *rekeyer.Rekeyer
}

func (f *repairPickFn) Setup() error {
	f.readNew = map[int]bool{}
	if f.ReadNew != "" {
		rs, err := cohort.Parse(f.ReadNew, f.Side.Sel.Buckets)
		if err != nil {
			return err
		}
		for _, r := range rs {
			for c := r.First; c <= r.Last; c++ {
				f.readNew[c] = true
			}
		}
	}
	var spec rekeyer.Spec
	if err := json.Unmarshal([]byte(f.Spec), &spec); err != nil {
		return err
	}
	var err error
	f.rk, err = spec.Build()
	return err
}

func (f *repairPickFn) ProcessElement(ctx context.Context, key string, olds, news func(*[]byte) bool, write func([]byte)) error {
	jd, err := joinedItems(f.Side, key, olds, news)
	if err != nil {
		return err
	}
	want, got := jd.want, jd.got
	if f.readNew[jd.cohort] {
		oldKey := jd.oldKey
		if want == nil && got != nil { // its old key by the inverse rewrite
			inv := *got
			inv.Fields = append([]record.Field(nil), got.Fields...)
			if f.rk.Invert(&inv) != nil {
				return nil
			}
			if inv.Key != nil {
				inv.Key.Namespace, inv.Key.Database = f.Source.Namespace, f.Source.Database
			}
			if oldKey, err = f.Side.oldKey(&inv); err != nil {
				return nil
			}
		}
		if !f.Pending[oldKey] {
			return nil
		}
	}
	switch {
	case want == nil:
		if got != nil {
			write(record.EncodeBatch([]record.Record{*got, {}})) // a delete: the record, then an empty marker
		}
	case got == nil:
		write(record.EncodeBatch([]record.Record{*want}))
	default:
		d, err := f.Side.differ(got, want)
		if err != nil {
			return err
		}
		if d != "" {
			write(record.EncodeBatch([]record.Record{*want}))
		}
	}
	return nil
}

// repairPutFn splits repairPickFn's output into writes and deletes.
type repairPutFn struct{}

func (repairPutFn) ProcessElement(b []byte, writes, deletes func([]byte)) error {
	recs, err := record.DecodeBatch(b)
	if err != nil {
		return err
	}
	if len(recs) == 2 {
		deletes(record.EncodeBatch(recs[:1]))
		return nil
	}
	writes(b)
	return nil
}

// repairDeleteFn deletes new records, conditionally (cutover's repair
// deletes), in commits of up to 500 made at the end of each bundle.
type repairDeleteFn struct {
	Store    string           `json:"store"`
	Target   config.Endpoint  `json:"target"`
	Table    *spannerdb.Table `json:"table,omitempty"`
	Backfill cutover.Backfill `json:"backfill"`

	sc      *spanner.Client
	dc      *datastore.Client
	release func()
	recs    []record.Record
}

func (f *repairDeleteFn) Setup(ctx context.Context) error {
	var err error
	f.sc, f.dc, f.release, err = sharedClient(f.Target)
	return err
}

func (f *repairDeleteFn) Teardown() {
	if f.release != nil {
		f.release()
	}
	f.sc, f.dc, f.release = nil, nil, nil
}

// sharedClient is this process's client of e's database, Spanner's or
// Datastore's, and its release (spannerdb.Shared, datastoredb.Shared).
func sharedClient(e config.Endpoint) (*spanner.Client, *datastore.Client, func(), error) {
	if e.Type == config.TypeSpanner {
		db := spannerdb.DatabasePath(e.Project, e.Instance, e.Database)
		c, release, err := spannerdb.Shared(db, "", func(ctx context.Context) (*spanner.Client, error) { return spanner.NewClient(ctx, db) })
		return c, nil, release, err
	}
	c, release, err := datastoredb.Shared(e.Project, e.Database, "", nil)
	return nil, c, release, err
}

func (f *repairDeleteFn) StartBundle(context.Context, func(string)) { f.recs = f.recs[:0] }

func (f *repairDeleteFn) ProcessElement(ctx context.Context, b []byte, _ func(string)) error {
	recs, err := record.DecodeBatch(b)
	if err != nil {
		return err
	}
	f.recs = append(f.recs, recs...)
	return nil
}

func (f *repairDeleteFn) FinishBundle(ctx context.Context, _ func(string)) error {
	for len(f.recs) > 0 {
		n := min(len(f.recs), 500)
		part := f.recs[:n]
		var skipped int
		var err error
		if f.sc != nil {
			skipped, err = cutover.SpannerRepairDeletes(f.sc, f.Table, f.Backfill)(ctx, part)
		} else {
			keys := make([]*datastore.Key, n)
			for i := range part {
				keys[i] = datastoredb.KeyToDatastore(*part[i].Key)
			}
			skipped, err = cutover.DatastoreRepairDeletes(f.dc, f.Backfill)(ctx, keys)
		}
		if err != nil {
			return fmt.Errorf("repair: deleting %d records extra in new: %w", n, err)
		}
		repairDeleted.Inc(ctx, int64(n-skipped))
		if skipped > 0 {
			transforms.CountBackfillSkipped(ctx, int64(skipped))
		}
		f.recs = f.recs[n:]
	}
	return nil
}

// repairs adds the repair's writes and deletes to the verify graph on
// joined (see Verify.Repair) and returns their dead letters.
func (v Verify) repairs(s beam.Scope, j *migration.Job, side verifySide, joined beam.PCollection) ([]beam.PCollection, error) {
	s = s.Scope("repair")
	spec, err := json.Marshal(j.Spec)
	if err != nil {
		return nil, err
	}
	picked := beam.ParDo(s, &repairPickFn{Side: side, ReadNew: v.RepairReadNew, Pending: v.RepairPending, Spec: string(spec), Source: j.Config.Source}, joined)
	writes, deletes := beam.ParDo2(s, &repairPutFn{}, picked)
	w := newWrites(j, newRun())
	w.backfill = v.Repair
	dead, err := w.target(s, w.plan(s, countWrites(s, writes)))
	if err != nil {
		return nil, err
	}
	b := *v.Repair
	b.Namespace = j.Config.Target.Namespace
	del := beam.ParDo(s, &repairDeleteFn{Store: j.Config.Target.Type, Target: j.Config.Target, Table: side.Table, Backfill: b}, deletes)
	return append(dead, del), nil
}

// countWrites counts the repair's writes as they go to the sink.
func countWrites(s beam.Scope, writes beam.PCollection) beam.PCollection {
	return beam.ParDo(s, &countWritesFn{}, writes)
}

type countWritesFn struct{}

func (countWritesFn) ProcessElement(ctx context.Context, b []byte) []byte {
	repairWritten.Inc(ctx, int64(record.BatchLen(b)))
	return b
}

// RepairOptions say what RunRepair puts right.
type RepairOptions struct {
	Migration string
	Cohorts   []cohort.Range
	// Examples and ReportPath are as for verify: the report says what the
	// repair found (and so put right).
	Examples   int
	ReportPath string
	Who        string
}

// repairable are the phases in which old is authoritative and a repair
// copies old to new.
var repairable = []cutover.Phase{cutover.DualWrite, cutover.Backfilled, cutover.Verified, cutover.Shadow}

// RunRepair repairs cohorts of cfg on r: they must be in a phase where
// old is authoritative (dual_write through shadow; from read_new on the
// copy would go the other way, which is the reverse backfill's). It runs
// the verify job with its repairs (see above), then clears the cohorts'
// repair-log entries logged before it began. It returns the report of
// what it found, each finding written or deleted unless the application
// touched the record meanwhile (counted as backfill_skipped).
func RunRepair(ctx context.Context, cfg *config.Config, o RepairOptions, r Runner) ([]VerifyCohort, *migration.Result, error) {
	if o.Migration == "" || len(o.Cohorts) == 0 || o.ReportPath == "" {
		return nil, nil, &migration.ConfigError{Err: errors.New("repair needs the migration's name, the cohorts and a report path")}
	}
	if err := migration.Reach(ctx, cfg); err != nil {
		return nil, nil, err
	}
	st, closeStore, err := cutover.OpenStore(ctx, cfg.Target, false)
	if err != nil {
		return nil, nil, fmt.Errorf("phase store: %w", err)
	}
	defer closeStore()
	m, err := st.Load(ctx, o.Migration)
	if err != nil {
		return nil, nil, err
	}
	var refused []string
	readNew := map[int]bool{} // cohorts in read_new: only what new missed is repaired
	for _, rg := range cohort.Merge(o.Cohorts) {
		for _, seg := range m.Segments(rg) {
			ok := seg.Phase == cutover.ReadNew
			for _, p := range repairable {
				ok = ok || seg.Phase == p
			}
			if !ok {
				refused = append(refused, fmt.Sprintf("%s are %s", seg.Range, seg.Phase))
			}
			if seg.Phase == cutover.ReadNew {
				for c := seg.First; c <= seg.Last; c++ {
					readNew[c] = true
				}
			}
		}
	}
	if len(refused) > 0 {
		return nil, nil, fmt.Errorf("repair copies old to new while old is authoritative (dual_write to shadow), and in read_new what the repair log says new missed: cohorts %s", strings.Join(refused, "; cohorts "))
	}
	// The repair's start, less the skew margin for clocks: a mark at or
	// after it is the application's and newer than the repair's reads.
	start := time.Now()
	// since bounds both the marks that stop the repair's writes and the
	// entries it clears: an entry logged after it set its mark's
	// TouchedAt after it too, so the repair left its record alone, and the
	// entry stays for the next repair (clearing it would lose the write
	// new missed: found by the soak, seed 2).
	since := start.Add(-skewOf(cfg))
	// Each span with its phase: in read_new the copy from old is only for
	// what the touched marks say new missed.
	b := cutover.Backfill{Migration: o.Migration}
	for _, rg := range cohort.Merge(o.Cohorts) {
		for _, seg := range m.Segments(rg) {
			b.Spans = append(b.Spans, cutover.BackfillSpan{First: seg.First, Last: seg.Last, Phase: seg.Phase, Since: since})
		}
	}
	entries, err := cutover.RepairsOf(ctx, st, o.Migration)
	if err != nil {
		return nil, nil, err
	}
	// In read_new new is authoritative: only the records whose writes new
	// missed while old was (the entries saying so) are copied from old.
	pending := map[string]bool{}
	all := entries
	var kept []cutover.RepairEntry
	for _, e := range entries {
		if !readNew[e.Cohort] {
			kept = append(kept, e)
			continue
		}
		if e.Missed == "new" && e.LoggedAt.Before(since) {
			pending[e.OldKey] = true
			kept = append(kept, e)
		}
	}
	entries = kept
	var readNewRanges []cohort.Range
	for c := range readNew {
		readNewRanges = append(readNewRanges, cohort.Range{First: c, Last: c})
	}
	v := VerifyOptions{Migration: o.Migration, Cohorts: o.Cohorts, Examples: o.Examples, ReportPath: o.ReportPath}
	report, res, _, err := runVerifyWith(ctx, cfg, st, v, r, Verify{Repair: &b, RepairReadNew: cohort.Format(cohort.Merge(readNewRanges)), RepairPending: pending}, entries)
	if err != nil {
		return report, res, err
	}
	if d := res.Counters[migration.DeadLettered]; d > 0 {
		return report, res, fmt.Errorf("%d records were dead-lettered; the repair log is kept", d)
	}
	// Writes old missed while new was authoritative: in read_new, old is
	// made as new holds them (cutover.RepairOld); elsewhere they stay in
	// the log (the library reads new for them).
	var missedOld []cutover.RepairEntry
	for _, e := range all {
		if readNew[e.Cohort] && e.Missed == "old" && e.LoggedAt.Before(start) {
			missedOld = append(missedOld, e)
		}
	}
	var repairedOld []cutover.RepairEntry
	if len(missedOld) > 0 {
		job, err := migration.Resolve(ctx, cfg)
		if err != nil {
			return report, res, err
		}
		if repairedOld, err = cutover.RepairOldFor(ctx, job, o.Migration, missedOld); err != nil {
			return report, res, fmt.Errorf("repairing in old %d writes it missed (%d done): %w", len(missedOld), len(repairedOld), err)
		}
	}
	var done []cutover.RepairEntry
	in := map[int]bool{}
	for _, rg := range cohort.Merge(o.Cohorts) {
		for c := rg.First; c <= rg.Last; c++ {
			in[c] = true
		}
	}
	for _, e := range entries {
		if in[e.Cohort] && e.LoggedAt.Before(since) && e.Missed != "old" {
			done = append(done, e)
		}
	}
	done = append(done, repairedOld...)
	res.Counters[RepairOldWritten] = int64(len(repairedOld))
	if l, ok := st.(cutover.RepairLog); ok {
		if err := l.ClearRepairs(ctx, o.Migration, done); err != nil {
			return report, res, fmt.Errorf("the repair ran, but clearing %d repair-log entries failed: %w", len(done), err)
		}
	}
	res.Counters[RepairLogCleared] = int64(len(done))
	return report, res, nil
}

// skewOf is the config's skew margin (cohort.skew or the default).
func skewOf(cfg *config.Config) time.Duration {
	if cfg.Cohort.Skew > 0 {
		return cfg.Cohort.Skew
	}
	return cutover.DefaultSkew
}
