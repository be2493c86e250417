package cutover_test

import (
	"context"
	"slices"
	"testing"

	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"

	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/testkit/committap"
	"github.com/rekeyio/rekey/record"
)

// batchPhases are the phases a batch's records are in, one user each:
// every order of sides a write takes (old; old then new; new then old;
// new).
var batchPhases = []phases.Phase{phases.Old, phases.DualWrite, phases.ReadNew, phases.NewOnly}

// batchWants is where a write lands in each of batchPhases.
var batchWants = map[phases.Phase]struct{ old, new bool }{
	phases.Old: {true, false}, phases.DualWrite: {true, true}, phases.ReadNew: {true, true}, phases.NewOnly: {false, true},
}

// TestSpannerWriteBatch: one WriteBatch of records of users in four
// phases, each user's record written twice (v1, then v2, in one batch),
// lands where Write would put each, with the later value: one database
// (one transaction a group) and two.
func TestSpannerWriteBatch(t *testing.T) {
	t.Parallel()
	for _, same := range []bool{true, false} {
		name := map[bool]string{true: "one database", false: "two databases"}[same]
		t.Run(name, func(t *testing.T) {
			e := newSpannerEnv(t, same, "")
			var recs []record.Record
			for _, p := range batchPhases {
				u := "batch-" + string(p)
				e.setPhase(t, u, p)
				recs = append(recs, logRow(u, 1, "v1"), logRow(u, 2, "v1"))
			}
			for _, p := range batchPhases {
				recs = append(recs, logRow("batch-"+string(p), 1, "v2"))
			}
			for i, err := range e.lib.WriteBatch(context.Background(), recs) {
				if err != nil {
					t.Errorf("record %d (%s): %v", i, recs[i].Describe(), err)
				}
			}
			for _, p := range batchPhases {
				u, w := "batch-"+string(p), batchWants[p]
				want := func(written bool) []string {
					if written {
						return []string{"v2", "v1"}
					}
					return nil
				}
				if got := pages(t, e.old, "Logs", u); !slices.Equal(got, want(w.old)) {
					t.Errorf("%s: old holds %q, want %q", p, got, want(w.old))
				}
				if got := pages(t, e.new, "LogsV2", u); !slices.Equal(got, want(w.new)) {
					t.Errorf("%s: new holds %q, want %q", p, got, want(w.new))
				}
			}
			if st := e.lib.Stats(); st.Writes[phases.DualWrite] != 3 {
				t.Errorf("stats: %d dual_write writes counted, want 3", st.Writes[phases.DualWrite])
			}
		})
	}
}

// TestDatastoreWriteBatch is TestSpannerWriteBatch for entities.
func TestDatastoreWriteBatch(t *testing.T) {
	t.Parallel()
	for _, newDB := range []string{"", dsNewDatabase} {
		name := map[string]string{"": "one database", dsNewDatabase: "two databases"}[newDB]
		t.Run(name, func(t *testing.T) {
			e := newDSEnvIn(t, newDB, nil)
			var recs []record.Record
			for _, p := range batchPhases {
				u := "batch-" + string(p)
				e.setPhase(t, u, p)
				recs = append(recs, e.entity(u, 1, "v1"), e.entity(u, 2, "v1"))
			}
			for _, p := range batchPhases {
				recs = append(recs, e.entity("batch-"+string(p), 1, "v2"))
			}
			for i, err := range e.lib.WriteBatch(context.Background(), recs) {
				if err != nil {
					t.Errorf("record %d (%s): %v", i, recs[i].Describe(), err)
				}
			}
			for _, p := range batchPhases {
				u, w := "batch-"+string(p), batchWants[p]
				for ns, written := range map[string]bool{e.oldNS: w.old, e.newNS: w.new} {
					// seq 1 holds v2 (its later write), seq 2 v1.
					got := e.pagesIn(t, ns, u)
					slices.Sort(got)
					if want := []string{"v1", "v2"}; written && !slices.Equal(got, want) || !written && len(got) > 0 {
						t.Errorf("%s: namespace %s holds %q, want written %v (v1 and v2)", p, ns, got, written)
					}
				}
			}
		})
	}
}

// TestSpannerWriteBatchFailures: across databases, a record whose new
// row cannot be built (new's Page holds 5 characters) is logged for
// repair alone and the batch's other records reach both; a second commit
// that fails (injected: Unavailable on every commit of LogsV2) logs every
// call of it for repair and each call succeeds; a failed first commit
// fails every call of its group and writes nothing else.
func TestSpannerWriteBatchFailures(t *testing.T) {
	ctx := context.Background()
	tapOld, tapNew := twoTaps(t, emulator.EnvSpannerHost)
	e := newSpannerEnvVia(t, false, `CREATE TABLE LogsV2 (ShardId INT64 NOT NULL, UserId STRING(36) NOT NULL, Seq INT64 NOT NULL, Page STRING(5)) PRIMARY KEY (ShardId, UserId, Seq)`, tapOld.Addr(), tapNew.Addr())
	repairs := func() int64 {
		t.Helper()
		var n int64
		if err := e.new.Single().Query(ctx, spanner.Statement{SQL: "SELECT COUNT(*) FROM RekeyRepair WHERE Migration = @m AND Missed = 'new'", Params: map[string]any{"m": e.migration}}).
			Do(func(r *spanner.Row) error { return r.Columns(&n) }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	mustSucceed := func(recs ...record.Record) {
		t.Helper()
		for i, err := range e.lib.WriteBatch(ctx, recs) {
			if err != nil {
				t.Errorf("record %d (%s): %v, want success", i, recs[i].Describe(), err)
			}
		}
	}
	dual, faulty, readNew := "batch-dual", "batch-faulty", "batch-readnew"
	e.setPhase(t, dual, phases.DualWrite)
	e.setPhase(t, faulty, phases.DualWrite)
	e.setPhase(t, readNew, phases.ReadNew)

	tapNew.Reset()
	mustSucceed(logRow(dual, 1, "ok"), logRow(dual, 2, "longer than five"), logRow(dual, 3, "ok"))
	// Seen from new's side of the wire: the two rows new takes came in
	// one commit.
	var rowCommits, rows int
	for _, c := range tapNew.Commits() {
		n := 0
		for _, m := range c.Mutations {
			if m.Table == "LogsV2" {
				n++
			}
		}
		if n > 0 {
			rowCommits, rows = rowCommits+1, rows+n
		}
	}
	if rowCommits != 1 || rows != 2 {
		t.Errorf("new's rows came in %d commits holding %d rows; want 1 commit of 2", rowCommits, rows)
	}
	if o, n := pages(t, e.old, "Logs", dual), pages(t, e.new, "LogsV2", dual); len(o) != 3 || !slices.Equal(n, []string{"ok", "ok"}) {
		t.Errorf("a record new refuses: old holds %q, new %q; want all 3 in old, the other 2 in new", o, n)
	}
	if n := repairs(); n != 1 {
		t.Errorf("a record new refuses: %d repair entries, want 1", n)
	}

	tapNew.SetFaults(committap.Faults{Rate: 1, Kinds: []committap.Fault{{Code: codes.Unavailable}}, Tables: []string{"LogsV2"}})
	mustSucceed(logRow(faulty, 1, "a"), logRow(faulty, 2, "b"), logRow(faulty, 3, "c"))
	if o, n := pages(t, e.old, "Logs", faulty), pages(t, e.new, "LogsV2", faulty); len(o) != 3 || len(n) != 0 {
		t.Errorf("a failed second commit: old holds %q, new %q; want all 3 in old only", o, n)
	}
	if n := repairs(); n != 1+3 {
		t.Errorf("a failed second commit: %d repair entries, want 1 + 3 (every call of it)", n)
	}

	for i, err := range e.lib.WriteBatch(ctx, []record.Record{logRow(readNew, 1, "a"), logRow(readNew, 2, "b")}) {
		if err == nil {
			t.Errorf("read_new record %d in a failed authoritative commit succeeded", i)
		}
	}
	tapNew.SetFaults(committap.Faults{})
	if got := pages(t, e.old, "Logs", readNew); len(got) != 0 {
		t.Errorf("after the authoritative commit failed, old holds %q; want nothing", got)
	}
}
