package rewrite_test

import (
	"fmt"
	"time"

	"github.com/rekeyio/rekey/rewrite"
)

func ExampleHashPrefix() {
	s, _ := rewrite.New(rewrite.StepConfig{Strategy: "hashprefix", Params: rewrite.Params{"n": 4}})
	ds, _ := s.Datastore()
	k := rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Customer", Name: "Customer1"}, {Kind: "Order", ID: 7}}}
	out, _ := ds.Rewrite(k)
	back, _ := ds.Invert(out)
	fmt.Println(out)
	fmt.Println(back)
	// Output:
	// Customer:"becf-Customer1"/Order:"8f14-7"
	// Customer:"Customer1"/Order:7
}

func ExampleShard() {
	s, _ := rewrite.New(rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 10, "columns": "UserId", "mode": "abs"}})
	schema, _ := rewrite.ParseKeySchema("UserAccessLogs", "LastAccess TIMESTAMP, UserId STRING(36)")
	r, _ := s.Spanner(schema)
	out, _ := r.Rewrite(nil, []rewrite.Value{rewrite.Timestamp(time.Date(2024, 1, 31, 12, 0, 0, 0, time.UTC)), rewrite.String("u1")})
	fmt.Println(r.Out())
	fmt.Println(rewrite.FormatKey(out, false))
	fmt.Println(r.Explain()[1])
	// Output:
	// PRIMARY KEY (ShardId, LastAccess, UserId)
	// [9,"2024-01-31T12:00:00Z","u1"]
	// DDL: ShardId INT64 NOT NULL AS (ABS(MOD(FARM_FINGERPRINT(UserId), 10))) STORED
}

func ExampleReverseBits() {
	for _, id := range []int64{1, 2, 3} {
		fmt.Println(rewrite.ReverseBits(id, true))
	}
	// Output:
	// 4611686018427387904
	// 2305843009213693952
	// 6917529027641081856
}

func ExampleUUID() {
	s, _ := rewrite.New(rewrite.StepConfig{Strategy: "uuid", Params: rewrite.Params{"namespace": "6ba7b811-9dad-11d1-80b4-00c04fd430c8"}})
	schema, _ := rewrite.ParseKeySchema("Pages", "Url STRING(MAX)")
	r, _ := s.Spanner(schema)
	out, _ := r.Rewrite(nil, []rewrite.Value{rewrite.String("https://www.example.com/")})
	fmt.Println(r.Out(), out[0].Str)
	// Output: PRIMARY KEY (Id) 3d3ed9d2-aa3d-5fa6-90e8-ed662e90f559
}

func ExampleSwap() {
	s, _ := rewrite.New(rewrite.StepConfig{Strategy: "swap", Params: rewrite.Params{"order": "UserId"}})
	schema, _ := rewrite.ParseKeySchema("UserAccessLogs", "LastAccess TIMESTAMP, UserId STRING(36)")
	r, _ := s.Spanner(schema)
	fmt.Println(r.In(), "->", r.Out())
	// Output: PRIMARY KEY (LastAccess, UserId) -> PRIMARY KEY (UserId, LastAccess)
}

func ExampleReverse() {
	s, _ := rewrite.New(rewrite.StepConfig{Strategy: "reverse"})
	ds, _ := s.Datastore()
	for _, e := range []rewrite.PathElement{{Kind: "User", Name: "user1001"}, {Kind: "User", ID: 120}, {Kind: "User", Name: "120"}} {
		out, _ := ds.Rewrite(rewrite.DatastoreKey{Path: []rewrite.PathElement{e}})
		fmt.Println(out)
	}
	// Output:
	// User:"1001resu"
	// User:"021"
	// User:"'021"
}

func ExampleBucket() {
	s, _ := rewrite.New(rewrite.StepConfig{Strategy: "bucket", Params: rewrite.Params{"n": 16, "unit": "s"}})
	schema, _ := rewrite.ParseKeySchema("Events", "At TIMESTAMP, Id INT64")
	r, _ := s.Spanner(schema)
	out, _ := r.Rewrite(nil, []rewrite.Value{rewrite.Timestamp(time.Unix(1700000003, 0)), rewrite.Int64(1)})
	fmt.Println(out[0].Int, r.Explain()[0])
	// Output: 3 Bucket = MOD(MOD(UNIX_SECONDS(`At`), 16) + 16, 16)
}

func ExampleGeneration() {
	s, _ := rewrite.New(rewrite.StepConfig{Strategy: "generation", Params: rewrite.Params{"g": 3}})
	ds, _ := s.Datastore()
	out, _ := ds.Rewrite(rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Event", ID: 42}}})
	fmt.Println(out)
	// Output: Generation:3/Event:42
}

func ExampleChain() {
	s, _ := rewrite.New(rewrite.StepConfig{Strategy: "chain", Steps: []rewrite.StepConfig{
		{Strategy: "hashprefix"},
		{Strategy: "generation", Params: rewrite.Params{"g": 3, "as": "prefix"}},
	}})
	ds, _ := s.Datastore()
	out, _ := ds.Rewrite(rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Customer", Name: "Customer1"}}})
	fmt.Println(out, s.Info().Invertible)
	// Output: Customer:"3-becf-Customer1" true
}
