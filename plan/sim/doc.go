// Package sim estimates how a bulk load behaves on a range-partitioned
// store (Cloud Spanner, Firestore/Datastore): how long it takes, how the
// writes spread over the servers, and where the hotspots are. It is the
// load simulation of `rekey plan`: the same model is fed the old keys in
// their natural order and the rewritten keys in rekey's write order, and
// the two results are compared.
//
// # The store
//
// The key space is cut into splits: contiguous, non-overlapping key ranges
// [start, next start) in the store's key order (bytes.Compare of the
// order-preserving key encoding). The first split starts at the lowest
// key, the last runs to the end of the key space. Each split lives on one
// of Params.Nodes servers. A server takes at most Params.NodeWrites writes
// per second in all; one split takes at most Params.SplitWrites per second,
// however idle its server is (a split is served by one replica leader, so
// its throughput is bounded by one leader's work).
//
// An empty table is one split (Params.InitialSplits > 1 cuts the 64-bit
// key prefix space into that many equal ranges instead, as for a table
// already split over uniformly spread keys); Params.PreSplits gives split
// points explicitly, as `gcloud spanner databases splits add` does. The
// initial splits are placed on the nodes round-robin.
//
// Splits divide in two ways:
//
//   - By size: when the data written into a split passes Params.SplitBytes,
//     it is cut at the key that halves its bytes, and the pieces again
//     while one is still over.
//   - By load: when the writes offered to a split (those it took plus those
//     that waited on it), as a moving average with a time constant of a
//     fifth of Params.LoadSplitDelay, stay at or above Params.LoadThreshold
//     writes/s for LoadSplitDelay, it is cut at the median key of a
//     uniform sample of the writes offered to it meanwhile. Each half
//     starts with half the average and must be hot for another delay
//     before it splits again, so a uniformly loaded range doubles its
//     splits about once per delay.
//
// A split never cuts between equal keys (one row, with its interleaved
// children, cannot be split), so a single hot key stays one hot split.
// The lower half of a cut keeps its server; the upper half becomes a new
// split on the least-loaded server (the one offered the fewest writes in
// the step, ties to the one with fewer splits, then the lower number).
// Splits are never merged and never moved otherwise.
//
// Under sequential keys every write goes to the end of the key space: the
// last split takes them all at SplitWrites, a load split cuts it, and the
// new last split (on another server) is the next hotspot. That is why load
// splitting does not help monotonic keys, and why the model shows it.
//
// # The loader
//
// The loader issues the writes in the order given, at most Params.Ramp(t)
// writes/s (nil: as fast as the store takes them; unused allowance is not
// saved up). A write whose split or server has no capacity left in the
// current step waits and is retried first in the next step; the loader
// keeps issuing later writes past waiting ones until Params.Concurrency
// writes wait, and then stops for the step. That is head-of-line
// blocking: one hot split holds back the whole stream once enough writes
// queue on it, however idle the other splits are.
//
// # Samples
//
// The writes may be a sample: with Params.Scale = N/n (n sampled keys of a
// table of N rows) each sampled write stands for Scale real writes of its
// size to its key's neighbourhood. Capacities, thresholds and the results
// are in real writes; a sampled write may be taken in parts over several
// steps. Params.Concurrency counts sampled writes: a sample cannot resolve
// a finer look-ahead than one sampled write.
//
// Time advances in steps of Params.Step; each step the capacities are
// renewed. The run stops when every write is done or at
// Params.MaxDuration (Result.Finished is then false).
//
// # Figures: published and assumed
//
// Published (cloud.google.com/spanner/docs/performance): a Spanner node
// takes about 3,500 writes/s in a regional instance and 2,700 in a dual-
// or multi-region one; load-based splitting improves throughput "every
// few minutes". Published for Firestore/Datastore (the 500/50/5 rule,
// cloud.google.com/firestore/docs/best-practices): start a new collection
// at 500 ops/s and increase by 50% every 5 minutes; an indexed,
// monotonically increasing field caps writes at about 500/s.
//
// From the source documents, not confirmed by Google's pages: a split is
// cut by size at about 8 GB.
//
// Assumptions, unpublished, every one a parameter: one split takes 2,000
// writes/s (Spanner) or 500 (Firestore, the cap of a monotonic key); a
// split is cut by load after 5 minutes (Firestore: 4, to keep ahead of its
// ramp) at half its capacity; Firestore is
// modelled as 20 servers of 1,000 writes/s; rows are 1 KiB; the loader
// looks ahead 64 writes.
//
// # Measures
//
// Result.BusiestNodeShare is the busiest server's share of the writes at
// each moment: in each time bucket of Result.Series, the writes of the
// server that took the most over all the bucket's writes, averaged over
// the buckets weighted by their writes (1/Nodes is even, 1 is every
// bucket on one server). Result.HotspotScore is the same against an even
// share, Nodes × BusiestNodeShare: the write-weighted mean of busiest/mean
// per bucket, 1 even, Nodes all on one. Result.BusiestNodeOfRun is the
// busiest server's share of all the run's writes instead: a hotspot that
// moves from server to server (sequential keys with load splits) has a
// BusiestNodeOfRun near 1/Nodes but a BusiestNodeShare near 1, which is
// why the report shows the latter. Buckets with few sampled writes read
// slightly above even for an even load (the busiest of a few random
// draws).
// Result.TimeToFullSpeed is the end of the first step whose achieved rate
// reached 90% of min(offered rate, Nodes × NodeWrites).
package sim
