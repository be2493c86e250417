// Package datastoredb connects rekey's neutral records to Datastore
// (Firestore in Datastore mode) through cloud.google.com/go/datastore:
// explicit conversions of keys and entities in both directions, a client
// constructor, the key-range split computation readers use, and the
// batching writer sinks use. It also converts records to and from the
// Datastore API's own Entity in its JSON form, the files Google's Dataflow
// templates write and read (ParseEntityJSON, AppendEntityJSON; the rules
// are in entityjson.go). Nothing here imports Beam.
//
// # Entities and records
//
// An entity is record.Record{Table: kind, Key: key, Fields: properties}.
// ToEntity and FromEntity convert, property by property:
//
//	record kind       Datastore value (Go client type)
//	null              null (nil)
//	int               integer (int64)
//	float             double (float64; -0 and infinities kept bit for bit,
//	                  every NaN stored as the canonical quiet NaN)
//	string            string (string, valid UTF-8)
//	bool              boolean (bool)
//	bytes             blob ([]byte)
//	timestamp         timestamp (time.Time, UTC, microseconds: see below)
//	key               key (*datastore.Key)
//	geopoint          geo point (datastore.GeoPoint)
//	array             array ([]interface{}; no array inside an array)
//	entity            embedded entity (*datastore.Entity)
//
// Kinds only Spanner has become strings, because Datastore has no type for
// them and a string keeps the value exactly; they read back as strings:
//
//	date     "YYYY-MM-DD"
//	numeric  the canonical decimal text, e.g. "1.50"
//	json     the JSON text
//
// Rules and limits, each with a test:
//   - Property names must pass rewrite.ValidatePropertyName: a "." is
//     refused (Datastore reads a dotted name as a path into an embedded
//     entity in queries and projections), so are empty, reserved (__x__)
//     and over-long names. Both directions check, so every record rekey
//     produces can be written.
//   - Entity keys must pass rewrite.ValidateDatastoreKey (no "/" in kinds
//     or names, ids > 0, ...). Key-valued properties only need to be
//     well-formed (kinds set, not both id and name, complete): they are
//     references to other data and are carried as they are.
//   - Timestamps: Datastore stores microseconds. The Go client would send
//     nanoseconds and the server (the Firestore emulator included) drops
//     the last three digits; ToEntity truncates to the microsecond itself,
//     so what is written does not depend on the backend. Times outside
//     0001-01-01..9999-12-31 are refused.
//   - NoIndex is kept. Exceptions, forced by what Datastore can store: a
//     string or bytes value over 1500 bytes cannot be indexed, so ToEntity
//     marks it NoIndex instead of refusing the entity; an array stores the
//     flag on its elements, so an empty array always reads back indexed and
//     ToEntity writes it so; the properties of a NoIndex embedded entity are
//     all excluded, and ToEntity marks them so. FromEntity(ToEntity(r)) is
//     therefore r in a normal form, which is exactly what reads back.
//   - Datastore keeps no property order: FromEntity sorts properties by
//     name (an embedded entity's key first), so a read is deterministic.
//   - An embedded entity may carry a key (often incomplete). The record
//     model has no key slot in a value, so the key travels as a field named
//     "__key__" of kind key inside the embedded entity's fields, and
//     ToEntity turns it back into the embedded entity's key.
//   - record.Record.Table is not used by ToEntity: the key's leaf kind is
//     the kind. A rewrite may change the kind, and a Spanner row's Table is
//     its table name; FromEntity sets Table to the kind.
//   - datastore.Key has no database (the client chooses it), so
//     KeyToDatastore ignores DatastoreKey.Database and KeyFromDatastore
//     leaves it empty.
//
// # Limits of the service and the emulator (measured)
//
// The Firestore emulator in Datastore mode (1.19.9) refuses an entity over
// 1 MiB ("maximum entity size is 1048576 bytes", InvalidArgument), a single
// value over 1,048,487 bytes, an array inside an array, and two mutations
// of the same key in one non-transactional commit (InvalidArgument, like
// the service). Unlike the service it accepts more than 500 mutations in a
// commit, accepts "." in property names and "/" in key names (rekey refuses
// both itself), but it receives at most 4 MiB in one request
// (ResourceExhausted "gRPC message exceeds maximum size 4194304") where the
// service accepts 10 MiB; the Writer splits a commit the server finds too
// large. It answers a query ordered by __scatter__ with no results and no
// error, and has no statistics entities (__Stat_Kind__).
package datastoredb
