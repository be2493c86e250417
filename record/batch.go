package record

// Batch is the element that carries records between pipeline stages: many
// records in one element, so Beam's per-element cost is paid once per
// batch.
//
// It is a Go value, not bytes. Beam hands an element from one DoFn to the
// next of the same fused stage as it is, with no coder, so a source, the
// rewrite, the write planning and a sink that the runner fuses into one
// bundle share their batches without encoding or decoding them. A coder is
// used only where the runner materializes the PCollection (a GroupByKey or
// Reshuffle, a stage boundary, the data channel to a worker in another
// process); Batch's coder (registered with Beam by package
// transforms/batchcoder, which every package with transforms over batches
// imports) writes EncodeBatch's bytes and reads them back with DecodeBatch,
// the format batches had when they were []byte elements.
//
// Batch is a struct rather than a named []Record so that Beam never takes
// it for a slice of rows it could infer a coder for: its only coder is the
// registered one.
//
// Rules for the DoFns that take and emit batches:
//
//   - An input batch is read-only. A PCollection may have several consumers
//     (a sink and a dry-run counter, a sample, a verification branch), and in
//     a fused stage they all receive the same value: the same Recs, the same
//     Fields arrays, the same Key pointers. A DoFn that changes records
//     builds its output in slices of its own: the rewrite copies each
//     record's fields into a new array (with room for the fields it
//     appends, see Rekeyer.Adds) before it sets or appends any, and never
//     writes through a key it did not make; a DoFn that reorders records
//     sorts its own slice of them (writeorder's items), never Recs.
//   - An emitted batch belongs to its consumers: the producer does not
//     reuse or change Recs, or the records in it, after emit returns (a
//     consumer may keep it beyond the call, as the Datastore sink's
//     commits in flight do). Sources start a new slice for each batch.
//   - Records in emitted batches may share Fields arrays, strings and keys
//     with the input batch they came from, under the first rule.
//   - The one exception to the first rule is a DoFn the graph's builder
//     makes the only consumer of its input (transforms.RewriteOwning): it
//     may change the input's records in place, and append to a record's
//     Fields within their capacity. So no record's Fields may reach, within
//     their capacity, the fields of another record: where records are
//     carved from one array, their Fields are three-index slices.
type Batch struct {
	Recs []Record
}

// Len is the number of records in the batch.
func (b Batch) Len() int { return len(b.Recs) }

// Encode is EncodeBatch of the batch's records: the bytes of its Beam
// coder.
func (b Batch) Encode() []byte { return EncodeBatch(b.Recs) }

// DecodeToBatch is DecodeBatch into a Batch: the decoder of its Beam coder.
func DecodeToBatch(b []byte) (Batch, error) {
	recs, err := DecodeBatch(b)
	return Batch{Recs: recs}, err
}
