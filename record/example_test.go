package record_test

import (
	"fmt"
	"time"

	"github.com/rekeyio/rekey/record"
)

// A Spanner row is a Record with a Table and its columns; a JSON Lines
// line parses into the same model.
func ExampleParseJSON() {
	rec, err := record.ParseJSON([]byte(`{"__table__":"UserAccessLogs","UserId":"u1","LastAccess":"2024-01-31T12:00:00Z"}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Table, len(rec.Fields))
	v, _ := rec.Get("UserId")
	fmt.Println(v)
	// Output:
	// UserAccessLogs 2
	// "u1"
}

// Diff is the one comparison of records by content: field order does not
// matter, timestamps compare by instant, JSON as JSON values.
func ExampleDiff() {
	at := time.Date(2024, 1, 31, 12, 0, 0, 0, time.UTC)
	old := &record.Record{Table: "Logs", Fields: []record.Field{
		{Name: "UserId", Value: record.String("u1")},
		{Name: "LastAccess", Value: record.Time(at)},
	}}
	copied := &record.Record{Table: "Logs", Fields: []record.Field{
		{Name: "LastAccess", Value: record.Time(at.In(time.FixedZone("CET", 3600)))},
		{Name: "UserId", Value: record.String("u1")},
	}}
	fmt.Printf("%q\n", record.Diff(copied, old))
	copied.Set("UserId", record.String("u2"))
	fmt.Println(record.Diff(copied, old))
	// Output:
	// ""
	// UserId = "u2" (string), want "u1" (string)
}
