// Package batchcoder registers record.Batch with Beam: the type, and its
// coder, which writes a batch as record.EncodeBatch does and reads it with
// record.DecodeBatch (the bytes batches were when they were []byte
// elements).
//
// The registration is done here, not in package record, so that record
// and what imports it without running pipelines (the cutover library, the
// store drivers, bench/cpu's plain program) do not link Beam. Every
// package whose transforms take or emit record.Batch imports this one
// (package transforms does, and so every source, sink and stage), so a
// binary that builds such a pipeline has the coder, and so does the same
// binary started as a worker in another process: Beam sends the coder to
// a worker as the names of its functions, which the worker resolves in its
// own registry.
package batchcoder

import (
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/record"
)

func init() {
	beam.RegisterCoder(reflect.TypeFor[record.Batch](), encode, decode)
	register.Function1x1(encode)
	register.Function1x2(decode)
	register.Emitter1[record.Batch]()
	register.Iter1[record.Batch]()
}

func encode(b record.Batch) []byte { return b.Encode() }

func decode(b []byte) (record.Batch, error) { return record.DecodeToBatch(b) }
