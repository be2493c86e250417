package datastoredb_test

import (
	"fmt"
	"time"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

func ExampleToEntity() {
	key := rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Org", Name: "acme"}, {Kind: "User", ID: 42}}}
	rec := record.Record{Key: &key, Fields: []record.Field{
		{Name: "name", Value: record.String("Ann")},
		{Name: "seen", Value: record.Time(time.Date(2024, 1, 31, 12, 0, 0, 123456789, time.UTC))},
		{Name: "born", Value: record.Value{Kind: record.KindDate, Int: 7000}},
		{Name: "notes", Value: record.String("private"), NoIndex: true},
	}}
	k, props, err := datastoredb.ToEntity(&rec)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(k)
	for _, p := range props {
		fmt.Printf("%s %T %v noindex=%v\n", p.Name, p.Value, p.Value, p.NoIndex)
	}

	rec.Fields = append(rec.Fields, record.Field{Name: "a.b", Value: record.Int(1)})
	_, _, err = datastoredb.ToEntity(&rec)
	fmt.Println(err)
	// Output:
	// /Org,acme/User,42
	// name string Ann noindex=false
	// seen time.Time 2024-01-31 12:00:00.123456 +0000 UTC noindex=false
	// born string 1989-03-02 noindex=false
	// notes string private noindex=true
	// entity Org:"acme"/User:42: property "a.b": name contains "."
}

func ExampleSplitPoints() {
	var sample []rewrite.DatastoreKey
	for _, id := range []int64{900, 3, 70000, 12, 5, 1 << 40, 41, 8} {
		sample = append(sample, rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "K", ID: id}}})
	}
	sample = append(sample, rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "K", Name: "10"}}})
	for _, r := range datastoredb.Ranges(datastoredb.SplitPoints(sample, 3)) {
		fmt.Println(r)
	}
	// Output:
	// [first, K:12)
	// [K:12, K:70000)
	// [K:70000, last]
}
