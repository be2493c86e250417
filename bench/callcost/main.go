// Command callcost measures the cutover library's per-call cost against
// the same calls on the plain client, in one run on the emulators: a put,
// a get and a delete of one record, -n times each, first on the plain
// client of old (the application without rekey), then through the
// library with the record's cohort in each phase (old, dual_write,
// shadow, read_new, new_only, done), old and new in two databases (or
// one, -same). It reports each call's median and 90th percentile and the
// ratio of the medians to the plain client's.
//
//	go run ./bench/callcost [-store spanner|datastore] [-n 300] [-same]
//
// It uses the emulators named by SPANNER_EMULATOR_HOST and
// DATASTORE_EMULATOR_HOST (scripts/test.sh starts them; so does `rekey
// emulators up`).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

const (
	logsDDL   = `CREATE TABLE Logs (UserId STRING(36) NOT NULL, Seq INT64 NOT NULL, Page STRING(MAX)) PRIMARY KEY (UserId, Seq)`
	logsV2DDL = `CREATE TABLE LogsV2 (ShardId INT64 NOT NULL, UserId STRING(36) NOT NULL, Seq INT64 NOT NULL, Page STRING(MAX)) PRIMARY KEY (ShardId, UserId, Seq)`
	ttl       = time.Second
	skew      = 400 * time.Millisecond
)

// lib is the library, for either store.
type lib interface {
	Write(ctx context.Context, rec record.Record) error
	Delete(ctx context.Context, key record.Record) error
	Read(ctx context.Context, key record.Record) (record.Record, bool, error)
	Phases() *phases.Map
	Close()
}

// setup is one store's migration: the plain calls, the library, the
// phase store and how records look.
type setup struct {
	plainPut, plainDel func(ctx context.Context, user string) error
	plainGet           func(ctx context.Context, user string) error
	lib                lib
	store              phases.Store
	migration          string
	rec, key           func(user, page string) record.Record
}

func main() {
	store := flag.String("store", "spanner", "spanner or datastore")
	n := flag.Int("n", 300, "calls of each kind per measurement")
	same := flag.Bool("same", false, "old and new in one database")
	flag.Parse()
	ctx := context.Background()
	var s *setup
	var err error
	if *store == "spanner" {
		s, err = spannerSetup(ctx, *same)
	} else {
		s, err = datastoreSetup(ctx, *same)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "callcost:", err)
		os.Exit(1)
	}
	defer s.lib.Close()
	fmt.Printf("callcost: %s, old and new in one database: %v, %d calls of each kind\n\n", *store, *same, *n)
	fmt.Printf("%-12s %-7s %10s %10s %8s\n", "route", "call", "median", "p90", "× plain")
	type key struct{ route, call string }
	plain := map[string]time.Duration{}
	measure := func(route string, put, get, del func(ctx context.Context, user string) error) error {
		var ds [3][]time.Duration
		for i := range *n {
			user := fmt.Sprintf("cc-%s-%d", route, i)
			for j, f := range []func(context.Context, string) error{put, get, del} {
				start := time.Now()
				if err := f(ctx, user); err != nil {
					return fmt.Errorf("%s: %w", route, err)
				}
				ds[j] = append(ds[j], time.Since(start))
			}
		}
		for j, call := range []string{"put", "get", "delete"} {
			slices.Sort(ds[j])
			med, p90 := ds[j][len(ds[j])/2], ds[j][len(ds[j])*9/10]
			ratio := "1.00"
			if route == "plain" {
				plain[call] = med
			} else {
				ratio = fmt.Sprintf("%.2f", float64(med)/float64(plain[call]))
			}
			fmt.Printf("%-12s %-7s %10s %10s %8s\n", route, call, med.Round(time.Microsecond), p90.Round(time.Microsecond), ratio)
		}
		return nil
	}
	if err := measure("plain", s.plainPut, s.plainGet, s.plainDel); err != nil {
		fmt.Fprintln(os.Stderr, "callcost:", err)
		os.Exit(1)
	}
	// Every user of the run is in one cohort's range: all cohorts move
	// together.
	all := []cohort.Range{{First: 0, Last: cohort.DefaultBuckets - 1}}
	for _, p := range []phases.Phase{phases.Old, phases.DualWrite, phases.Shadow, phases.ReadNew, phases.NewOnly, phases.Done} {
		if p != phases.Old {
			if _, _, err := s.store.Move(ctx, phases.Move{Migration: s.migration, Cohorts: all, To: p, Force: true, Who: "callcost"}); err != nil {
				fmt.Fprintln(os.Stderr, "callcost:", err)
				os.Exit(1)
			}
			for s.lib.Phases().Phase(0) != p {
				time.Sleep(10 * time.Millisecond)
			}
			// Past the warm-up and any switch of authority.
			time.Sleep(ttl + skew + 100*time.Millisecond)
		}
		err := measure(string(p),
			func(ctx context.Context, u string) error { return s.lib.Write(ctx, s.rec(u, "/home/"+u)) },
			func(ctx context.Context, u string) error { _, _, err := s.lib.Read(ctx, s.key(u, "")); return err },
			func(ctx context.Context, u string) error { return s.lib.Delete(ctx, s.key(u, "")) })
		if err != nil {
			fmt.Fprintln(os.Stderr, "callcost:", err)
			os.Exit(1)
		}
	}
}

func config(yaml string) (string, error) {
	dir, err := os.MkdirTemp("", "callcost")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "rekey.yaml")
	return path, os.WriteFile(path, []byte(yaml), 0o644)
}

func spannerSetup(ctx context.Context, same bool) (*setup, error) {
	project, instance := emulator.SpannerProject(), emulator.SpannerInstance()
	stamp := time.Now().UnixNano() % 1e9
	oldDB, newDB := fmt.Sprintf("cc-old-%d", stamp), fmt.Sprintf("cc-new-%d", stamp)
	target := append([]string{logsV2DDL}, phases.SpannerDDL...)
	if same {
		newDB = oldDB
		if _, err := emulator.NewSpannerDatabase(ctx, project, instance, oldDB, append([]string{logsDDL}, target...)); err != nil {
			return nil, err
		}
	} else {
		if _, err := emulator.NewSpannerDatabase(ctx, project, instance, oldDB, []string{logsDDL}); err != nil {
			return nil, err
		}
		if _, err := emulator.NewSpannerDatabase(ctx, project, instance, newDB, target); err != nil {
			return nil, err
		}
	}
	path, err := config(fmt.Sprintf(`
source: {type: spanner, project: %[1]s, instance: %[2]s, database: %[3]s, table: Logs}
target: {type: spanner, project: %[1]s, instance: %[2]s, database: %[4]s, table: LogsV2}
rewrite: {strategy: shard, params: {n: 8, mode: abs}}
cohort: {user: UserId, cache_ttl: %[5]s, skew: %[6]s}
`, project, instance, oldDB, newDB, ttl, skew))
	if err != nil {
		return nil, err
	}
	oldC, err := spanner.NewClient(ctx, fmt.Sprintf("projects/%s/instances/%s/databases/%s", project, instance, oldDB))
	if err != nil {
		return nil, err
	}
	mig := fmt.Sprintf("cc-%d", stamp)
	l, err := cutover.OpenSpanner(ctx, oldC, path, cutover.Options{Migration: mig})
	if err != nil {
		return nil, err
	}
	newC := oldC
	if !same {
		if newC, err = spanner.NewClient(ctx, fmt.Sprintf("projects/%s/instances/%s/databases/%s", project, instance, newDB)); err != nil {
			return nil, err
		}
	}
	cols := []string{"UserId", "Seq", "Page"}
	return &setup{
		plainPut: func(ctx context.Context, u string) error {
			_, err := oldC.Apply(ctx, []*spanner.Mutation{spanner.InsertOrUpdate("Logs", cols, []any{u, int64(1), "/home/" + u})})
			return err
		},
		plainGet: func(ctx context.Context, u string) error {
			_, err := oldC.Single().ReadRow(ctx, "Logs", spanner.Key{u, int64(1)}, cols)
			return err
		},
		plainDel: func(ctx context.Context, u string) error {
			_, err := oldC.Apply(ctx, []*spanner.Mutation{spanner.Delete("Logs", spanner.Key{u, int64(1)})})
			return err
		},
		lib: l, store: phases.SpannerStore{Client: newC}, migration: mig,
		rec: func(u, page string) record.Record {
			r := record.Record{Table: "Logs", Fields: []record.Field{{Name: "UserId", Value: record.String(u)}, {Name: "Seq", Value: record.Int(1)}}}
			if page != "" {
				r.Fields = append(r.Fields, record.Field{Name: "Page", Value: record.String(page)})
			}
			return r
		},
		key: func(u, _ string) record.Record {
			return record.Record{Table: "Logs", Fields: []record.Field{{Name: "UserId", Value: record.String(u)}, {Name: "Seq", Value: record.Int(1)}}}
		},
	}, nil
}

func datastoreSetup(ctx context.Context, same bool) (*setup, error) {
	project := emulator.DatastoreProject()
	stamp := time.Now().UnixNano() % 1e9
	oldNS, newNS := fmt.Sprintf("cc-old-%d", stamp), fmt.Sprintf("cc-new-%d", stamp)
	newDB := "rekey-callcost-new"
	if same {
		newDB = ""
	}
	path, err := config(fmt.Sprintf(`
source: {type: datastore, project: %[1]s, namespace: %[2]s, kind: Log}
target: {type: datastore, project: %[1]s, database: %[3]q, namespace: %[4]s, kind: Log}
rewrite: {strategy: hashprefix}
cohort: {user: User, cache_ttl: %[5]s, skew: %[6]s}
`, project, oldNS, newDB, newNS, ttl, skew))
	if err != nil {
		return nil, err
	}
	oldC, err := datastoredb.Client(ctx, project, "")
	if err != nil {
		return nil, err
	}
	newC := oldC
	if !same {
		if newC, err = datastoredb.Client(ctx, project, newDB); err != nil {
			return nil, err
		}
	}
	mig := fmt.Sprintf("cc-%d", stamp)
	l, err := cutover.OpenDatastore(ctx, oldC, path, cutover.Options{Migration: mig})
	if err != nil {
		return nil, err
	}
	dsKey := func(u string) *datastore.Key {
		k := datastore.NameKey("Log", u+".1", nil)
		k.Namespace = oldNS
		return k
	}
	type entity struct{ User, Page string }
	key := func(u, page string) record.Record {
		k := rewrite.DatastoreKey{Namespace: oldNS, Path: []rewrite.PathElement{{Kind: "Log", Name: u + ".1"}}}
		r := record.Record{Table: "Log", Key: &k, Fields: []record.Field{{Name: "User", Value: record.String(u)}}}
		if page != "" {
			r.Fields = append(r.Fields, record.Field{Name: "Page", Value: record.String(page)})
		}
		return r
	}
	return &setup{
		plainPut: func(ctx context.Context, u string) error {
			_, err := oldC.Put(ctx, dsKey(u), &entity{u, "/home/" + u})
			return err
		},
		plainGet: func(ctx context.Context, u string) error {
			var e entity
			return oldC.Get(ctx, dsKey(u), &e)
		},
		plainDel: func(ctx context.Context, u string) error { return oldC.Delete(ctx, dsKey(u)) },
		lib:      l, store: phases.DatastoreStore{Client: newC, Namespace: newNS}, migration: mig,
		rec: key, key: func(u, _ string) record.Record { return key(u, "") },
	}, nil
}
