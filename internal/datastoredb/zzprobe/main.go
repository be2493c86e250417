package main

import (
	"context"
	"fmt"
	_ "math"
	"strings"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/rekeyio/rekey/internal/emulator"
	"google.golang.org/api/iterator"
)

func main() {
	ctx := context.Background()
	c, err := emulator.DatastoreClient(ctx, "probe")
	if err != nil {
		panic(err)
	}
	ns := fmt.Sprintf("probe%d", time.Now().UnixNano())
	k := func(kind string, id int64, parent *datastore.Key) *datastore.Key {
		kk := datastore.IDKey(kind, id, parent)
		kk.Namespace = ns
		return kk
	}
	// populate 300
	var keys []*datastore.Key
	var pls []datastore.PropertyList
	for i := 1; i <= 300; i++ {
		keys = append(keys, k("K", int64(i), nil))
		pls = append(pls, datastore.PropertyList{{Name: "v", Value: int64(i)}})
	}
	if _, err := c.PutMulti(ctx, keys, pls); err != nil {
		panic(err)
	}
	a := strings.Repeat("x", 600000)
	_, err = c.Put(ctx, k("B", 3, nil), &datastore.PropertyList{{Name: "x", Value: a, NoIndex: true}, {Name: "y", Value: a, NoIndex: true}})
	fmt.Println("2x600KB:", err)
	_, err = c.Put(ctx, k("B", 4, nil), &datastore.PropertyList{{Name: "x", Value: []interface{}{a, a}, NoIndex: true}})
	fmt.Println("arr 2x600KB:", err)
	var ks []*datastore.Key
	var ps []datastore.PropertyList
	for i := 1; i <= 600; i++ {
		ks = append(ks, k("M", int64(i), nil))
		ps = append(ps, datastore.PropertyList{{Name: "v", Value: int64(i)}})
	}
	_, err = c.PutMulti(ctx, ks, ps)
	fmt.Println("600 in commit:", err)
	ks, ps = nil, nil
	b := strings.Repeat("y", 900000)
	for i := 1; i <= 13; i++ {
		ks = append(ks, k("M2", int64(i), nil))
		ps = append(ps, datastore.PropertyList{{Name: "v", Value: b, NoIndex: true}})
	}
	_, err = c.PutMulti(ctx, ks, ps)
	fmt.Println("11.7MB commit:", err)
	_, err = c.Put(ctx, k("E", 1, nil), &datastore.PropertyList{{Name: "e", Value: &datastore.Entity{Key: k("Inner", 0, nil), Properties: []datastore.Property{{Name: "q", Value: int64(1), NoIndex: true}}}}})
	fmt.Println("embedded:", err)
	var pl2 datastore.PropertyList
	c.Get(ctx, k("E", 1, nil), &pl2)
	fmt.Printf("%#v %#v\n", pl2[0].Value.(*datastore.Entity).Key, pl2[0].Value.(*datastore.Entity).Properties)
	return
	it := c.Run(ctx, datastore.NewQuery("K").Namespace(ns).KeysOnly().Order("__scatter__").Limit(10))
	n := 0
	for {
		_, err := it.Next(nil)
		if err == iterator.Done {
			break
		}
		if err != nil {
			fmt.Println("iter err", err)
			break
		}
		n++
	}
	fmt.Println("iter scatter", n)
}
