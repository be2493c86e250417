package datastoredb

import (
	"reflect"
	"testing"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/rewrite"
)

func TestKeyConversions(t *testing.T) {
	nsKey := func(k *datastore.Key, ns string) *datastore.Key {
		for p := k; p != nil; p = p.Parent {
			p.Namespace = ns
		}
		return k
	}
	tests := []struct {
		name string
		rk   rewrite.DatastoreKey
		dk   *datastore.Key
	}{
		{
			name: "root id",
			rk:   rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "User", ID: 42}}},
			dk:   datastore.IDKey("User", 42, nil),
		},
		{
			name: "root name",
			rk:   rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "User", Name: "ann"}}},
			dk:   datastore.NameKey("User", "ann", nil),
		},
		{
			name: "ancestors in a namespace",
			rk: rewrite.DatastoreKey{Namespace: "tenant-1", Path: []rewrite.PathElement{
				{Kind: "Org", Name: "acme"}, {Kind: "User", ID: 7}, {Kind: "Doc", Name: "d/1"},
			}},
			dk: nsKey(datastore.NameKey("Doc", "d/1", datastore.IDKey("User", 7, datastore.NameKey("Org", "acme", nil))), "tenant-1"),
		},
		{
			name: "incomplete leaf",
			rk:   rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Org", ID: 1}, {Kind: "User"}}},
			dk:   datastore.IncompleteKey("User", datastore.IDKey("Org", 1, nil)),
		},
		{
			name: "big id",
			rk:   rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "K", ID: 1<<63 - 1}}},
			dk:   datastore.IDKey("K", 1<<63-1, nil),
		},
		{name: "empty", rk: rewrite.DatastoreKey{}, dk: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := KeyToDatastore(tt.rk)
			if !reflect.DeepEqual(got, tt.dk) {
				t.Errorf("KeyToDatastore(%s) = %v, want %v", tt.rk, got, tt.dk)
			}
			back := KeyFromDatastore(tt.dk)
			if !reflect.DeepEqual(back, tt.rk) && !(len(back.Path) == 0 && len(tt.rk.Path) == 0) {
				t.Errorf("KeyFromDatastore(%v) = %#v, want %#v", tt.dk, back, tt.rk)
			}
		})
	}
}

func TestKeyToDatastoreIgnoresDatabase(t *testing.T) {
	k := rewrite.DatastoreKey{Database: "other", Path: []rewrite.PathElement{{Kind: "K", ID: 1}}}
	if got := KeyToDatastore(k); !got.Equal(datastore.IDKey("K", 1, nil)) {
		t.Errorf("KeyToDatastore = %v, want /K,1", got)
	}
	if got := KeyFromDatastore(datastore.IDKey("K", 1, nil)); got.Database != "" {
		t.Errorf("KeyFromDatastore database = %q, want empty", got.Database)
	}
}

func TestCheckKeyValue(t *testing.T) {
	good := rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "A", Name: "x/y"}, {Kind: "B", ID: 3}}}
	if err := checkKeyValue(&good); err != nil {
		t.Errorf("checkKeyValue(%s) = %v, want nil (a reference may have a / in a name)", good, err)
	}
	for _, k := range []rewrite.DatastoreKey{
		{},
		{Path: []rewrite.PathElement{{ID: 1}}},
		{Path: []rewrite.PathElement{{Kind: "A", ID: 1, Name: "n"}}},
		{Path: []rewrite.PathElement{{Kind: "A"}}},
		{Path: []rewrite.PathElement{{Kind: "A", ID: -1}}},
	} {
		if err := checkKeyValue(&k); err == nil {
			t.Errorf("checkKeyValue(%#v) = nil, want an error", k)
		}
	}
}
