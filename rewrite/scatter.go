package rewrite

// Scatters reports whether st, applied to keys of the schema in (Spanner;
// datastore false) or to Datastore keys (datastore true), scatters them:
// the leading part of every new key is a hash or a bit reversal of the old
// key, with at least 4,096 distinct values, so records that are neighbours
// in the old key order (the order exports usually come in) land all over
// the new key space, and any run of them is already a sample of the whole
// of it. A writer can then plan each run of records where it is, without a
// global shuffle, and still spread its writes (transforms/writeplan's Local).
//
// The answer is conservative: false for every strategy that keeps some of
// the old order in front (none, swap, shard, bucket, generation, reverse),
// for a hash or bit reversal of a key column that is not the first (the
// first column then still orders the new keys), for one that leaves a
// Datastore key's root element as it is (elements: leaf), for a hash
// prefix of fewer than 3 hex digits, and for chains.
func Scatters(st Strategy, in KeySchema, datastore bool) bool {
	leading := func(column string, sc scope) bool {
		if datastore {
			return sc != "leaf"
		}
		return len(in.Columns) > 0 && (column == "" || in.Index(column) == 0)
	}
	switch s := st.(type) {
	case *HashPrefix:
		return s.N >= 3 && leading(s.Column, s.scope)
	case *BitReverse:
		return leading(s.Column, s.scope)
	case *UUID:
		// The UUID replaces the key, or leads it (keep).
		return datastore && s.scope != "leaf" || !datastore && len(in.Columns) > 0
	}
	return false
}
