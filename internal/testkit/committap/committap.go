// Package committap measures write order from outside the writer: a gRPC
// proxy in front of an emulator that forwards every call unchanged and
// records, in arrival order, the keys of every Spanner and Datastore
// Commit.
//
//	tap, err := committap.Start(os.Getenv("SPANNER_EMULATOR_HOST"), tableKey)
//	t.Setenv("SPANNER_EMULATOR_HOST", tap.Addr()) // clients created from now on go through the tap
//	... run the writer ...
//	fig := committap.Measure(committap.Keys(tap.Commits(), "Events"), hotspot.Options{})
//
// The proxy knows no services: every method is forwarded as raw bytes
// (grpc.UnknownServiceHandler and a pass-through codec), streams in both
// directions, with metadata, headers, trailers, deadlines and status
// codes. Only the requests of google.spanner.v1.Spanner/Commit and
// google.datastore.v1.Datastore/Commit are decoded, to record their
// mutations' keys, and, while HoldReads is in force, those of the data
// reads it holds.
package committap

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/datastore/apiv1/datastorepb"
	"cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/rekeyio/rekey/rewrite"
)

// The methods whose requests the tap decodes.
const (
	SpannerCommit   = "/google.spanner.v1.Spanner/Commit"
	DatastoreCommit = "/google.datastore.v1.Datastore/Commit"
	// The data reads HoldReads may hold.
	SpannerExecuteStreamingSQL = "/google.spanner.v1.Spanner/ExecuteStreamingSql"
	SpannerStreamingRead       = "/google.spanner.v1.Spanner/StreamingRead"
	DatastoreRunQuery          = "/google.datastore.v1.Datastore/RunQuery"
	// DatastoreLookup is the Datastore read by key that OnRead hooks.
	DatastoreLookup = "/google.datastore.v1.Datastore/Lookup"
)

// maxMessage is the largest message the proxy passes in either direction
// (the Datastore emulator answers a whole query in one message).
const maxMessage = 256 << 20

// Mutation is one written row or entity of a commit.
type Mutation struct {
	// Table is the Spanner table, or the kind of the entity.
	Table string
	// Key is the order-preserving encoding of the key
	// (rewrite.AppendSpannerKey or AppendDatastoreKey); nil when the tap
	// cannot decode it (a Spanner table it was not given the key of).
	Key []byte
	// Text is the key in rekey's notation (rewrite.FormatKey or
	// DatastoreKey.String), for messages.
	Text string
}

// Commit is one Commit call.
type Commit struct {
	// Seq numbers commits in the order their requests arrived, from 0.
	Seq int
	// Store is "spanner" or "datastore".
	Store     string
	Mutations []Mutation
	// Done is set when the call has ended; Err is its error (nil: the
	// commit succeeded).
	Done bool
	Err  error
	At   time.Time
	// Fault is the failure the tap injected into this commit, if any.
	Fault *Fault
}

// Fault is a failure the tap injects into a Commit.
type Fault struct {
	// Code is the status the client receives.
	Code codes.Code
	// Lost forwards the commit and lets the backend apply it, then
	// answers Code instead of the backend's response: "applied, but the
	// response was lost". Otherwise the commit never reaches the backend.
	Lost bool
}

func (f Fault) String() string {
	if f.Lost {
		return "applied-then-" + f.Code.String()
	}
	return f.Code.String()
}

// Faults chooses the commits that fail: each Commit call, retries
// included, fails with probability Rate, with a Kind drawn uniformly.
type Faults struct {
	Rate  float64
	Kinds []Fault
	// Seed seeds the choice, so a run's faults can be replayed.
	Seed uint64
	// Tables, if set, limits the faults to commits that write one of
	// these Spanner tables or Datastore kinds (case-insensitively): the
	// data writes of one side, not the bookkeeping next to them.
	Tables []string
}

// Tap is a running proxy.
type Tap struct {
	lis     net.Listener
	srv     *grpc.Server
	conn    *grpc.ClientConn
	backend string
	keys    map[string]rewrite.KeySchema // Spanner key schemas by lower-case table name

	mu      sync.Mutex
	commits []*Commit
	calls   map[string]int
	faults  Faults
	hold    time.Time // HoldReads
	held    int
	onRead  map[string]func() // OnRead, by lower-case table name
	inRead  atomic.Bool       // an OnRead function runs
	rnd     *rand.Rand
	wg      sync.WaitGroup
}

// SetFaults starts injecting faults into the commits that arrive from now
// on; a zero Faults stops.
func (t *Tap) SetFaults(f Faults) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.faults = f
	t.rnd = rand.New(rand.NewPCG(f.Seed, 0x6661756c74))
}

// HoldReads holds every data read that arrives before until, until then:
// a source that takes that long to read, so a pipeline's read phase lasts
// at least until until. Data reads are Spanner queries and reads of a
// partition (a partition token set: a batch source's reads, not a
// schema's or a single row's) and Datastore queries of kinds whose names
// do not start with "Rekey" (rekey's own bookkeeping). A zero time stops.
func (t *Tap) HoldReads(until time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hold = until
}

// OnRead calls fn before forwarding each Spanner read by key
// (StreamingRead, not of a partition) of table, or each Datastore lookup
// of a key of kind table, then forwards the read: something that happens
// between a reader's request and the read, such as an application's write
// landing between a verify's reads of old and new. Reads that arrive
// while an fn runs (fn's own) pass unchanged. A nil fn stops.
func (t *Tap) OnRead(table string, fn func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.onRead == nil {
		t.onRead = map[string]func(){}
	}
	if fn == nil {
		delete(t.onRead, strings.ToLower(table))
		return
	}
	t.onRead[strings.ToLower(table)] = fn
}

// readHook runs the OnRead function of a read request, if any.
func (t *Tap) readHook(method string, req []byte) {
	var tables []string
	switch method {
	case SpannerStreamingRead:
		var r spannerpb.ReadRequest
		if proto.Unmarshal(req, &r) != nil || len(r.GetPartitionToken()) > 0 {
			return
		}
		tables = []string{r.GetTable()}
	case DatastoreLookup:
		var r datastorepb.LookupRequest
		if proto.Unmarshal(req, &r) != nil {
			return
		}
		for _, k := range r.GetKeys() {
			if path := k.GetPath(); len(path) > 0 {
				tables = append(tables, path[len(path)-1].GetKind())
			}
		}
	default:
		return
	}
	var fn func()
	t.mu.Lock()
	for _, table := range tables {
		if f := t.onRead[strings.ToLower(table)]; f != nil && fn == nil {
			fn = f
		}
	}
	t.mu.Unlock()
	if fn == nil || !t.inRead.CompareAndSwap(false, true) {
		return
	}
	defer t.inRead.Store(false)
	fn()
}

// Held returns how many reads HoldReads held.
func (t *Tap) Held() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held
}

// holdRead reports until when the read of method with request req is held
// (zero: it is not).
func (t *Tap) holdRead(method string, req []byte) time.Time {
	t.mu.Lock()
	until := t.hold
	t.mu.Unlock()
	if until.IsZero() || !time.Now().Before(until) {
		return time.Time{}
	}
	data := false
	switch method {
	case SpannerExecuteStreamingSQL:
		var r spannerpb.ExecuteSqlRequest
		data = proto.Unmarshal(req, &r) == nil && len(r.GetPartitionToken()) > 0
	case SpannerStreamingRead:
		var r spannerpb.ReadRequest
		data = proto.Unmarshal(req, &r) == nil && len(r.GetPartitionToken()) > 0
	case DatastoreRunQuery:
		var r datastorepb.RunQueryRequest
		if proto.Unmarshal(req, &r) == nil {
			data = true
			for _, k := range r.GetQuery().GetKind() {
				if strings.HasPrefix(k.GetName(), "Rekey") {
					data = false
				}
			}
		}
	}
	if !data {
		return time.Time{}
	}
	t.mu.Lock()
	t.held++
	t.mu.Unlock()
	return until
}

// fault draws the fault of a commit of ms (t.mu held).
func (t *Tap) fault(ms []Mutation) *Fault {
	f := t.faults
	if f.Rate <= 0 || len(f.Kinds) == 0 {
		return nil
	}
	if len(f.Tables) > 0 {
		hit := false
		for _, m := range ms {
			for _, name := range f.Tables {
				hit = hit || strings.EqualFold(m.Table, name)
			}
		}
		if !hit {
			return nil
		}
	}
	if t.rnd.Float64() >= f.Rate {
		return nil
	}
	k := f.Kinds[t.rnd.IntN(len(f.Kinds))]
	return &k
}

// Start listens on a free loopback port and forwards every call to
// backend (host:port of an emulator, plaintext). spannerKeys are the key
// schemas of the Spanner tables whose commits should be decoded (the
// schema's Table names the table); Datastore keys need none.
func Start(backend string, spannerKeys ...rewrite.KeySchema) (*Tap, error) {
	if backend == "" {
		return nil, errors.New("committap: no backend address")
	}
	conn, err := grpc.NewClient(backend,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)))
	if err != nil {
		return nil, fmt.Errorf("committap: backend %s: %w", backend, err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("committap: listen: %w", err)
	}
	t := &Tap{lis: lis, conn: conn, backend: backend, keys: map[string]rewrite.KeySchema{}, calls: map[string]int{}}
	for _, ks := range spannerKeys {
		t.keys[strings.ToLower(ks.Table)] = ks
	}
	t.srv = grpc.NewServer(
		// The clients' keepalive pings (the Spanner and Datastore
		// clients ping idle connections every minute or less) are
		// welcome: grpc-go's default policy answers pings more often
		// than every 5 minutes with GOAWAY "too_many_pings", which
		// drops the connection under the test's feet.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
		grpc.ForceServerCodec(rawCodec{}),
		grpc.UnknownServiceHandler(t.forward),
		grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage))
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		_ = t.srv.Serve(lis)
	}()
	return t, nil
}

// Addr is the host:port clients should use instead of the backend's.
func (t *Tap) Addr() string { return t.lis.Addr().String() }

// Backend is the address calls are forwarded to.
func (t *Tap) Backend() string { return t.backend }

// Close stops the proxy (cutting calls in flight) and its backend
// connection.
func (t *Tap) Close() {
	t.srv.Stop()
	t.wg.Wait()
	t.conn.Close()
}

// Commits returns the commits recorded so far, in arrival order (copies).
func (t *Tap) Commits() []Commit {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Commit, len(t.commits))
	for i, c := range t.commits {
		out[i] = *c
	}
	return out
}

// Calls returns how many calls of each method were forwarded.
func (t *Tap) Calls() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int, len(t.calls))
	for k, v := range t.calls {
		out[k] = v
	}
	return out
}

// Reset forgets the commits and calls recorded so far.
func (t *Tap) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.commits, t.calls = nil, map[string]int{}
}

// frame is a message as raw bytes.
type frame struct{ b []byte }

// rawCodec passes messages through as bytes. Its name is "proto" so that
// the backend sees the content type it expects.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("committap: cannot marshal %T", v)
	}
	return f.b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("committap: cannot unmarshal into %T", v)
	}
	f.b = append(f.b[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

// outgoing copies incoming metadata minus what the transport sets itself.
func outgoing(md metadata.MD) metadata.MD {
	out := metadata.MD{}
	for k, v := range md {
		switch {
		case strings.HasPrefix(k, ":"), strings.HasPrefix(k, "grpc-"),
			k == "content-type", k == "user-agent", k == "te":
			continue
		}
		out[k] = v
	}
	return out
}

// forward proxies one call of any method to the backend.
func (t *Tap) forward(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return errors.New("committap: no method")
	}
	t.mu.Lock()
	t.calls[method]++
	t.mu.Unlock()
	var commit atomic.Pointer[Commit]
	var first *frame
	switch method {
	case SpannerExecuteStreamingSQL, SpannerStreamingRead, DatastoreRunQuery, DatastoreLookup:
		// Server-streaming calls (and Datastore's lookup, unary): one
		// request, which decides whether the call is held or hooked.
		first = &frame{}
		if err := ss.RecvMsg(first); err != nil {
			return err
		}
		t.readHook(method, first.b)
		if until := t.holdRead(method, first.b); !until.IsZero() {
			select {
			case <-time.After(time.Until(until)):
			case <-ss.Context().Done():
				return ss.Context().Err()
			}
		}
	case SpannerCommit, DatastoreCommit:
		// A unary call: its request decides what the tap records and
		// whether it fails.
		first = &frame{}
		if err := ss.RecvMsg(first); err != nil {
			return err
		}
		if c := t.observe(method, first.b); c != nil {
			commit.Store(c)
			if c.Fault != nil && !c.Fault.Lost {
				err := status.Errorf(c.Fault.Code, "committap: injected %s before the commit reached the backend", c.Fault)
				t.finish(c, err)
				return err
			}
		}
	}
	md, _ := metadata.FromIncomingContext(ss.Context())
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ss.Context(), outgoing(md)))
	defer cancel()
	cs, err := t.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	lost := false
	if c := commit.Load(); c != nil && c.Fault != nil {
		lost = c.Fault.Lost
	}

	// Client to backend.
	upErr := make(chan error, 1)
	go func() {
		if first != nil {
			if err := cs.SendMsg(first); err != nil {
				upErr <- nil // the backend's status comes from RecvMsg
				return
			}
		}
		for {
			f := &frame{}
			if err := ss.RecvMsg(f); err != nil {
				if errors.Is(err, io.EOF) {
					upErr <- cs.CloseSend()
					return
				}
				cancel()
				upErr <- err
				return
			}
			if commit.Load() == nil {
				if c := t.observe(method, f.b); c != nil {
					commit.Store(c)
				}
			}
			if err := cs.SendMsg(f); err != nil {
				// The backend ended the call; its status comes from RecvMsg.
				upErr <- nil
				return
			}
		}
	}()

	// Backend to client.
	headerSent := false
	sendHeader := func() {
		if !headerSent {
			if h, err := cs.Header(); err == nil {
				_ = ss.SendHeader(h)
			}
			headerSent = true
		}
	}
	var callErr error
	for {
		f := &frame{}
		if err := cs.RecvMsg(f); err != nil {
			if !errors.Is(err, io.EOF) {
				callErr = err
			}
			break
		}
		if lost {
			continue // the backend's answer is dropped
		}
		sendHeader()
		if err := ss.SendMsg(f); err != nil {
			callErr = err
			break
		}
	}
	if lost {
		<-upErr
		if callErr == nil {
			c := commit.Load()
			callErr = status.Errorf(c.Fault.Code, "committap: injected %s: the backend applied the commit, its response was dropped", c.Fault)
		} // else the backend refused the commit: that is the answer
		// The client gets only the status.
	} else {
		sendHeader()
		ss.SetTrailer(cs.Trailer())
		if callErr == nil {
			// The backend answered in full; the client has closed its
			// side (or its error ends the call).
			callErr = <-upErr
		}
	}
	if c := commit.Load(); c != nil {
		t.finish(c, callErr)
	}
	return callErr
}

// finish records the end of a commit.
func (t *Tap) finish(c *Commit, err error) {
	t.mu.Lock()
	c.Done, c.Err = true, err
	t.mu.Unlock()
}

// observe records a Commit request; other methods are ignored.
func (t *Tap) observe(method string, req []byte) *Commit {
	var c *Commit
	switch method {
	case SpannerCommit:
		var r spannerpb.CommitRequest
		if proto.Unmarshal(req, &r) != nil {
			return nil
		}
		c = &Commit{Store: "spanner", Mutations: t.spannerMutations(r.GetMutations())}
	case DatastoreCommit:
		var r datastorepb.CommitRequest
		if proto.Unmarshal(req, &r) != nil {
			return nil
		}
		c = &Commit{Store: "datastore", Mutations: datastoreMutations(r.GetMutations())}
	default:
		return nil
	}
	c.At = time.Now()
	t.mu.Lock()
	c.Fault = t.fault(c.Mutations)
	c.Seq = len(t.commits)
	t.commits = append(t.commits, c)
	t.mu.Unlock()
	return c
}

func (t *Tap) spannerMutations(ms []*spannerpb.Mutation) []Mutation {
	var out []Mutation
	for _, m := range ms {
		w := m.GetInsert()
		for _, alt := range []*spannerpb.Mutation_Write{m.GetUpdate(), m.GetInsertOrUpdate(), m.GetReplace()} {
			if w == nil {
				w = alt
			}
		}
		if w != nil {
			ks, known := t.keys[strings.ToLower(w.GetTable())]
			idx := make([]int, len(ks.Columns))
			for i, c := range ks.Columns {
				idx[i] = -1
				for j, name := range w.GetColumns() {
					if strings.EqualFold(name, c.Name) {
						idx[i] = j
					}
				}
			}
			for _, row := range w.GetValues() {
				mu := Mutation{Table: w.GetTable()}
				if known {
					mu.Key, mu.Text = spannerKey(ks, idx, row.GetValues())
				}
				out = append(out, mu)
			}
			continue
		}
		if d := m.GetDelete(); d != nil {
			ks, known := t.keys[strings.ToLower(d.GetTable())]
			for _, k := range d.GetKeySet().GetKeys() {
				mu := Mutation{Table: d.GetTable()}
				if known {
					idx := make([]int, len(k.GetValues()))
					for i := range idx {
						idx[i] = i
					}
					mu.Key, mu.Text = spannerKey(ks, idx, k.GetValues())
				}
				out = append(out, mu)
			}
		}
	}
	return out
}

// spannerKey encodes the key columns of a row: idx[i] is the position of
// key column i among vals. It returns nil if a value does not decode.
func spannerKey(ks rewrite.KeySchema, idx []int, vals []*structpb.Value) ([]byte, string) {
	key := make([]rewrite.Value, len(ks.Columns))
	for i, c := range ks.Columns {
		if i >= len(idx) || idx[i] < 0 || idx[i] >= len(vals) {
			return nil, ""
		}
		v, err := spannerValue(vals[idx[i]], c.Type)
		if err != nil {
			return nil, ""
		}
		key[i] = v
	}
	return rewrite.AppendSpannerKey(nil, ks, key), rewrite.FormatKey(key, len(key) == 1)
}

// spannerValue decodes a value as Spanner's wire format carries a column of
// type t.
func spannerValue(v *structpb.Value, t rewrite.Type) (rewrite.Value, error) {
	if _, null := v.GetKind().(*structpb.Value_NullValue); null {
		return rewrite.Null(t), nil
	}
	s := v.GetStringValue()
	switch t {
	case rewrite.TypeInt64:
		n, err := strconv.ParseInt(s, 10, 64)
		return rewrite.Int64(n), err
	case rewrite.TypeBool:
		return rewrite.Bool(v.GetBoolValue()), nil
	case rewrite.TypeFloat64:
		if _, ok := v.GetKind().(*structpb.Value_NumberValue); ok {
			return rewrite.Float64(v.GetNumberValue()), nil
		}
		switch s {
		case "NaN":
			return rewrite.Float64(math.NaN()), nil
		case "Infinity":
			return rewrite.Float64(math.Inf(1)), nil
		case "-Infinity":
			return rewrite.Float64(math.Inf(-1)), nil
		}
		return rewrite.Value{}, fmt.Errorf("FLOAT64 %q", s)
	case rewrite.TypeString:
		return rewrite.String(s), nil
	case rewrite.TypeBytes:
		b, err := base64.StdEncoding.DecodeString(s)
		return rewrite.Bytes(b), err
	case rewrite.TypeTimestamp:
		ts, err := time.Parse(time.RFC3339Nano, s)
		return rewrite.Timestamp(ts), err
	case rewrite.TypeDate:
		d, err := time.Parse("2006-01-02", s)
		return rewrite.Date(d.Year(), d.Month(), d.Day()), err
	case rewrite.TypeNumeric:
		return rewrite.Value{Type: rewrite.TypeNumeric, Str: s}, nil
	}
	return rewrite.Value{}, fmt.Errorf("type %s", t)
}

func datastoreMutations(ms []*datastorepb.Mutation) []Mutation {
	var out []Mutation
	for _, m := range ms {
		var k *datastorepb.Key
		switch {
		case m.GetUpsert() != nil:
			k = m.GetUpsert().GetKey()
		case m.GetInsert() != nil:
			k = m.GetInsert().GetKey()
		case m.GetUpdate() != nil:
			k = m.GetUpdate().GetKey()
		default:
			k = m.GetDelete()
		}
		if k == nil {
			continue
		}
		dk := rewrite.DatastoreKey{Database: k.GetPartitionId().GetDatabaseId(), Namespace: k.GetPartitionId().GetNamespaceId()}
		for _, e := range k.GetPath() {
			dk.Path = append(dk.Path, rewrite.PathElement{Kind: e.GetKind(), ID: e.GetId(), Name: e.GetName()})
		}
		mu := Mutation{Key: rewrite.AppendDatastoreKey(nil, dk), Text: dk.String()}
		if len(dk.Path) > 0 {
			mu.Table = dk.Path[len(dk.Path)-1].Kind
		}
		out = append(out, mu)
	}
	return out
}
