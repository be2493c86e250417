package lint

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/plan/rules"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// entity is a record of kind with the leaf id or name and properties.
func entity(kind string, idOrName any, fields ...record.Field) record.Record {
	e := rewrite.PathElement{Kind: kind}
	switch v := idOrName.(type) {
	case int:
		e.ID = int64(v)
	case string:
		e.Name = v
	}
	return record.Record{Table: kind, Key: &rewrite.DatastoreKey{Path: []rewrite.PathElement{e}}, Fields: fields}
}

func indexed(name string, v record.Value) record.Field { return record.Field{Name: name, Value: v} }
func unindexed(name string, v record.Value) record.Field {
	return record.Field{Name: name, Value: v, NoIndex: true}
}

func TestDatastoreChecks(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	sample := func(n int, f func(i int) record.Record) Sample {
		s := Sample{Kind: "K", Fraction: 1}
		for i := range n {
			s.Entities = append(s.Entities, f(i))
		}
		return s
	}
	scattered := func(i int) record.Record { return entity("K", 1+r.IntN(1<<50)) }
	tests := []struct {
		name   string
		sample Sample
		want   []string
	}{
		{"empty", Sample{Kind: "K"}, nil},
		{"scattered ids, nothing else", sample(200, scattered), nil},
		{"dense ids", sample(200, func(i int) record.Record { return entity("K", i+1) }), []string{"monotonic-key kind K"}},
		{"sequential names", sample(200, func(i int) record.Record { return entity("K", fmt.Sprintf("Customer%d", i+1)) }),
			[]string{"sequential-names kind K"}},
		{"names with a slash", sample(10, func(i int) record.Record { return entity("K", fmt.Sprintf("a/%c", 'a'+i)) }),
			[]string{"datastore-name-slash kind K"}},
		{"kind with a slash", Sample{Kind: "K", Entities: []record.Record{entity("a/b", 5)}}, []string{"datastore-name-slash kind a/b"}},
		{"id zero and negative", Sample{Kind: "K", Entities: []record.Record{entity("K", 0), entity("K", -3), entity("K", 17)}},
			[]string{"datastore-id-not-positive kind K"}},
		{"uuid v1 names", sample(20, func(i int) record.Record {
			return entity("K", fmt.Sprintf("%08x-9414-11ec-b3c8-9f6bdeced846", r.Uint32()))
		}), []string{"uuid-v1 kind K"}},
		{"uuid v4 names", sample(20, func(i int) record.Record {
			return entity("K", fmt.Sprintf("%08x-58cc-4372-a567-0e02b2c3d479", r.Uint32()))
		}), nil},
		{"indexed timestamp", sample(100, func(i int) record.Record {
			return entity("K", 1+r.IntN(1<<50), indexed("when", record.Time(t0.Add(time.Duration(r.IntN(1000))*time.Hour))))
		}), []string{"monotonic-indexed-property K.when"}},
		{"unindexed timestamp", sample(100, func(i int) record.Record {
			return entity("K", 1+r.IntN(1<<50), unindexed("created", record.Time(t0.Add(time.Duration(i)*time.Second))))
		}), nil},
		{"indexed counter", sample(100, func(i int) record.Record {
			return entity("K", 1+r.IntN(1<<50), indexed("orderNumber", record.Int(int64(1000+i))))
		}), []string{"monotonic-indexed-property K.orderNumber"}},
		{"indexed random integers", sample(100, func(i int) record.Record {
			return entity("K", 1+r.IntN(1<<50), indexed("score", record.Int(r.Int64N(1e9))))
		}), nil},
		{"time-named string, in key order", inKeyOrder(sample(100, func(i int) record.Record {
			return entity("K", fmt.Sprintf("k%03d", i), indexed("created_at", record.String(fmt.Sprintf("2024-01-%02dT00:00:%02dZ", 1+i/60, i%60))))
		})), []string{"monotonic-indexed-property K.created_at", "sequential-names kind K"}},
		// Random names: in key order (as a query returns them) the times
		// are shuffled, and a string is not a timestamp: no finding.
		{"time-named string, keys random", inKeyOrder(sample(100, func(i int) record.Record {
			return entity("K", fmt.Sprintf("k%06d", r.IntN(1e6)), indexed("created_at", record.String(fmt.Sprintf("2024-01-%02dT00:00:%02dZ", 1+i/60, i%60))))
		})), nil},
		{"time-named float, in order", sample(100, func(i int) record.Record {
			return entity("K", fmt.Sprintf("%c%04d", 'a'+r.IntN(26), r.IntN(10000)), indexed("updated_ts", record.Float(float64(i)*1.5+r.Float64())))
		}), []string{"monotonic-indexed-property K.updated_ts"}},
		{"time-named float, not in order", sample(100, func(i int) record.Record {
			return entity("K", fmt.Sprintf("%c%04d", 'a'+r.IntN(26), r.IntN(10000)), indexed("updated_ts", record.Float(r.Float64())))
		}), nil},
		{"a property indexed in some entities", sample(100, func(i int) record.Record {
			f := unindexed("n", record.Int(int64(i)))
			if i%10 == 0 {
				f.NoIndex = false
			}
			return entity("K", 1+r.IntN(1<<50), f)
		}), []string{"monotonic-indexed-property K.n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := got(Datastore(tt.sample))
			if !slices.Equal(g, tt.want) {
				t.Fatalf("findings %q, want %q", g, tt.want)
			}
		})
	}
}

// inKeyOrder sorts a sample's entities by key, as a query returns them.
func inKeyOrder(s Sample) Sample {
	slices.SortFunc(s.Entities, func(a, b record.Record) int { return rewrite.CompareDatastore(*a.Key, *b.Key) })
	return s
}

func TestDatastoreEvidence(t *testing.T) {
	var s Sample
	s.Kind, s.Fraction = "Customer", 0.5
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 1; i <= 1000; i += 2 { // every other: a 50% sample of 1..1000
		s.Entities = append(s.Entities, entity("Customer", fmt.Sprintf("Customer%d", i),
			indexed("Created", record.Time(t0.Add(time.Duration(i)*time.Minute))), unindexed("Note", record.String("x"))))
	}
	fs := Datastore(s)
	want := map[string]string{
		"sequential-names kind Customer":              "key names: 100% of 500 names are Customer<n>, n from 1 to 999 (a 50% sample of a sequence would fill 50%)",
		"monotonic-indexed-property Customer.Created": "500 of 500 values are timestamps, 2024-01-01T00:01:00Z to 2024-01-01T16:39:00Z: writes of the current time all land at the index's end; indexed in 500 of the 500 sampled entities that have it",
	}
	if len(fs) != len(want) {
		t.Fatalf("findings %q, want %d", got(fs), len(want))
	}
	for _, f := range fs {
		if w := want[f.Rule+" "+f.Subject]; f.Evidence != w {
			t.Errorf("%s %s:\nevidence %q\nwant     %q", f.Rule, f.Subject, f.Evidence, w)
		}
		if f.Severity != rules.Warning {
			t.Errorf("%s: severity %v", f.Rule, f.Severity)
		}
	}
	// Taken as all the data, half of 1..1000 is still dense enough.
	s.Fraction = 0
	if g := got(Datastore(s)); !slices.Contains(g, "sequential-names kind Customer") {
		t.Errorf("fraction unknown: %q", g)
	}
}

func TestDatastoreNonPositiveEvidence(t *testing.T) {
	child := entity("Order", 0)
	child.Key.Path = append([]rewrite.PathElement{{Kind: "Customer", ID: -1}}, child.Key.Path...)
	fs := Datastore(Sample{Kind: "Order", Entities: []record.Record{child}})
	if len(fs) != 1 || !strings.HasPrefix(fs[0].Evidence, "2 key elements of 1 sampled entities have an id ≤ 0") {
		t.Fatalf("findings %+v", fs)
	}
}
