package staged

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/operator"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
	"github.com/rekeyio/rekey/transforms"
)

var (
	verifyMatching     = beam.NewCounter("rekey", operator.VerifyMatching)
	verifyMissing      = beam.NewCounter("rekey", operator.VerifyMissing)
	verifyExtra        = beam.NewCounter("rekey", operator.VerifyExtra)
	verifyMismatched   = beam.NewCounter("rekey", operator.VerifyMismatched)
	verifyUnattributed = beam.NewCounter("rekey", operator.VerifyUnattributed)
	verifySettled      = beam.NewCounter("rekey", operator.VerifySettled)
	verifyRouted       = beam.NewCounter("rekey", operator.VerifyRouted)
	verifyCompared     = beam.NewCounter("rekey", operator.VerifyCompared)
)

func init() {
	register.DoFn4x1[context.Context, record.Batch, func(string, []byte), func(string), error](&ExpectFn{})
	register.DoFn3x1[context.Context, record.Batch, func(string, []byte), error](&NewSideFn{})
	register.DoFn6x1[context.Context, string, func(*[]byte) bool, func(*[]byte) bool, func(int, string), func(string), error](&CompareFn{})
	register.DoFn7x1[context.Context, string, func(*[]byte) bool, func(*[]byte) bool, func(int, string), func(string), func(record.Batch), error](&RepairCompareFn{})
	register.Combiner3[string, string, string](&CohortTallyFn{})
	register.DoFn2x1[int, string, string](&ReportLineFn{})
	register.Emitter2[string, []byte]()
	register.Emitter2[int, string]()
	register.Iter1[[]byte]()
}

// Side is what both sides of the join need to key and compare
// records: the target store, its Spanner tables, the cohort selection.
type Side struct {
	Store string                     `json:"store"` // record.Spanner or record.Datastore
	Table *spannerdb.Table           `json:"table,omitempty"`
	Sel   transforms.CohortSelection `json:"sel"`
	// SourceTable is the old Spanner table (Spanner sources).
	SourceTable *spannerdb.Table `json:"source_table,omitempty"`
	// Children and SourceChildren are the new and the old interleaved
	// tables (new's under the same names). A child row's key text is
	// its table's name, then its key ("Orders[7,1]"), as the
	// application library names it.
	Children       []*spannerdb.Table `json:"children,omitempty"`
	SourceChildren []*spannerdb.Table `json:"source_children,omitempty"`
}

// tableOf is the table of r among main and children (main when r names
// none of the children).
func tableOf(r *record.Record, main *spannerdb.Table, children []*spannerdb.Table) (t *spannerdb.Table, child bool) {
	for _, c := range children {
		if strings.EqualFold(c.Name, r.Table) {
			return c, true
		}
	}
	return main, false
}

// rowKeyText is the text of r's key in t: rekeyer's key notation, after
// the table's name for a child.
func rowKeyText(r *record.Record, t *spannerdb.Table, child bool) (string, error) {
	k, err := spannerdb.KeyOf(r, t)
	if err != nil {
		return "", err
	}
	return phases.SpannerKeyText(t.Name, child, k), nil
}

// oldKey is the text of an old record's key as the application library
// names it (and so its repair log): rekey's key notation.
func (v Side) oldKey(r *record.Record) (string, error) {
	if r.Key != nil {
		return r.Key.String(), nil
	}
	if v.SourceTable == nil {
		return r.Describe(), nil
	}
	t, child := tableOf(r, v.SourceTable, v.SourceChildren)
	return rowKeyText(r, t, child)
}

// key is the text of a new record's key, namespace and database left out
// (the target's are given).
func (v Side) key(r *record.Record) (string, error) {
	if v.Store == record.Spanner {
		t, child := tableOf(r, v.Table, v.Children)
		return rowKeyText(r, t, child)
	}
	if r.Key == nil {
		return "", errors.New("no key")
	}
	k := *r.Key
	k.Namespace, k.Database = "", ""
	return k.String(), nil
}

// normal is a new record as the store gives it back: Spanner's types
// applied, generated columns left out.
func (v Side) normal(r *record.Record) (record.Record, error) {
	if v.Store != record.Spanner {
		out := *r
		if out.Key != nil {
			k := *out.Key
			k.Namespace, k.Database = "", ""
			out.Key = &k
		}
		return out, nil
	}
	t, _ := tableOf(r, v.Table, v.Children)
	n, err := spannerdb.Normalize(r, t)
	if err != nil {
		return n, err
	}
	fields := n.Fields[:0:0]
	for _, f := range n.Fields {
		if c := t.Column(f.Name); c == nil || !c.Generated {
			fields = append(fields, f)
		}
	}
	n.Fields = fields
	n.Table = t.Name
	return n, nil
}

// item encodes a side's records for the join: cohort (-1: unknown), the
// old key's text (old side), the record (new side: as new holds it; old
// side: as new should hold it, then the old record).
func item(c int, oldKey string, recs ...record.Record) []byte {
	b := binary.AppendVarint(nil, int64(c))
	b = binary.AppendUvarint(b, uint64(len(oldKey)))
	b = append(b, oldKey...)
	return append(b, record.EncodeBatch(recs)...)
}

func unitem(b []byte) (c int, oldKey string, recs []record.Record, err error) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, "", nil, errors.New("verify: corrupt item")
	}
	b = b[n:]
	l, n := binary.Uvarint(b)
	if n <= 0 || uint64(len(b)-n) < l {
		return 0, "", nil, errors.New("verify: corrupt item")
	}
	oldKey, b = string(b[n:n+int(l)]), b[n+int(l):]
	recs, err = record.DecodeBatch(b)
	if err != nil || len(recs) == 0 {
		return 0, "", nil, fmt.Errorf("verify: corrupt item: %v", err)
	}
	return int(v), oldKey, recs, nil
}

// ExpectFn maps old records through the rewrite: new key → the record new
// should hold.
type ExpectFn struct {
	Spec rekeyer.Text `json:"spec"`
	Side Side         `json:"side"`

	rk   *rekeyer.Rekeyer
	user cohort.User
}

func (f *ExpectFn) Setup() error {
	var err error
	if f.rk, err = f.Spec.Build(); err != nil {
		return err
	}
	f.user, err = cohort.ParseUser(f.Side.Sel.User)
	return err
}

func (f *ExpectFn) ProcessElement(ctx context.Context, batch record.Batch, emit func(string, []byte), dead func(string)) error {
	recs := batch.Recs
	for i := range recs {
		old := recs[i]
		c, err := f.user.Cohort(&old, f.Side.Sel.Buckets)
		if err != nil {
			return err // selectCohorts passed only records with a cohort
		}
		nr := old
		// Its own fields: the rewrite sets key columns in place (a
		// bit-reversed id), which old, compared and read again by its
		// key later, must keep.
		nr.Fields = append([]record.Field(nil), old.Fields...)
		if err := f.rk.Rewrite(&nr); err != nil {
			transforms.CountDeadLettered(ctx, 1)
			dead(record.NewDeadLetter(record.StageRewrite, old.Table, &old, err))
			continue
		}
		want, err := f.Side.normal(&nr)
		if err == nil {
			var k string
			if k, err = f.Side.key(&want); err == nil {
				var ok string
				if ok, err = f.Side.oldKey(&old); err == nil {
					emit(k, item(c, ok, nr, old))
					continue
				}
			}
		}
		transforms.CountDeadLettered(ctx, 1)
		dead(record.NewDeadLetter(record.StageRewrite, old.Table, &old, fmt.Errorf("verify: the rewritten record does not fit the target: %w", err)))
	}
	return nil
}

// NewSideFn keys the new records of the selected cohorts (by the user id
// a new record holds; -1 where it holds none it can be told by, which
// only the old side can then attribute).
type NewSideFn struct {
	Side Side `json:"side"`
	// Spec is the migration's rewrite: a user id taken from the record's
	// own Datastore key (cohort.user key:Kind) is read from the old key
	// (Rekeyer.Invert), since the rewrite may have changed that element
	// (the root of an entity group, with ancestors: root); so is one taken
	// from a key column the rewrite changes (bitreverse on it).
	Spec rekeyer.Text `json:"spec"`

	user cohort.User
	in   []bool
	rk   *rekeyer.Rekeyer
}

func (f *NewSideFn) Setup() error {
	u, rs, err := f.Side.Sel.Parse()
	if err != nil {
		return err
	}
	f.user = u
	if (u.From == cohort.FromKey || u.From == cohort.FromField) && f.Spec != "" {
		if f.rk, err = f.Spec.Build(); err != nil {
			return err
		}
		if u.From == cohort.FromField && f.rk.Keeps(u.Name) {
			f.rk = nil // new holds the user id column as old does
		}
	}
	f.in = make([]bool, f.Side.Sel.Buckets)
	for _, r := range rs {
		for c := r.First; c <= r.Last; c++ {
			f.in[c] = true
		}
	}
	return nil
}

func (f *NewSideFn) ProcessElement(ctx context.Context, batch record.Batch, emit func(string, []byte)) error {
	recs := batch.Recs
	for i := range recs {
		got, err := f.Side.normal(&recs[i])
		if err != nil {
			return err
		}
		of := &got
		if f.rk != nil {
			old := got // Invert replaces the key and the fields, it does not change them
			if err := f.rk.Invert(&old); err == nil {
				of = &old
			}
		}
		c, err := f.user.Cohort(of, f.Side.Sel.Buckets)
		switch {
		case err != nil:
			c = -1
		case !f.in[c]:
			continue
		}
		k, err := f.Side.key(&got)
		if err != nil {
			return fmt.Errorf("verify: a new record's key: %w", err)
		}
		emit(k, item(c, "", recs[i]))
	}
	return nil
}

// CompareFn judges one new key: in old and new (matching or mismatched),
// old only (missing in new), new only (extra in new), and emits a
// one-record tally for its cohort; each differing key also goes to its
// second output, as a keyLine. Findings are read again (see recheck.go)
// in batches: they wait in the bundle until recheckBatch of them do, or
// the bundle ends.
type CompareFn struct {
	Side     Side `json:"side"`
	Examples int  `json:"examples"`
	// Spec is the rewrite (for the old keys of records extra in new);
	// Source the old store.
	Spec   rekeyer.Text    `json:"spec"`
	Source config.Endpoint `json:"source"`
	// Recheck, if set, reads every finding again (see recheck.go).
	Recheck *RecheckSpec `json:"recheck,omitempty"`
	// Routed are the old keys of the records the library routes around
	// (Verify.Routed).
	Routed map[string]bool `json:"routed,omitempty"`
	// Repair, if set, makes the job a repair's (RepairCompareFn): each
	// finding left after the recheck is also put right, or left, as
	// Repair says.
	Repair *RepairPick `json:"repair,omitempty"`

	rc      *rechecker
	rk      *rekeyer.Rekeyer
	pending []*recheckItem
	since   time.Time // when the first pending finding came
}

func (f *CompareFn) Setup(ctx context.Context) error {
	if f.Spec != "" {
		var err error
		if f.rk, err = f.Spec.Build(); err != nil {
			return err
		}
	}
	if f.Recheck == nil {
		return nil
	}
	var err error
	f.rc, err = openRechecker(ctx, f.Recheck, f.Side)
	return err
}

func (f *CompareFn) Teardown() {
	if f.rc != nil {
		f.rc.close()
	}
}

// joined is one new key's records of both sides: the record new should
// hold (want, nil when old has none) and the one it holds (got), the old
// record, its cohort and its key's text.
type joined struct {
	cohort         int
	oldKey         string
	want, got, old *record.Record
}

// joinedItems reads one new key's records of both sides.
func joinedItems(side Side, key string, olds, news func(*[]byte) bool) (joined, error) {
	j := joined{cohort: -1}
	var b []byte
	for olds(&b) {
		oc, ok, rs, err := unitem(b)
		if err != nil {
			return j, err
		}
		if j.want != nil {
			// Two old records with one new key: the rewrite collides.
			return j, fmt.Errorf("verify: old records %s and %s both map to new key %s", j.oldKey, ok, key)
		}
		j.cohort, j.oldKey, j.want = oc, ok, &rs[0]
		if len(rs) > 1 {
			j.old = &rs[1]
		}
	}
	for news(&b) {
		nc, _, rs, err := unitem(b)
		if err != nil {
			return j, err
		}
		if j.cohort < 0 {
			j.cohort = nc
		}
		j.got = &rs[0]
	}
	return j, nil
}

// differ says how got (the new record held) differs from want (the one
// new should hold), "" when they agree.
func (v Side) differ(got, want *record.Record) (string, error) {
	g, err := v.normal(got)
	if err != nil {
		return "", err
	}
	w, err := v.normal(want)
	if err != nil {
		return "", err
	}
	return record.Diff(&g, &w), nil
}

// compareOut are CompareFn's outputs: the tallies, the differing keys
// and, in a repair, the records to write or delete (RepairCompareFn).
type compareOut struct {
	emit func(int, string)
	keys func(string)
	fix  func(record.Batch)
}

func (f *CompareFn) ProcessElement(ctx context.Context, key string, olds, news func(*[]byte) bool, emit func(int, string), keys func(string)) error {
	return f.process(ctx, key, olds, news, compareOut{emit: emit, keys: keys})
}

// process judges one new key (ProcessElement).
func (f *CompareFn) process(ctx context.Context, key string, olds, news func(*[]byte) bool, out compareOut) error {
	jd, err := joinedItems(f.Side, key, olds, news)
	if err != nil {
		return err
	}
	finding := jd.want == nil || jd.got == nil
	if !finding {
		d, err := f.Side.differ(jd.got, jd.want)
		if err != nil {
			return err
		}
		finding = d != ""
	}
	if finding && jd.cohort >= 0 && len(f.Routed) > 0 && f.Routed[f.oldKeyOf(jd)] {
		return f.judge(ctx, key, jd, true, out)
	}
	if finding && f.rc != nil && jd.cohort >= 0 {
		if len(f.pending) == 0 {
			f.since = time.Now()
		}
		f.pending = append(f.pending, f.rc.item(key, jd))
		if len(f.pending) >= recheckBatch {
			return f.flush(ctx, out)
		}
		return nil
	}
	return f.judge(ctx, key, jd, false, out)
}

// FinishBundle reads the bundle's last findings again and judges them.
func (f *CompareFn) FinishBundle(ctx context.Context, emit func(int, string), keys func(string)) error {
	return f.flush(ctx, compareOut{emit: emit, keys: keys})
}

// flush reads the pending findings again (one batch) and judges them.
func (f *CompareFn) flush(ctx context.Context, out compareOut) error {
	items := f.pending
	f.pending = nil
	if len(items) == 0 {
		return nil
	}
	if err := f.rc.settle(ctx, items, f.since); err != nil {
		return fmt.Errorf("verify: reading %d findings again (%s, …): %w", len(items), items[0].key, err)
	}
	for _, it := range items {
		if it.settled {
			t := operator.VerifyCohort{Cohort: it.jd.cohort, Settled: 1}
			verifySettled.Inc(ctx, 1)
			verifyCompared.Inc(ctx, 1)
			line, err := json.Marshal(t)
			if err != nil {
				return err
			}
			out.emit(t.Cohort, string(line))
			continue
		}
		if err := f.judge(ctx, it.key, it.jd, false, out); err != nil {
			return err
		}
	}
	return nil
}

// oldKeyOf is the old key's text of a joined record: the old record's,
// or for one extra in new, its old key by the inverse rewrite ("" when
// there is none).
func (f *CompareFn) oldKeyOf(jd joined) string {
	if jd.want != nil || jd.got == nil {
		return jd.oldKey
	}
	if f.rk == nil {
		return ""
	}
	inv, ok := inverseOf(f.rk, jd.got, f.Source)
	if !ok {
		return ""
	}
	k, err := f.Side.oldKey(inv)
	if err != nil {
		return ""
	}
	return k
}

// judge counts one new key (routed: its record is routed around) and
// emits its tally and, when it differs, its key; in a repair, a
// difference is put right or left (RepairPick).
func (f *CompareFn) judge(ctx context.Context, key string, jd joined, routed bool, out compareOut) error {
	c, oldKey, want, got := jd.cohort, jd.oldKey, jd.want, jd.got
	var t operator.VerifyCohort
	var kind, text string
	switch {
	case want != nil && got == nil:
		t.Missing, kind, text = 1, "missing_in_new", oldKey
	case want == nil && got != nil:
		if c < 0 {
			verifyUnattributed.Inc(ctx, 1)
			return nil
		}
		t.Extra, kind, text = 1, "extra_in_new", key
	default:
		d, err := f.Side.differ(got, want)
		if err != nil {
			return err
		}
		if d == "" {
			t.Matching = 1
			break
		}
		t.Mismatched, kind, text = 1, "mismatched", oldKey+": "+d
	}
	verifyCompared.Inc(ctx, 1)
	switch {
	case kind == "":
		verifyMatching.Inc(ctx, 1)
	case routed:
		t.Missing, t.Extra, t.Mismatched = 0, 0, 0
		t.Routed = 1
		text = f.oldKeyOf(jd) + " (" + strings.ReplaceAll(kind, "_", " ") + ")"
		kind = "logged_routed_around"
		t.Examples.Routed = []string{text}
		verifyRouted.Inc(ctx, 1)
	case t.Missing == 1:
		t.Examples.Missing = []string{text}
		verifyMissing.Inc(ctx, 1)
	case t.Extra == 1:
		t.Examples.Extra = []string{text}
		verifyExtra.Inc(ctx, 1)
	default:
		t.Examples.Mismatched = []string{text}
		verifyMismatched.Inc(ctx, 1)
	}
	t.Cohort = c
	kl := operator.KeyLine{Cohort: c, Finding: kind, Key: text}
	if f.Repair != nil && kind != "" && !routed {
		kl.OldKey = f.oldKeyOf(jd)
		kl.Repair = operator.RepairLeft
		if b, ok := f.Repair.pick(jd, kl.OldKey); ok {
			out.fix(b)
			t.RepairTried, kl.Repair = 1, operator.RepairTried
		}
	}
	line, err := json.Marshal(t)
	if err != nil {
		return err
	}
	out.emit(c, string(line))
	if kind != "" {
		line, err := json.Marshal(kl)
		if err != nil {
			return err
		}
		out.keys(string(line))
	}
	return nil
}

// CohortTallyFn merges a cohort's tallies (JSON operator.VerifyCohort), keeping
// up to Examples examples of each finding.
type CohortTallyFn struct {
	Examples int `json:"examples"`
}

func (f *CohortTallyFn) CreateAccumulator() string { return "" }

func (f *CohortTallyFn) ExtractOutput(acc string) string { return acc }

func (f *CohortTallyFn) AddInput(acc, in string) string { return f.MergeAccumulators(acc, in) }

func (f *CohortTallyFn) MergeAccumulators(a, b string) string {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	var x, y operator.VerifyCohort
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		panic("verify: corrupt tally") // produced by CompareFn; cannot happen
	}
	x.Merge(y, f.Examples)
	out, _ := json.Marshal(x)
	return string(out)
}

// ReportLineFn writes a cohort's merged tally as its report line.
type ReportLineFn struct{}

func (ReportLineFn) ProcessElement(_ int, tally string) string { return tally }
