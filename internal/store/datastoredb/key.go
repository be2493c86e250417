package datastoredb

import (
	"errors"
	"fmt"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/rewrite"
)

// KeyToDatastore converts a rekey key to a client key: one *datastore.Key
// per path element, each with the key's namespace, chained through Parent.
// An element with neither id nor name becomes an incomplete key; nothing
// is checked (ToEntity validates first). The database is not part of a
// client key (the client chooses it) and is ignored. An empty path gives
// nil.
func KeyToDatastore(k rewrite.DatastoreKey) *datastore.Key {
	var parent *datastore.Key
	for _, e := range k.Path {
		parent = &datastore.Key{Kind: e.Kind, ID: e.ID, Name: e.Name, Parent: parent, Namespace: k.Namespace}
	}
	return parent
}

// KeyFromDatastore converts a client key to a rekey key: the path from the
// root ancestor to the key itself, the namespace of the key (Datastore
// requires ancestors to share it). Database stays empty. A nil key gives
// the zero DatastoreKey.
func KeyFromDatastore(k *datastore.Key) rewrite.DatastoreKey {
	if k == nil {
		return rewrite.DatastoreKey{}
	}
	n := 0
	for p := k; p != nil; p = p.Parent {
		n++
	}
	out := rewrite.DatastoreKey{Namespace: k.Namespace, Path: make([]rewrite.PathElement, n)}
	for p := k; p != nil; p = p.Parent {
		n--
		out.Path[n] = rewrite.PathElement{Kind: p.Kind, ID: p.ID, Name: p.Name}
	}
	return out
}

// checkKeyValue checks a key used as a property value: the well-formedness
// Datastore needs (every element has a kind and exactly one of a positive
// id and a name), not rekey's stricter rules for entity keys.
func checkKeyValue(k *rewrite.DatastoreKey) error {
	if k == nil || len(k.Path) == 0 {
		return errors.New("key value with an empty path")
	}
	for i, e := range k.Path {
		switch {
		case e.Kind == "":
			return fmt.Errorf("key value %s: element %d has no kind", k, i+1)
		case e.IsName() && e.ID != 0:
			return fmt.Errorf("key value %s: element %d has both an id and a name", k, i+1)
		case !e.IsName() && e.ID <= 0:
			return fmt.Errorf("key value %s: element %d is incomplete (a key value must name a stored entity)", k, i+1)
		}
	}
	return nil
}
