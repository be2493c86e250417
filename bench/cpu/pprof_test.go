package main

import "testing"

func TestOwner(t *testing.T) {
	const (
		r    = "github.com/rekeyio/rekey/"
		beam = "github.com/apache/beam/sdks/v2/go/pkg/beam/"
	)
	for _, c := range []struct {
		stack []string // innermost first
		want  string   // the category's name's start
	}{
		{[]string{"runtime.mallocgc", r + "record.(*parser).str", r + "record.ParseJSONCap.func1", r + "record.(*parser).object", r + "record.ParseJSONCap", r + "transforms/source.readJSONL", beam + "core/runtime/exec.(*ParDo).ProcessElement"}, "JSON Lines parse"},
		{[]string{r + "record.(*Record).Index", r + "rekeyer.(*Rekeyer).rewriteRow", r + "transforms.(*rewriteFn).ProcessElement"}, "key rewrite"},
		{[]string{r + "record.appendFields", r + "record.AppendRecord", r + "record.EncodeBatch", beam + "core/runtime/exec.(*DataSink).ProcessElement"}, "record batches"},
		{[]string{r + "transforms/writeplan.(*buffer).addRecords", r + "transforms.(*rewriteFn).ProcessElement", r + "rekeyer.(*Rekeyer).RewriteIn"}, "write planning"},
		// A sink's commit under the write planning's emit, under a Spanner
		// source's row iterator: the client's, its protobuf too.
		{[]string{"google.golang.org/protobuf/internal/impl.(*MessageInfo).marshalAppendPointer", "google.golang.org/grpc.(*clientStream).SendMsg", "cloud.google.com/go/spanner.(*Client).Apply", r + "transforms/sink.(*spannerFn).commit", r + "transforms/writeplan.(*buffer).flush", "cloud.google.com/go/spanner.(*RowIterator).Do"}, "Spanner and Datastore clients"},
		{[]string{r + "internal/store/spannerdb.decodeValue", r + "transforms/source.convertRows.func2", "cloud.google.com/go/spanner.(*RowIterator).Do"}, "other rekey code"},
		{[]string{"syscall.Syscall6", "internal/poll.(*FD).Write", "os.(*File).Write", "bufio.(*Writer).Flush", r + "transforms/sink.(*filesFn).FinishBundle"}, "file reads and writes"},
		// The runner ↔ worker connection: gRPC under the SDK's harness.
		{[]string{"syscall.Syscall6", "golang.org/x/net/http2.(*Framer).WriteData", "google.golang.org/grpc/internal/transport.(*loopyWriter).run", beam + "core/runtime/harness.(*control).handleInstruction"}, "gRPC and protobuf"},
		{[]string{"runtime.selectgo", beam + "runners/prism/internal.(*stage).Execute"}, "prism runner"},
		{[]string{"runtime.scanObject", "runtime.gcDrain", "runtime.gcBgMarkWorker"}, "garbage collector"},
		{[]string{"runtime.futex", "runtime.findRunnable", "runtime.schedule"}, "Go runtime"},
		{[]string{"reflect.Value.Call"}, "other"},
	} {
		i := owner(c.stack)
		got := "other"
		if i < len(categories) {
			got = categories[i].name
		}
		if len(got) < len(c.want) || got[:len(c.want)] != c.want {
			t.Errorf("owner(%q) = %q, want %q…", c.stack[0], got, c.want)
		}
	}
}
