// Command plain is bench/cpu's baseline: a plain Go program doing the work
// of one of `rekey run`'s paths with no pipeline around it. It reads the
// records, rewrites each key with rekey's rewrite package (the same
// strategy and parameters as the rekey side's config, so the new keys are
// the same) and writes them:
//
//   - files-files: JSON Lines rows → shard → JSON Lines, one goroutine;
//   - files-spanner: JSON Lines rows → shard → Spanner, Apply of 500 rows
//     at a time (at least once, as upserts), one commit in flight, the
//     reading and rewriting in a goroutine of their own;
//   - files-datastore: JSON Lines entities → hashprefix → Datastore,
//     PutMulti of 500 entities from 8 goroutines sharing one client;
//   - spanner-spanner: one read of the whole source table → shard →
//     Spanner as files-spanner;
//   - datastore-datastore: one query over the source kind → hashprefix →
//     Datastore as files-datastore.
//
// JSON Lines are parsed and written with rekey's record package
// (record.ParseJSON, record.AppendJSON), the format's own reader and
// writer, so both sides parse and encode with the same code. The emulators
// are reached through SPANNER_EMULATOR_HOST and DATASTORE_EMULATOR_HOST.
// The last line on standard output is {"written": N, "allocated_bytes":
// B}, B being the bytes the program allocated on its heap.
//
//	plain -path files-files -in rows.jsonl -out out.jsonl
//	plain -path spanner-spanner -project P -instance I -source-db S -target-db T
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc"

	"github.com/rekeyio/rekey/bench/cpu/internal/workload"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// batchSize is the rows (entities) per commit: rekey's default
// write.batch_rows, and the most entities a Datastore commit may hold.
const batchSize = 500

// options are the command's flags.
type options struct {
	path, in, out      string
	project, instance  string
	sourceDB, targetDB string
	sourceNS, targetNS string
	goroutines         int
	cpuProfile         string
}

func main() {
	var o options
	flag.StringVar(&o.path, "path", "", "files-files, files-spanner, files-datastore, spanner-spanner or datastore-datastore")
	flag.StringVar(&o.in, "in", "", "input JSON Lines file (files-*)")
	flag.StringVar(&o.out, "out", "", "output JSON Lines file (files-files)")
	flag.StringVar(&o.project, "project", "", "Google Cloud project (Spanner and Datastore)")
	flag.StringVar(&o.instance, "instance", "", "Spanner instance")
	flag.StringVar(&o.sourceDB, "source-db", "", "Spanner source database (spanner-spanner)")
	flag.StringVar(&o.targetDB, "target-db", "", "Spanner target database")
	flag.StringVar(&o.sourceNS, "source-ns", "", "Datastore source namespace (datastore-datastore)")
	flag.StringVar(&o.targetNS, "target-ns", "", "Datastore target namespace")
	flag.IntVar(&o.goroutines, "goroutines", 8, "goroutines committing to Datastore")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	n, err := run(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "plain:", err)
		os.Exit(1)
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	json.NewEncoder(os.Stdout).Encode(map[string]uint64{"written": uint64(n), "allocated_bytes": m.TotalAlloc})
}

// run does the path's work and returns the number of records written.
func run(ctx context.Context, o options) (int64, error) {
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return 0, err
		}
		defer pprof.StopCPUProfile()
	}
	switch o.path {
	case "files-files":
		return filesToFiles(o)
	case "files-spanner":
		return filesToSpanner(ctx, o)
	case "files-datastore":
		return filesToDatastore(ctx, o)
	case "spanner-spanner":
		return spannerToSpanner(ctx, o)
	case "datastore-datastore":
		return datastoreToDatastore(ctx, o)
	}
	return 0, fmt.Errorf("-path %q: want files-files, files-spanner, files-datastore, spanner-spanner or datastore-datastore", o.path)
}

// rowRewriter rewrites the keys of the Accounts rows with the shard
// strategy.
type rowRewriter struct {
	sr       *rewrite.SpannerRewriter
	in, out  rewrite.KeySchema
	old, new []rewrite.Value
}

// newRowRewriter builds the shard rewrite of workload.Shard for the
// source key workload.SourceKey.
func newRowRewriter() (*rowRewriter, error) {
	st, err := rewrite.New(workload.Shard)
	if err != nil {
		return nil, err
	}
	in, err := rewrite.ParseKeySchema(workload.Table, workload.SourceKey)
	if err != nil {
		return nil, err
	}
	sr, err := st.Spanner(in)
	if err != nil {
		return nil, err
	}
	return &rowRewriter{sr: sr, in: in, out: sr.Out()}, nil
}

// rewriteRecord sets the new key columns of a row read from a file.
func (rw *rowRewriter) rewriteRecord(rec *record.Record) error {
	rw.old = rw.old[:0]
	for _, c := range rw.in.Columns {
		v, ok := rec.Get(c.Name)
		if !ok {
			return fmt.Errorf("row has no key column %s", c.Name)
		}
		kv, err := record.KeyValue(v, c.Type)
		if err != nil {
			return err
		}
		rw.old = append(rw.old, kv)
	}
	var err error
	if rw.new, err = rw.sr.Rewrite(rw.new[:0], rw.old); err != nil {
		return err
	}
	for i, c := range rw.out.Columns {
		rec.Set(c.Name, record.FromKeyValue(rw.new[i]))
	}
	rec.Table = rw.in.Table
	return nil
}

// eachLine calls f with every record of the JSON Lines file path.
func eachLine(path string, f func(rec *record.Record) error) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	sc := bufio.NewScanner(bufio.NewReaderSize(in, 1<<20))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		rec, err := record.ParseJSON(sc.Bytes())
		if err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if err := f(&rec); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
	return sc.Err()
}

// filesToFiles reads, rewrites and writes in one goroutine.
func filesToFiles(o options) (int64, error) {
	rw, err := newRowRewriter()
	if err != nil {
		return 0, err
	}
	out, err := os.Create(o.out)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(out, 1<<20)
	var n int64
	var buf []byte
	err = eachLine(o.in, func(rec *record.Record) error {
		if err := rw.rewriteRecord(rec); err != nil {
			return err
		}
		buf = append(record.AppendJSON(buf[:0], rec, true), '\n')
		n++
		_, err := w.Write(buf)
		return err
	})
	if err == nil {
		err = w.Flush()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// clientValue is a record value as the Spanner client takes it for a
// column and the Datastore client for a property (the workload's kinds
// of value are the same Go values for both).
func clientValue(v record.Value) (any, error) {
	switch v.Kind {
	case record.KindNull:
		return nil, nil
	case record.KindInt:
		return v.Int, nil
	case record.KindString:
		return v.Str, nil
	case record.KindFloat:
		return v.Float, nil
	case record.KindBool:
		return v.Int != 0, nil
	case record.KindBytes:
		return v.Bytes, nil
	case record.KindTimestamp:
		return v.Time, nil
	}
	return nil, fmt.Errorf("no client value for a %s", v.Kind)
}

// spannerWriter commits batches of mutations with Apply, one commit at a
// time, in a goroutine of its own.
type spannerWriter struct {
	client  *spanner.Client
	batches chan []*spanner.Mutation
	batch   []*spanner.Mutation
	done    chan error
	n       int64
}

// newSpannerWriter starts the goroutine that commits the batches added to
// it with client.
func newSpannerWriter(ctx context.Context, client *spanner.Client) *spannerWriter {
	w := &spannerWriter{client: client, batches: make(chan []*spanner.Mutation, 2), done: make(chan error, 1)}
	go func() {
		var err error
		for ms := range w.batches {
			if err == nil {
				_, err = client.Apply(ctx, ms, spanner.ApplyAtLeastOnce())
			}
		}
		w.done <- err
	}()
	return w
}

// add queues a mutation, sending the batch when it is full.
func (w *spannerWriter) add(m *spanner.Mutation) {
	w.batch = append(w.batch, m)
	w.n++
	if len(w.batch) == batchSize {
		w.batches <- w.batch
		w.batch = make([]*spanner.Mutation, 0, batchSize)
	}
}

// close sends the last batch and waits for every commit.
func (w *spannerWriter) close() (int64, error) {
	if len(w.batch) > 0 {
		w.batches <- w.batch
	}
	close(w.batches)
	return w.n, <-w.done
}

// spannerClient opens a client of database db.
func spannerClient(ctx context.Context, o options, db string) (*spanner.Client, error) {
	return spanner.NewClient(ctx, fmt.Sprintf("projects/%s/instances/%s/databases/%s", o.project, o.instance, db))
}

// filesToSpanner reads and rewrites rows in one goroutine and commits
// them in another.
func filesToSpanner(ctx context.Context, o options) (int64, error) {
	rw, err := newRowRewriter()
	if err != nil {
		return 0, err
	}
	client, err := spannerClient(ctx, o, o.targetDB)
	if err != nil {
		return 0, err
	}
	defer client.Close()
	w := newSpannerWriter(ctx, client)
	var cols []string
	var vals []any
	err = eachLine(o.in, func(rec *record.Record) error {
		if err := rw.rewriteRecord(rec); err != nil {
			return err
		}
		cols, vals = make([]string, len(rec.Fields)), make([]any, len(rec.Fields))
		for i, f := range rec.Fields {
			cols[i] = f.Name
			v, err := clientValue(f.Value)
			if err != nil {
				return fmt.Errorf("column %s: %w", f.Name, err)
			}
			vals[i] = v
		}
		w.add(spanner.InsertOrUpdate(rec.Table, cols, vals))
		return nil
	})
	n, werr := w.close()
	return n, errors.Join(err, werr)
}

// spannerToSpanner reads the source table in one read, rewrites each row
// and commits as filesToSpanner.
func spannerToSpanner(ctx context.Context, o options) (int64, error) {
	rw, err := newRowRewriter()
	if err != nil {
		return 0, err
	}
	src, err := spannerClient(ctx, o, o.sourceDB)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	dst, err := spannerClient(ctx, o, o.targetDB)
	if err != nil {
		return 0, err
	}
	defer dst.Close()
	targetCols := []string{workload.ShardColumn}
	targetCols = append(targetCols, workload.Columns...)
	w := newSpannerWriter(ctx, dst)
	var a workload.Account
	old := make([]rewrite.Value, 2)
	var nk []rewrite.Value
	err = src.Single().Read(ctx, workload.Table, spanner.AllKeys(), workload.Columns).Do(func(row *spanner.Row) error {
		if err := row.Columns(&a.AccountID, &a.Seq, &a.Name, &a.Email, &a.Amount, &a.Note); err != nil {
			return err
		}
		old[0], old[1] = rewrite.String(a.AccountID), rewrite.Int64(a.Seq)
		var err error
		if nk, err = rw.sr.Rewrite(nk[:0], old); err != nil {
			return err
		}
		w.add(spanner.InsertOrUpdate(workload.Table, targetCols, []any{nk[0].Int, nk[1].Str, nk[2].Int, a.Name, a.Email, a.Amount, a.Note}))
		return nil
	})
	n, werr := w.close()
	return n, errors.Join(err, werr)
}

// datastoreKey converts a rewritten key to the client's.
func datastoreKey(k rewrite.DatastoreKey) *datastore.Key {
	var key *datastore.Key
	for _, e := range k.Path {
		key = &datastore.Key{Kind: e.Kind, ID: e.ID, Name: e.Name, Parent: key, Namespace: k.Namespace}
	}
	return key
}

// fromDatastoreKey converts the client's key to rekey's.
func fromDatastoreKey(k *datastore.Key) rewrite.DatastoreKey {
	var path []rewrite.PathElement
	for p := k; p != nil; p = p.Parent {
		path = append(path, rewrite.PathElement{Kind: p.Kind, ID: p.ID, Name: p.Name})
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return rewrite.DatastoreKey{Namespace: k.Namespace, Path: path}
}

// entityBatch is one PutMulti's entities.
type entityBatch struct {
	keys  []*datastore.Key
	props []datastore.PropertyList
}

// datastoreWriter commits batches of entities with PutMulti from several
// goroutines sharing one client.
type datastoreWriter struct {
	batches chan entityBatch
	batch   entityBatch
	wg      sync.WaitGroup
	mu      sync.Mutex
	err     error
	n       int64
}

// newDatastoreWriter starts the goroutines that commit the batches added
// to it with client.
func newDatastoreWriter(ctx context.Context, client *datastore.Client, goroutines int) *datastoreWriter {
	w := &datastoreWriter{batches: make(chan entityBatch, goroutines)}
	for range goroutines {
		w.wg.Go(func() {
			for b := range w.batches {
				if _, err := client.PutMulti(ctx, b.keys, b.props); err != nil {
					w.mu.Lock()
					w.err = errors.Join(w.err, err)
					w.mu.Unlock()
				}
			}
		})
	}
	return w
}

// add queues an entity, sending the batch when it is full.
func (w *datastoreWriter) add(k *datastore.Key, props datastore.PropertyList) {
	w.batch.keys = append(w.batch.keys, k)
	w.batch.props = append(w.batch.props, props)
	w.n++
	if len(w.batch.keys) == batchSize {
		w.batches <- w.batch
		w.batch = entityBatch{keys: make([]*datastore.Key, 0, batchSize), props: make([]datastore.PropertyList, 0, batchSize)}
	}
}

// close sends the last batch and waits for every commit.
func (w *datastoreWriter) close() (int64, error) {
	if len(w.batch.keys) > 0 {
		w.batches <- w.batch
	}
	close(w.batches)
	w.wg.Wait()
	return w.n, w.err
}

// datastoreClient opens a client of the project; the emulator returns a
// whole query result in one message, so the client takes large ones.
func datastoreClient(ctx context.Context, o options) (*datastore.Client, error) {
	return datastore.NewClient(ctx, o.project, option.WithGRPCDialOption(grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20))))
}

// entityRewriter returns the hashprefix rewrite of Datastore keys.
func entityRewriter() (*rewrite.DatastoreRewriter, error) {
	st, err := rewrite.New(workload.HashPrefix)
	if err != nil {
		return nil, err
	}
	return st.Datastore()
}

// filesToDatastore reads and rewrites entities in one goroutine and
// commits them from o.goroutines others.
func filesToDatastore(ctx context.Context, o options) (int64, error) {
	dr, err := entityRewriter()
	if err != nil {
		return 0, err
	}
	client, err := datastoreClient(ctx, o)
	if err != nil {
		return 0, err
	}
	defer client.Close()
	w := newDatastoreWriter(ctx, client, o.goroutines)
	err = eachLine(o.in, func(rec *record.Record) error {
		if rec.Key == nil {
			return errors.New("entity has no key")
		}
		nk, err := dr.Rewrite(*rec.Key)
		if err != nil {
			return err
		}
		nk.Namespace = o.targetNS
		props := make(datastore.PropertyList, len(rec.Fields))
		for i, f := range rec.Fields {
			v, err := clientValue(f.Value)
			if err != nil {
				return fmt.Errorf("property %s: %w", f.Name, err)
			}
			props[i] = datastore.Property{Name: f.Name, Value: v, NoIndex: f.NoIndex}
		}
		w.add(datastoreKey(nk), props)
		return nil
	})
	n, werr := w.close()
	return n, errors.Join(err, werr)
}

// datastoreToDatastore reads the source kind with one query, rewrites
// each key and commits as filesToDatastore.
func datastoreToDatastore(ctx context.Context, o options) (int64, error) {
	dr, err := entityRewriter()
	if err != nil {
		return 0, err
	}
	client, err := datastoreClient(ctx, o)
	if err != nil {
		return 0, err
	}
	defer client.Close()
	w := newDatastoreWriter(ctx, client, o.goroutines)
	it := client.Run(ctx, datastore.NewQuery(workload.Kind).Namespace(o.sourceNS))
	for {
		var props datastore.PropertyList
		k, err := it.Next(&props)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			n, werr := w.close()
			return n, errors.Join(err, werr)
		}
		nk, err := dr.Rewrite(fromDatastoreKey(k))
		if err != nil {
			n, werr := w.close()
			return n, errors.Join(err, werr)
		}
		nk.Namespace = o.targetNS
		w.add(datastoreKey(nk), props)
	}
	return w.close()
}
