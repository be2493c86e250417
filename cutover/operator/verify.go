package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
)

// VerifyJob is the job of a verify (rekey verify), which compares old
// and new for some cohorts (Jobs.Verify runs it): a Beam job
// on the same runners and sources as a migration. It reads the old
// records of the cohorts (a Spanner source filters in its query), maps
// each through the very rewrite the migration and the application's
// library use, reads the new records (of the cohorts, where the user id
// can be told from a new record; all of them otherwise), joins the two by
// new key, and counts per cohort: matching, missing in new, extra in new
// and mismatched (compared by type and value: record.Diff, timestamps by
// instant, floats exactly, key-valued properties as the rewrite maps
// them), with up to Examples example keys of each. The report, one JSON
// line per cohort with records (VerifyCohort), is returned (VerifyFound);
// records that cannot be read or rewritten go to the dead letters.
type VerifyJob struct {
	Cohorts    []cohort.Range
	Examples   int
	ReportPath string
	// Repair, if set, makes the job a repair (see Repair): what it
	// finds is also put right, conditionally on the touched marks as of
	// Repair's Since.
	Repair *phases.Backfill
	// RepairReadNew (cohort ranges) and RepairPending (old keys): in
	// read_new cohorts a repair puts right only the records the repair
	// log says new missed.
	RepairReadNew string
	RepairPending map[string]bool
	// Routed (old keys, verify only): records whose latest repair-log
	// entry says new missed a write or delete that old took, in cohorts
	// where old is authoritative; the library routes around them (see
	// Verify), so their differences are reported apart, as logged and
	// routed around, not as findings.
	Routed map[string]bool
	// RoutedEntries (entry IDs) are the repair-log entries of Routed.
	RoutedEntries map[string]bool
}

// VerifyCohort is one cohort's line of a verify report.
type VerifyCohort struct {
	Cohort     int `json:"cohort"`
	Matching   int `json:"matching"`
	Missing    int `json:"missing_in_new"`
	Extra      int `json:"extra_in_new"`
	Mismatched int `json:"mismatched"`
	// Settled counts the findings that old and new agreed on when read
	// again (writes in flight while the job read; see recheck.go).
	Settled int `json:"settled_on_recheck"`
	// Routed counts the differing records (missing, extra or mismatched)
	// whose latest repair-log entry says new missed a write or delete
	// that old took, while old is authoritative: logged, and routed
	// around by the library (it reads old for them in read_new, and
	// new_only is refused until a repair copies them). They are not
	// counted as findings.
	Routed int `json:"logged_routed_around"`
	// RepairLog counts the cohort's entries in the repair log (added by
	// Verify, which reads the log); RepairLogRouted those of them that
	// are routed around (as Routed).
	RepairLog       int `json:"repair_log"`
	RepairLogRouted int `json:"repair_log_routed_around"`
	// RepairTried counts, in a repair, the findings it wrote or deleted
	// in new (each unless the application touched the record since the
	// repair began; see Repair).
	RepairTried int `json:"repair_tried,omitempty"`
	// Examples holds up to the job's Examples keys per finding: old keys
	// for missing and mismatched records (with how they differ), new keys
	// for extra ones, the logged keys and operations of the repair log.
	Examples VerifyExamples `json:"examples"`
	// Keys holds every differing key (as Examples, without a bound) and
	// every repair-log entry, so that people and tools can act on all of
	// them.
	Keys VerifyExamples `json:"keys"`
}

// VerifyExamples are a cohort's example keys, by finding.
type VerifyExamples struct {
	Missing    []string `json:"missing_in_new,omitempty"`
	Extra      []string `json:"extra_in_new,omitempty"`
	Mismatched []string `json:"mismatched,omitempty"`
	Routed     []string `json:"logged_routed_around,omitempty"`
	RepairLog  []string `json:"repair_log,omitempty"`
}

// Clean reports whether the cohort's old and new agree and nothing waits
// for repair.
func (v VerifyCohort) Clean() bool {
	return v.Missing == 0 && v.Extra == 0 && v.Mismatched == 0 && v.Routed == 0 && v.RepairLog == 0
}

// Markable reports whether verify --mark accepts the cohort: no finding,
// and every repair-log entry one the library routes around (differences
// counted in Routed are such entries' records).
func (v VerifyCohort) Markable() bool {
	return v.Missing == 0 && v.Extra == 0 && v.Mismatched == 0 && v.RepairLog == v.RepairLogRouted
}

// Findings is the cohort's differing records, routed around or not.
func (v VerifyCohort) Findings() int { return v.Missing + v.Extra + v.Mismatched + v.Routed }

// Merge adds o's counts and examples (up to n each) to v.
func (v *VerifyCohort) Merge(o VerifyCohort, n int) {
	v.addCounts(o)
	v.Examples.add(o.Examples, n)
	v.Keys.add(o.Keys, -1)
}

// addCounts adds o's counts to v.
func (v *VerifyCohort) addCounts(o VerifyCohort) {
	v.Matching += o.Matching
	v.Missing += o.Missing
	v.Extra += o.Extra
	v.Mismatched += o.Mismatched
	v.Settled += o.Settled
	v.Routed += o.Routed
	v.RepairLog += o.RepairLog
	v.RepairLogRouted += o.RepairLogRouted
	v.RepairTried += o.RepairTried
}

// TotalOf sums the counts of cohorts' report lines (Cohort -1, no keys).
func TotalOf(vs []VerifyCohort) VerifyCohort {
	t := VerifyCohort{Cohort: -1}
	for _, v := range vs {
		t.addCounts(v)
	}
	return t
}

// add appends o's keys to e, up to n of each (n < 0: all).
func (e *VerifyExamples) add(o VerifyExamples, n int) {
	add := func(dst *[]string, src []string) {
		for _, s := range src {
			if n >= 0 && len(*dst) >= n {
				return
			}
			*dst = append(*dst, s)
		}
	}
	add(&e.Missing, o.Missing)
	add(&e.Extra, o.Extra)
	add(&e.Mismatched, o.Mismatched)
	add(&e.Routed, o.Routed)
	add(&e.RepairLog, o.RepairLog)
}

// VerifyFound is what a verify job found: its per-cohort tallies (any
// number of lines per cohort, merged by Verify) and every differing key.
type VerifyFound struct {
	Cohorts []VerifyCohort
	Keys    []KeyLine
}

// KeyLine is a differing key in the keys output: its cohort, what
// differs (VerifyExamples' names) and the key (with how it differs).
type KeyLine struct {
	Cohort  int    `json:"cohort"`
	Finding string `json:"finding"`
	Key     string `json:"key"`
	// OldKey and Repair (a repair's findings): the record's old key ("" if
	// it has none) and what the job did, RepairTried or RepairLeft.
	OldKey string `json:"old_key,omitempty"`
	Repair string `json:"repair,omitempty"`
}

// KeyLine.Repair's values: the repair wrote or deleted the record in new
// (conditionally), or left it (new is authoritative and the repair log
// does not say new missed it).
const (
	RepairTried = "tried"
	RepairLeft  = "left"
)

// Counters of a verify job.
const (
	VerifyMatching     = "verify_matching"
	VerifyMissing      = "verify_missing_in_new"
	VerifyExtra        = "verify_extra_in_new"
	VerifyMismatched   = "verify_mismatched"
	VerifyUnattributed = "verify_new_without_user"
	VerifySettled      = "verify_settled_on_recheck"
	VerifyRouted       = "verify_logged_routed_around"
	// VerifyCompared counts the new keys judged (one per record of old
	// or new in the cohorts): the progress of a verify.
	VerifyCompared = "verify_compared"
)

// sortReport orders a report's lines by cohort.
func sortReport(rs []VerifyCohort) {
	sort.Slice(rs, func(i, k int) bool { return rs[i].Cohort < rs[k].Cohort })
}

// VerifyOptions say what Verify compares.
type VerifyOptions struct {
	// Migration names the migration in the phase store; Cohorts are the
	// cohorts to compare.
	Migration string
	Cohorts   []cohort.Range
	// Examples is how many example keys to keep per finding and cohort
	// (0: 5).
	Examples int
	// ReportPath receives the report, one JSON line per cohort.
	ReportPath string
	// Mark moves the cohorts to verified when every one is clean; Who
	// goes to the audit.
	Mark bool
	Who  string
}

// Verify runs the verify job of cfg (jobs.Verify), adds each cohort's
// entries of the repair log, writes the report (every selected cohort,
// clean ones too, each with every differing key) to o.ReportPath and
// returns it, sorted by cohort. With o.Mark and a report --mark accepts
// (VerifyCohort.Markable of every cohort, no dead letter) it moves the
// cohorts to verified, by the rules (they must be backfilled), and
// returns the move's audit.
//
// What --mark accepts: no record missing, extra or different in new,
// except records the library routes around, and no repair-log entry but
// theirs. A record is routed around when its cohort is in a phase where
// old is authoritative (dual_write to shadow) and its latest repair-log
// entry says new missed a write or delete old took: reads go to old until
// read_new, in read_new the library reads old for it, new_only is
// refused while such an entry is left, and rekey repair copies it. Such
// entries keep coming while the application's second writes fail at a
// steady rate; a verify that waited for none would never pass. They are
// reported as "logged, routed around", apart from the findings.
func Verify(ctx context.Context, cfg *config.Config, o VerifyOptions, jobs Jobs) ([]VerifyCohort, *migration.Result, *phases.Audit, error) {
	if o.Migration == "" || len(o.Cohorts) == 0 || o.ReportPath == "" {
		return nil, nil, nil, &migration.ConfigError{Err: errors.New("verify needs the migration's name, the cohorts and a report path")}
	}
	if err := migration.Reach(ctx, cfg); err != nil {
		return nil, nil, nil, err
	}
	st, closeStore, err := OpenStore(ctx, cfg.Target, false)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("phase store: %w", err)
	}
	defer closeStore()
	entries, err := RepairsOf(ctx, st, o.Migration)
	if err != nil {
		return nil, nil, nil, err
	}
	m, err := st.Load(ctx, o.Migration)
	if err != nil {
		return nil, nil, nil, err
	}
	routed, routedEntries := routedAround(m, entries)
	report, res, a, _, err := runVerifyWith(ctx, cfg, st, o, jobs, VerifyJob{Routed: routed, RoutedEntries: routedEntries}, entries)
	return report, res, a, err
}

// routedAround returns the old keys with a repair-log entry (of entries,
// oldest first) in a cohort where old is authoritative (m's phase:
// dual_write to shadow), and those entries' IDs (every entry of such a
// key). The library routes every such key by its touched mark: where new
// missed a write old took, reads go to old (the authoritative store, and
// in read_new too); where old missed one new took while it was
// authoritative (before a rollback), reads go to new (see package
// phases' doc, "Missed writes").
func routedAround(m *phases.Map, entries []phases.RepairEntry) (keys, ids map[string]bool) {
	type rec struct {
		cohort int
		key    string
	}
	latest := map[rec]phases.RepairEntry{}
	for _, e := range entries {
		latest[rec{e.Cohort, e.OldKey}] = e // oldest first: the last is the latest
	}
	keys, ids = map[string]bool{}, map[string]bool{}
	for k, e := range latest {
		if !slices.Contains(repairable, m.Phase(k.cohort)) || e.Missed != "new" && e.Missed != "old" {
			continue
		}
		keys[k.key] = true
	}
	for _, e := range entries {
		if keys[e.OldKey] && slices.Contains(repairable, m.Phase(e.Cohort)) {
			ids[e.ID] = true
		}
	}
	return keys, ids
}

// runVerifyWith is Verify on the phase store st, with the repair-log
// entries read before, and the repair of v (Repair, RepairReadNew,
// RepairPending) when v.Repair is set. It also returns the job's
// differing keys (of the cohorts of o).
func runVerifyWith(ctx context.Context, cfg *config.Config, st phases.Store, o VerifyOptions, jobs Jobs, v VerifyJob, entries []phases.RepairEntry) ([]VerifyCohort, *migration.Result, *phases.Audit, []KeyLine, error) {
	if o.Examples <= 0 {
		o.Examples = 5
	}
	j, err := migration.Resolve(ctx, cfg)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if err := CheckVerify(j); err != nil {
		return nil, nil, nil, nil, err
	}
	v.Cohorts, v.Examples, v.ReportPath = o.Cohorts, o.Examples, o.ReportPath
	found, res, err := jobs.Verify(ctx, j, v)
	if err != nil {
		return nil, res, nil, nil, err
	}
	by := map[int]*VerifyCohort{}
	for _, r := range cohort.Merge(o.Cohorts) {
		for c := r.First; c <= r.Last; c++ {
			by[c] = &VerifyCohort{Cohort: c}
		}
	}
	for _, v := range found.Cohorts {
		if p := by[v.Cohort]; p != nil {
			p.Merge(v, o.Examples)
		}
	}
	var keys []KeyLine
	for _, k := range found.Keys {
		p := by[k.Cohort]
		if p == nil {
			continue
		}
		keys = append(keys, k)
		switch k.Finding {
		case "missing_in_new":
			p.Keys.Missing = append(p.Keys.Missing, k.Key)
		case "extra_in_new":
			p.Keys.Extra = append(p.Keys.Extra, k.Key)
		case "mismatched":
			p.Keys.Mismatched = append(p.Keys.Mismatched, k.Key)
		case "logged_routed_around":
			p.Keys.Routed = append(p.Keys.Routed, k.Key)
		}
	}
	n := o.Examples
	for _, e := range entries {
		if p := by[e.Cohort]; p != nil {
			o := VerifyCohort{RepairLog: 1, Examples: VerifyExamples{RepairLog: []string{e.String()}}, Keys: VerifyExamples{RepairLog: []string{e.String()}}}
			if v.RoutedEntries[e.ID] {
				o.RepairLogRouted = 1
			}
			p.Merge(o, n)
		}
	}
	report := make([]VerifyCohort, 0, len(by))
	clean := res.Counters[migration.DeadLettered] == 0
	var out []string
	for _, v := range by {
		for _, ks := range [][]string{v.Keys.Missing, v.Keys.Extra, v.Keys.Mismatched, v.Keys.Routed} {
			sort.Strings(ks)
		}
		report = append(report, *v)
	}
	sortReport(report)
	for _, v := range report {
		clean = clean && v.Markable()
		b, _ := json.Marshal(v)
		out = append(out, string(b))
	}
	if err := jobs.WriteReport(ctx, o.ReportPath, out); err != nil {
		return report, res, nil, keys, fmt.Errorf("writing the verify report %s: %w", o.ReportPath, err)
	}
	if !o.Mark {
		return report, res, nil, keys, nil
	}
	if !clean {
		return report, res, nil, keys, fmt.Errorf("%w: cohorts stay where they are (see %s)", ErrNotClean, o.ReportPath)
	}
	why := fmt.Sprintf("verify: %d records match", res.Counters[VerifyMatching])
	if n := res.Counters[VerifyRouted]; n > 0 {
		why += fmt.Sprintf(", %d logged and routed around", n)
	}
	_, a, err := st.Move(ctx, phases.Move{Migration: o.Migration, Buckets: cfg.Cohort.Buckets, Cohorts: o.Cohorts, To: phases.Verified, Who: o.Who,
		Why: why, Rules: phases.RulesFor(cfg)})
	if err != nil {
		return report, res, nil, keys, err
	}
	return report, res, &a, keys, nil
}

// ErrNotClean is Verify's error when asked to mark cohorts whose
// verify found differences, repair-log entries or dead letters.
var ErrNotClean = errors.New("verify is not clean")
