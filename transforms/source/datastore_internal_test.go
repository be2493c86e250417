package source

import (
	"context"
	"strings"
	"testing"

	"cloud.google.com/go/datastore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

func TestDatastoreRangeEncoding(t *testing.T) {
	start := rewrite.DatastoreKey{Namespace: "ns", Path: []rewrite.PathElement{{Kind: "P", Name: "a/b"}, {Kind: "K", ID: 1<<63 - 1}}}
	end := rewrite.DatastoreKey{Namespace: "ns", Path: []rewrite.PathElement{{Kind: "K", Name: "z"}}}
	for _, r := range []datastoredb.KeyRange{{}, {Start: &start}, {End: &end}, {Start: &start, End: &end}} {
		enc, err := encodeDatastoreRange(r)
		if err != nil {
			t.Fatal(err)
		}
		s, e, err := decodeDatastoreRange(enc)
		if err != nil {
			t.Fatal(err)
		}
		if (s == nil) != (r.Start == nil) || (e == nil) != (r.End == nil) {
			t.Fatalf("range %s decoded with start %v end %v", r, s, e)
		}
		if s != nil && !datastoredb.KeyFromDatastore(s).Equal(*r.Start) {
			t.Errorf("start %v, want %s", s, r.Start)
		}
		if e != nil && !datastoredb.KeyFromDatastore(e).Equal(*r.End) {
			t.Errorf("end %v, want %s", e, r.End)
		}
	}
	if _, _, err := decodeDatastoreRange("{"); err == nil {
		t.Error("a bad range decodes")
	}
}

// TestDatastoreReadShrinksPages: a page of entities larger than the
// client's receive limit is read again in smaller pages instead of
// failing (the emulator answers a whole page in one response).
func TestDatastoreReadShrinksPages(t *testing.T) {
	emulator.RequireDatastore(t)
	ctx := context.Background()
	ns := emulator.UniqueNamespace(t.Name())
	small := option.WithGRPCDialOption(grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1 << 20)))
	c, err := datastoredb.Client(ctx, emulator.DatastoreProject(), "", small)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var keys []*datastore.Key
	var pls []datastore.PropertyList
	for i := int64(1); i <= 10; i++ {
		keys = append(keys, &datastore.Key{Kind: "Big", ID: i, Namespace: ns})
		pls = append(pls, datastore.PropertyList{{Name: "s", Value: strings.Repeat("x", 300_000), NoIndex: true}})
	}
	for i := 0; i < len(keys); i += 3 {
		j := min(i+3, len(keys))
		if _, err := c.PutMulti(ctx, keys[i:j], pls[i:j]); err != nil {
			t.Fatal(err)
		}
	}
	// The precondition: one page of all ten is over the receive limit.
	var all []datastore.PropertyList
	if _, err := c.GetAll(ctx, datastore.NewQuery("Big").Namespace(ns), &all); !tooLargeResponse(err) {
		t.Fatalf("reading 3 MB at once with a 1 MiB limit: err = %v, want a too-large response", err)
	}
	f := &datastoreReadFn{Cfg: DatastoreConfig{Namespace: ns, Kind: "Big"}, client: c}
	var got []record.Record
	var dead []string
	err = f.read(ctx, nil, nil, func(b record.Batch) {
		recs := b.Recs
		got = append(got, recs...)
	}, func(s string) { dead = append(dead, s) })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 || len(dead) != 0 {
		t.Fatalf("read %d entities and %d dead letters, want 10 and 0", len(got), len(dead))
	}
	for i, r := range got {
		if r.Key.Leaf().ID != int64(i+1) {
			t.Errorf("entity %d is %s, want id %d (once each, in key order)", i, r.Key, i+1)
		}
	}
}
