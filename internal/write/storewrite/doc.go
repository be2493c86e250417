// Package storewrite is what rekey's store writers (spannerdb.Writer,
// datastoredb.Writer) share about a commit that fails: one table that
// classifies the store's errors (Classify), the retry of transient ones
// under the shared policy and adaptive throttle (Retry), the isolation of
// refused records by committing halves (Halves), and the Outcome a writer
// returns: what it wrote, dead-lettered, waited and split, as plain values
// for the caller to report (a Beam sink on its bundle's goroutine, or an
// application writing directly). Nothing here imports Beam or a store
// client.
//
// # Error classes
//
// The table (the gRPC code of the error, wrapped or not):
//
//	code                                        class
//	InvalidArgument, FailedPrecondition,        Content: the records' fault; isolate
//	AlreadyExists, OutOfRange
//	NotFound                                    Content (a missing parent row), unless the
//	                                            message names a missing database, table,
//	                                            instance, session or project: Fatal
//	ResourceExhausted "exceeds maximum size",   Content: the request is too large; halves fit
//	"larger than max"
//	ResourceExhausted (other), Unavailable,     Transient: retry with backoff, then return
//	DeadlineExceeded, Aborted, Internal, Unknown (the codes internal/write/retry
//	                                            retries: one list for every retry)
//	PermissionDenied, Unauthenticated           NoAccess: dead-letter the commit's records
//	anything else (Canceled, ...)               Fatal: return, so the caller fails and
//	                                            retries the whole write
//
// Before the code: a caller's context that is done, or context.Canceled, is
// Fatal; context.DeadlineExceeded (an attempt's deadline, not the caller's)
// is Transient; an error without a gRPC status is Fatal (the clients give
// every server answer a status; per-record refusals of a client, such as
// datastore.MultiError, are the writer's to sort out before classifying).
//
// # Isolation
//
// A commit refused for its content is cut in halves, and halves of those,
// so the good records land and each refused record, alone, becomes a dead
// letter carrying the store's error. Every record of a batch is therefore
// either written once, dead-lettered once, or (a Transient or Fatal error)
// left to the caller's retry of the whole write, which is safe because
// upserts rewrite the same values and inserts recognise their own earlier
// writes (a writer's Settle).
package storewrite
