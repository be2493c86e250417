package transforms

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
)

func init() {
	register.DoFn4x1[context.Context, record.Batch, func(record.Batch), func(string), error](&rewriteFn{})
	register.Emitter1[string]()
}

// Rewrite rewrites the keys of every record (see rekeyer). A record whose
// key cannot be rewritten becomes a dead letter ("rewrite") with the reason;
// the others go on, in batches.
func Rewrite(s beam.Scope, spec rekeyer.Spec, batches beam.PCollection) (rewritten, deadLetters beam.PCollection) {
	return beam.ParDo2(s.Scope("Rewrite"), &rewriteFn{Spec: spec.Text()}, batches)
}

// RewriteOwning is Rewrite for batches that nothing but it consumes (the
// caller built the graph and knows): it rewrites their records in place
// instead of copying their fields first, where a record has room for the
// fields the rewrite adds (Rekeyer.Adds; a source gives it, as
// source.FilesConfig.SpareFields does; a record without it is copied as
// Rewrite copies). A batch's records and their fields then belong to the
// rewritten batch: the input, which Beam hands to its one consumer as it
// was emitted (in a fused stage) or decodes anew for it, is not read
// again. With another consumer of batches this would change what that
// consumer sees: use Rewrite.
func RewriteOwning(s beam.Scope, spec rekeyer.Spec, batches beam.PCollection) (rewritten, deadLetters beam.PCollection) {
	return beam.ParDo2(s.Scope("Rewrite"), &rewriteFn{Spec: spec.Text(), Owned: true}, batches)
}

// OldField is the field RewriteKeepingOld adds to every rewritten record:
// the record before the rewrite (record.EncodeBatch of one record).
const OldField = "__rekey_old__"

// RewriteKeepingOld is Rewrite for `rekey plan`: every rewritten record
// also carries the record it was (OldField), so the old and new keys of
// one record can be compared after the write planning. Nothing is
// written from it.
func RewriteKeepingOld(s beam.Scope, spec rekeyer.Spec, batches beam.PCollection) (rewritten, deadLetters beam.PCollection) {
	return beam.ParDo2(s.Scope("RewriteKeepingOld"), &rewriteFn{Spec: spec.Text(), KeepOld: true}, batches)
}

// TakeOld removes OldField from rec and returns the record it holds.
func TakeOld(rec *record.Record) (record.Record, error) {
	i := rec.Index(OldField)
	if i < 0 {
		return record.Record{}, fmt.Errorf("%s has no %s field", rec.Describe(), OldField)
	}
	b := rec.Fields[i].Value.Bytes
	// A new slice: rec's fields may be those of a batch other DoFns read
	// too (record.Batch).
	rec.Fields = append(rec.Fields[:i:i], rec.Fields[i+1:]...)
	old, err := record.DecodeBatch(b)
	if err != nil || len(old) != 1 {
		return record.Record{}, fmt.Errorf("%s: a bad %s field: %v", rec.Describe(), OldField, err)
	}
	return old[0], nil
}

// planFieldPrefix begins the names of the fields the plan adds to records
// (OldField, source.PosField).
const planFieldPrefix = "__rekey_"

// withoutPlanFields is fs without the plan's fields, in a new slice.
func withoutPlanFields(fs []record.Field) []record.Field {
	out := make([]record.Field, 0, len(fs))
	for _, f := range fs {
		if !strings.HasPrefix(f.Name, planFieldPrefix) {
			out = append(out, f)
		}
	}
	return out
}

// rewriteFn rewrites each record of a batch by its spec.
type rewriteFn struct {
	Spec    rekeyer.Text `json:"spec"`
	KeepOld bool         `json:"keep_old,omitempty"`
	// Owned: the input batches are this DoFn's alone (RewriteOwning).
	Owned bool `json:"owned,omitempty"`
	rk    *rekeyer.Rekeyer
}

func (f *rewriteFn) Setup() error {
	var err error
	f.rk, err = f.Spec.Build()
	return err
}

func (f *rewriteFn) ProcessElement(ctx context.Context, batch record.Batch, emit func(record.Batch), dead func(string)) error {
	if err := ctx.Err(); err != nil {
		return err // the job was cancelled (the direct runner does not stop on its own)
	}
	spare := f.rk.Adds()
	if f.KeepOld {
		spare++
	}
	out := rewriteBatch(ctx, f.rk, f.KeepOld, f.Owned && !f.KeepOld, spare, batch.Recs, dead)
	if len(out) > 0 {
		emit(record.Batch{Recs: out})
	}
	return nil
}

// rewriteBatch rewrites recs into new records, dead-lettering those whose
// key it cannot rewrite, and returns the others. Unless owned, recs is
// read-only (see record.Batch: the batch may have other consumers): each
// new record gets a copy of its fields, carved from one array for the
// whole batch with room for spare more fields each (the fields the
// rewrite adds), so that the rewrite sets and appends fields without
// touching recs and without growing a slice (BenchmarkRewriteBatch).
// Owned (RewriteOwning), a record with room for spare more fields is
// rewritten in place, and only the others are copied. A rewrite that fails
// has written nothing into the record's fields (Rekeyer.Rewrite), so the
// dead letter holds the record as it was read either way.
func rewriteBatch(ctx context.Context, rk *rekeyer.Rekeyer, keepOld, owned bool, spare int, recs []record.Record, dead func(string)) []record.Record {
	inPlace := func(r *record.Record) bool { return owned && cap(r.Fields)-len(r.Fields) >= spare }
	n := 0
	for i := range recs {
		if !inPlace(&recs[i]) {
			n += len(recs[i].Fields) + spare
		}
	}
	var fields []record.Field
	if n > 0 {
		fields = make([]record.Field, 0, n)
	}
	out := make([]record.Record, 0, len(recs))
	unmapped := 0
	var scratch rekeyer.Scratch
	for i := range recs {
		orig := recs[i]
		rec := recs[i]
		if len(rec.Fields) > 0 && !inPlace(&rec) { // nil stays nil: appending to it copies
			start := len(fields)
			fields = append(fields, rec.Fields...)
			rec.Fields = fields[start : len(fields) : len(fields)+spare]
			fields = fields[:len(fields)+spare]
		}
		unmapped += rk.Unmapped(&orig)
		var old []byte
		if keepOld {
			// Encoded before the rewrite, which may change rec's fields in place.
			old = record.EncodeBatch([]record.Record{orig})
			// The plan's own fields (a file record's position) stay with
			// the old record: the new one is checked as the target will
			// hold it, where __names__ are reserved.
			rec.Fields = withoutPlanFields(rec.Fields)
		}
		if err := rk.RewriteIn(&rec, &scratch); err != nil {
			CountDeadLettered(ctx, 1)
			dead(record.NewDeadLetter(record.StageRewrite, orig.Table, &orig, err))
			continue
		}
		if keepOld {
			rec.Fields = append(rec.Fields, record.Field{Name: OldField, Value: record.Bytes(old)})
		}
		out = append(out, rec)
	}
	CountRewritten(ctx, int64(len(out)))
	if unmapped > 0 {
		CountUnmapped(ctx, int64(unmapped))
	}
	return out
}
