package rekeyer_test

import (
	"encoding/json"
	"fmt"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
	"github.com/rekeyio/rekey/rewrite"
)

// A Spec is plain data: the pipeline ships it to its workers as JSON, and
// an application's dual-write path builds the same Rekeyer from the same
// text, so both compute the same new key for a record.
func ExampleSpec() {
	text := `{"strategy": {"strategy": "bitreverse"}, "source_store": "spanner", "target_store": "spanner",
		"table": "Customers", "key": "CustomerId INT64", "children": {"Orders": "CustomerId INT64, OrderId INT64"}}`
	var spec rekeyer.Spec
	if err := json.Unmarshal([]byte(text), &spec); err != nil {
		panic(err)
	}
	rk, err := spec.Build()
	if err != nil {
		panic(err)
	}
	customer := record.Record{Table: "Customers", Fields: []record.Field{
		{Name: "CustomerId", Value: record.Int(1)}, {Name: "Name", Value: record.String("Ann")}}}
	order := record.Record{Table: "Orders", Fields: []record.Field{
		{Name: "CustomerId", Value: record.Int(1)}, {Name: "OrderId", Value: record.Int(7)}}}
	for _, r := range []*record.Record{&customer, &order} {
		if err := rk.Rewrite(r); err != nil {
			panic(err)
		}
		id, _ := r.Get("CustomerId")
		fmt.Println(r.Table, id)
	}
	// Output:
	// Customers 4611686018427387904
	// Orders 4611686018427387904
}

// A Datastore entity keeps its properties; its key (and, with
// elements: all, its descendants' path elements) is rewritten.
func ExampleNew() {
	st, err := rewrite.New(rewrite.StepConfig{Strategy: "hashprefix"})
	if err != nil {
		panic(err)
	}
	rk, err := rekeyer.New(rekeyer.Options{Strategy: st, SourceStore: record.Datastore, TargetStore: record.Datastore, Kind: "Customer"})
	if err != nil {
		panic(err)
	}
	rec := record.Record{Table: "Customer",
		Key:    &rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Customer", Name: "Customer1"}}},
		Fields: []record.Field{{Name: "Name", Value: record.String("Ann")}}}
	if err := rk.Rewrite(&rec); err != nil {
		panic(err)
	}
	fmt.Println(rec.Key, len(rec.Fields))
	// Output:
	// Customer:"becf-Customer1" 1
}
