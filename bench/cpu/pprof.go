package main

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// cpuProfile is what the summary needs of a CPU profile: each sample's
// stack (function names, leaf first, inlined frames included) and its CPU
// time.
type cpuProfile struct {
	samples []profSample
	total   time.Duration
}

type profSample struct {
	stack []string
	cpu   time.Duration
}

// readProfile reads a CPU profile as runtime/pprof writes it: gzipped
// profile.proto (github.com/google/pprof/proto/profile.proto), of which it
// decodes the sample types, samples, locations, functions and strings.
func readProfile(path string) (*cpuProfile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var (
		types     [][2]int64 // (type, unit) string indexes
		samples   [][2][]uint64
		locations = map[uint64][]uint64{} // location id → function ids, innermost first
		functions = map[uint64]int64{}    // function id → name string index
		strs      []string
	)
	err = fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case 1: // sample_type
			var t [2]int64
			err := fields(v, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				if n == 1 || n == 2 {
					t[n-1] = int64(x)
				}
				return nil
			})
			types = append(types, t)
			return err
		case 2: // sample
			var s [2][]uint64 // location ids, values
			err := fields(v, func(n protowire.Number, t protowire.Type, v []byte, x uint64) error {
				if n == 1 || n == 2 {
					s[n-1] = appendRepeated(s[n-1], t, v, x)
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case 4: // location
			var id uint64
			var fns []uint64
			err := fields(v, func(n protowire.Number, _ protowire.Type, v []byte, x uint64) error {
				switch n {
				case 1:
					id = x
				case 4: // line
					return fields(v, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
						if n == 1 {
							fns = append(fns, x)
						}
						return nil
					})
				}
				return nil
			})
			locations[id] = fns
			return err
		case 5: // function
			var id uint64
			var name int64
			err := fields(v, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				switch n {
				case 1:
					id = x
				case 2:
					name = int64(x)
				}
				return nil
			})
			functions[id] = name
			return err
		case 6: // string_table
			strs = append(strs, string(v))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	str := func(i int64) string {
		if i >= 0 && int(i) < len(strs) {
			return strs[i]
		}
		return ""
	}
	cpuIndex := -1
	for i, t := range types {
		if str(t[0]) == "cpu" && str(t[1]) == "nanoseconds" {
			cpuIndex = i
		}
	}
	if cpuIndex < 0 {
		return nil, fmt.Errorf("%s: not a CPU profile (no cpu/nanoseconds sample type)", path)
	}
	p := &cpuProfile{}
	for _, s := range samples {
		if cpuIndex >= len(s[1]) {
			continue
		}
		ps := profSample{cpu: time.Duration(s[1][cpuIndex])}
		for _, loc := range s[0] {
			for _, fn := range locations[loc] {
				ps.stack = append(ps.stack, str(functions[fn]))
			}
		}
		p.samples = append(p.samples, ps)
		p.total += ps.cpu
	}
	return p, nil
}

// fields calls f with each field of the protobuf message b: its number,
// wire type and, for a length-delimited field, its bytes, else its
// varint or fixed value.
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var y uint32
			y, n = protowire.ConsumeFixed32(b)
			x = uint64(y)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// appendRepeated appends the values of a repeated integer field, packed
// (one length-delimited run of varints) or not.
func appendRepeated(dst []uint64, typ protowire.Type, v []byte, x uint64) []uint64 {
	if typ != protowire.BytesType {
		return append(dst, x)
	}
	for len(v) > 0 {
		y, n := protowire.ConsumeVarint(v)
		if n < 0 {
			break
		}
		dst = append(dst, y)
		v = v[n:]
	}
	return dst
}

// category is a kind of work in a profile. A sample belongs to the
// innermost function on its stack that a category names (re, and not
// not): a DoFn's own code runs under the SDK's frames, the SDK's plumbing
// between DoFns under a DoFn's emit, a sink's commits under the emit of
// the write planning fused with it and a whole fused stage under a
// Spanner source's row iterator, so the innermost owner says whose work a
// sample is. Package record's helpers name no category, so their time
// goes to their caller (the parse, the encoding, the batch codec or the
// stage that called them). gRPC and protobuf under a client's call are the
// client's. The Go runtime (allocation, scheduling) is a sample's
// category only when nothing else on its stack is named.
type category struct {
	name string
	re   *regexp.Regexp
	not  *regexp.Regexp // nil: nothing excluded
}

func (c category) matches(fn string) bool {
	return c.re.MatchString(fn) && (c.not == nil || !c.not.MatchString(fn))
}

// categories are the kinds of work the summary tells apart, the record
// work both sides do first, then what only a pipeline does. A function
// goes to the first category that names it.
var categories = []category{
	{name: "JSON Lines parse (record.ParseJSON, ParseJSONCap)", re: regexp.MustCompile(`^github\.com/rekeyio/rekey/record\.ParseJSON(Cap)?$`)},
	{name: "key rewrite (rewrite, rekeyer; the plain program's rowRewriter)", re: regexp.MustCompile(`^(github\.com/rekeyio/rekey/(rewrite|rekeyer)\.|main\.\(\*rowRewriter\)\.)`)},
	{name: "JSON Lines encode (record.AppendJSON)", re: regexp.MustCompile(`^github\.com/rekeyio/rekey/record\.AppendJSON$`)},
	{name: "record batches between stages (record.EncodeBatch, DecodeBatch)", re: regexp.MustCompile(`^github\.com/rekeyio/rekey/record\.(EncodeBatch|DecodeBatch(Spare)?|DecodeToBatch|AppendRecord|BatchLen)$`)},
	{name: "write planning (internal/write, transforms/writeplan)", re: regexp.MustCompile(`^github\.com/rekeyio/rekey/(internal/write|transforms/writeplan)[/.]`)},
	{name: "file reads and writes (os.File; sockets are gRPC's)", re: regexp.MustCompile(`^os\.\(\*File\)\.(Read|Write|ReadAt|WriteString)$`)},
	{name: "Spanner and Datastore clients (cloud.google.com/go, the gRPC of their calls included)", re: regexp.MustCompile(`^cloud\.google\.com/go/`)},
	{name: "gRPC and protobuf (runner ↔ SDK worker; the clients' connections)", re: regexp.MustCompile(`^(google\.golang\.org/(grpc|protobuf)|golang\.org/x/net/http2)`)},
	{name: "prism runner", re: regexp.MustCompile(`^github\.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism/`)},
	{name: "Beam SDK (harness, element execution, coders)", re: regexp.MustCompile(`^github\.com/apache/beam/sdks/v2/go/pkg/beam/`)},
	{name: "garbage collector (background marking)", re: regexp.MustCompile(`^runtime\.gcBgMarkWorker$`)},
	{name: "other rekey code (the stages' own: sources, field copies, sinks, counters)", re: regexp.MustCompile(`^github\.com/rekeyio/rekey/`), not: regexp.MustCompile(`^github\.com/rekeyio/rekey/record\.`)},
	{name: "Go runtime (scheduler, allocation, other)", re: regexp.MustCompile(`^runtime\.`)},
}

// The categories byCategory treats apart.
var (
	clientCat  = slices.IndexFunc(categories, func(c category) bool { return strings.HasPrefix(c.name, "Spanner and Datastore clients") })
	grpcCat    = slices.IndexFunc(categories, func(c category) bool { return strings.HasPrefix(c.name, "gRPC") })
	runtimeCat = len(categories) - 1
)

// byCategory is each category's CPU time in p, "other" last.
func byCategory(p *cpuProfile) []time.Duration {
	out := make([]time.Duration, len(categories)+1)
	for _, s := range p.samples {
		out[owner(s.stack)] += s.cpu
	}
	return out
}

// owner is the category of a sample with stack (innermost first), or
// len(categories) when none names it.
func owner(stack []string) int {
	grpc := false
	for _, fn := range stack {
		i := slices.IndexFunc(categories[:runtimeCat], func(c category) bool { return c.matches(fn) })
		switch {
		case i < 0:
			continue
		case i == grpcCat:
			grpc = true // the client's, if a client's call is the next owner out
			continue
		case grpc && i != clientCat:
			return grpcCat
		}
		return i
	}
	if grpc {
		return grpcCat
	}
	if slices.ContainsFunc(stack, categories[runtimeCat].matches) {
		return runtimeCat
	}
	return len(categories)
}

// topFlat is the n functions with the most CPU time of their own (the leaf
// of the samples) in p.
func topFlat(p *cpuProfile, n int) []struct {
	name string
	cpu  time.Duration
} {
	flat := map[string]time.Duration{}
	for _, s := range p.samples {
		if len(s.stack) > 0 {
			flat[s.stack[0]] += s.cpu
		}
	}
	type entry = struct {
		name string
		cpu  time.Duration
	}
	var out []entry
	for name, cpu := range flat {
		out = append(out, entry{name, cpu})
	}
	slices.SortFunc(out, func(a, b entry) int {
		return cmp.Or(cmp.Compare(b.cpu, a.cpu), cmp.Compare(a.name, b.name))
	})
	return out[:min(n, len(out))]
}

// errNoProfile is returned when a profile holds no sample.
var errNoProfile = errors.New("the profile holds no sample")
