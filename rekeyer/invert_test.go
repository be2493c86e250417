package rekeyer

import (
	"errors"
	"testing"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// TestInvert checks that Invert(Rewrite(r)) is r, for a Spanner row
// (shard: a column added in front, a table rename) and a Datastore entity
// (hashprefix, a kind rename and a namespace move), through the
// strategy's inverse, and through the kept original key where the
// strategy has none (uuid v5); without either it refuses.
func TestInvert(t *testing.T) {
	row := record.Record{Table: "Logs", Fields: []record.Field{{Name: "UserId", Value: record.String("u1")}, {Name: "Seq", Value: record.Int(3)}, {Name: "Page", Value: record.String("/a")}}}
	k := dsKey("Log", "u1.3")
	k.Namespace = "old"
	ent := record.Record{Table: "Log", Key: &k, Fields: []record.Field{{Name: "User", Value: record.String("u1")}, {Name: "Page", Value: record.String("/a")}}}
	for _, tc := range []struct {
		name string
		o    Options
		rec  record.Record
	}{
		{"spanner shard", Options{Strategy: strategy(t, "shard", rewrite.Params{"n": 8, "mode": "abs"}), SourceStore: record.Spanner, TargetStore: record.Spanner,
			Table: "Logs", Key: schema(t, "Logs", "UserId STRING(36), Seq INT64"), TargetTable: "LogsV2"}, row},
		{"spanner uuid kept", Options{Strategy: strategy(t, "uuid", rewrite.Params{"version": 5, "namespace": "6ba7b810-9dad-11d1-80b4-00c04fd430c8"}), SourceStore: record.Spanner, TargetStore: record.Spanner,
			Table: "Logs", Key: schema(t, "Logs", "UserId STRING(36), Seq INT64"), TargetTable: "LogsV2", KeepOriginalKey: "OldKey"}, row},
		{"datastore hashprefix", Options{Strategy: strategy(t, "hashprefix", nil), SourceStore: record.Datastore, TargetStore: record.Datastore,
			Kind: "Log", TargetKind: "LogV2", TargetNamespace: "new"}, ent},
		{"datastore uuid kept", Options{Strategy: strategy(t, "uuid", rewrite.Params{"version": 5, "namespace": "6ba7b810-9dad-11d1-80b4-00c04fd430c8"}), SourceStore: record.Datastore, TargetStore: record.Datastore,
			Kind: "Log", TargetNamespace: "new", KeepOriginalKey: "OldKey"}, ent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rk, err := New(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			r := tc.rec
			r.Fields = append([]record.Field(nil), tc.rec.Fields...)
			if err := rk.Rewrite(&r); err != nil {
				t.Fatal(err)
			}
			if record.Same(&r, &tc.rec) {
				t.Fatalf("the rewrite left %s unchanged", tc.rec.Describe())
			}
			if err := rk.Invert(&r); err != nil {
				t.Fatal(err)
			}
			if r.Key != nil {
				r.Key.Namespace = tc.rec.Key.Namespace // the caller's
			}
			if d := record.Diff(&r, &tc.rec); d != "" {
				t.Errorf("Invert(Rewrite(%s)): %s", tc.rec.Describe(), d)
			}
			if tc.o.KeepOriginalKey != "" {
				o := tc.o
				o.KeepOriginalKey = ""
				rk, err := New(o)
				if err != nil {
					t.Fatal(err)
				}
				r := tc.rec
				r.Fields = append([]record.Field(nil), tc.rec.Fields...)
				if err := rk.Rewrite(&r); err != nil {
					t.Fatal(err)
				}
				if err := rk.Invert(&r); !errors.Is(err, ErrNotInvertible) {
					t.Errorf("Invert without a kept key: %v, want ErrNotInvertible", err)
				}
			}
		})
	}
}
