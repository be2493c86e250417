package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// The soak's forensics: a violation names a key and the calls around it,
// but not what reached the stores. The commit taps saw every commit in
// front of old's database and new's, with the faults they injected, so
// on a violation the soak prints every commit that wrote the key's row or
// entity in old or in new, or its touched mark (and, for an interleaved
// child, those of its parent, whose delete cascades to it). A rare
// report that a rerun of its seed does not reproduce (the interleaving
// with the emulators is not seeded) is then explained by its own log.
// Writes by DML (a job's UPDATE of marks, ClearBehindOld) carry no
// mutations in their commits, so they do not show; the operator's steps
// around the violation, printed beside them, do.

// soakSpannerKeys are the key schemas of the soak's Spanner tables, so
// that the taps decode their commits' keys (committap.Start).
var soakSpannerKeys = func() []rewrite.KeySchema {
	var out []rewrite.KeySchema
	for _, s := range [][2]string{
		{"Logs", "UserId STRING(36), Seq INT64"},
		{"LogsV2", "ShardId INT64, UserId STRING(36), Seq INT64"},
		{"LogsX", "ShardId INT64, LogKey STRING(MAX)"},
		{"Customers", "CustomerId INT64"},
		{"Orders", "CustomerId INT64, OrderId INT64"},
		{"RekeyTouched", "Migration STRING(MAX), NewKey STRING(MAX)"},
	} {
		ks, err := rewrite.ParseKeySchema(s[0], s[1])
		if err != nil {
			panic(err)
		}
		out = append(out, ks)
	}
	return out
}()

// soakKeyNeedles returns, for the soak's key k ("user/seq"), the texts
// that name it in the taps' commits (committap.Mutation.Text): in old,
// its old key; in new, its new key and its touched mark's key; for an
// interleaved child, its parent's too.
func (s *soak) soakKeyNeedles(k string) (old, new []string, err error) {
	user, seqText, ok := strings.Cut(k, "/")
	if !ok {
		return nil, nil, fmt.Errorf("key %q is not user/seq", k)
	}
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil {
		return nil, nil, fmt.Errorf("key %q: %w", k, err)
	}
	j, err := migration.Resolve(context.Background(), s.cfg)
	if err != nil {
		return nil, nil, err
	}
	rk, err := j.Spec.Build()
	if err != nil {
		return nil, nil, err
	}
	recs := []record.Record{s.key(user, seq)}
	if s.cascade && seq != 0 {
		recs = append(recs, s.key(user, 0))
	}
	for _, rec := range recs {
		nr := rec
		nr.Fields = append([]record.Field(nil), rec.Fields...)
		if err := rk.Rewrite(&nr); err != nil {
			return nil, nil, err
		}
		if rec.Key != nil {
			old = append(old, rec.Key.String())
		} else if text, ok := soakSpannerKeyText(rec); ok {
			old = append(old, text)
		}
		if nr.Key != nil { // Datastore: new's key; its mark's name holds it without the namespace
			bare := *nr.Key
			bare.Namespace, bare.Database = "", ""
			quoted, _ := json.Marshal(bare.String())
			new = append(new, nr.Key.String(), string(quoted[1:len(quoted)-1]))
			continue
		}
		ks := rk.SpannerOut()
		child := false
		if c, ok := rk.ChildOut(nr.Table); ok {
			ks, child = c, true
		}
		vals, ok := soakKeyValues(nr, ks)
		if !ok {
			continue
		}
		new = append(new, rewrite.FormatKey(vals, len(vals) == 1))
		// The mark's key, as the tap formats its NewKey column: a JSON
		// string inside the key's list.
		mark := rewrite.FormatKey(vals, false)
		if child {
			mark = nr.Table + mark
		}
		quoted, _ := json.Marshal(mark)
		new = append(new, string(quoted))
	}
	return old, new, nil
}

// soakSpannerKeyText is rec's key as the taps format it, from the soak's
// key schema of its table.
func soakSpannerKeyText(rec record.Record) (string, bool) {
	for _, ks := range soakSpannerKeys {
		if strings.EqualFold(ks.Table, rec.Table) {
			if vals, ok := soakKeyValues(rec, ks); ok {
				return rewrite.FormatKey(vals, len(vals) == 1), true
			}
		}
	}
	return "", false
}

// soakKeyValues are rec's values of ks's columns (the soak's keys are
// INT64 and STRING).
func soakKeyValues(rec record.Record, ks rewrite.KeySchema) ([]rewrite.Value, bool) {
	vals := make([]rewrite.Value, 0, len(ks.Columns))
	for _, c := range ks.Columns {
		f, ok := rec.Get(c.Name)
		if !ok {
			return nil, false
		}
		switch f.Kind {
		case record.KindInt:
			vals = append(vals, rewrite.Int64(f.Int))
		case record.KindString:
			vals = append(vals, rewrite.String(f.Str))
		default:
			return nil, false
		}
	}
	return vals, true
}

// commitsOf returns a line for each commit of the taps that wrote a key
// one of needles names (a data key equal to one, or a mark's key holding
// one), between from and to.
func (s *soak) commitsOf(needles []string, from, to time.Time) []string {
	var lines []string
	for i, tp := range s.taps {
		for _, c := range tp.Commits() {
			if c.At.Before(from) || c.At.After(to) {
				continue
			}
			var hit []string
			for _, m := range c.Mutations {
				for _, n := range needles {
					if m.Text == n || strings.Contains(m.Text, n) && strings.Contains(m.Table, "Touched") {
						hit = append(hit, m.Table+" "+m.Text)
						break
					}
				}
			}
			if len(hit) == 0 {
				continue
			}
			outcome := "ok"
			switch {
			case !c.Done:
				outcome = "unfinished"
			case c.Err != nil:
				outcome = "failed: " + trim(c.Err.Error(), 80)
			}
			if c.Fault != nil {
				outcome += " (injected: " + c.Fault.String() + ")"
			}
			lines = append(lines, fmt.Sprintf("  %8.3fs tap %d commit %d (%d mutations) %s: %s", c.At.Sub(s.start).Seconds(), i, c.Seq, len(c.Mutations), outcome, strings.Join(hit, "; ")))
		}
	}
	return lines
}

// printCommits prints the commits that wrote key k around op (see the
// file's comment).
func (s *soak) printCommits(t *testing.T, k string, at *soakOp) {
	old, new, err := s.soakKeyNeedles(k)
	if err != nil {
		t.Logf("commits of %s: %v", k, err)
		return
	}
	needles := append(old, new...)
	lines := s.commitsOf(needles, at.inv.Add(-10*time.Second), at.ret.Add(2*time.Second))
	t.Logf("commits that wrote %s (keys %s) from 10 s before the violation:\n%s", k, strings.Join(needles, ", "), strings.Join(lines, "\n"))
}
