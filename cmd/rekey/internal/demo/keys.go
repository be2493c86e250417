package demo

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/rekeyio/rekey/configs"
	"github.com/rekeyio/rekey/internal/hotspot"
	"github.com/rekeyio/rekey/rewrite"
)

// demoCase is one rewrite the demo shows.
type demoCase struct {
	label  string
	config rewrite.StepConfig
}

// spannerCases are the rewrites the key table shows for UserAccessLogs;
// the shard row is the access-log migration's own rewrite (logsRewrite).
func spannerCases() []demoCase {
	swap := rewrite.StepConfig{Strategy: "swap", Params: rewrite.Params{"order": "UserId"}}
	return []demoCase{
		{"none (copy)", rewrite.StepConfig{Strategy: "none"}},
		{"swap order=UserId", swap},
		{logsRewriteLabel, logsRewrite().Step()},
		{"bucket n=16 (ms)", rewrite.StepConfig{Strategy: "bucket", Params: rewrite.Params{"n": 16}}},
		{"chain: swap then hashprefix", rewrite.StepConfig{Strategy: "chain", Steps: []rewrite.StepConfig{swap, {Strategy: "hashprefix", Params: rewrite.Params{"column": "UserId"}}}}},
		{"uuid v5", rewrite.StepConfig{Strategy: "uuid"}},
	}
}

// rangesLine explains the tables' RANGES/WINDOW column (hotspot.Report's
// Touched).
const rangesLine = "RANGES/WINDOW: how many of the 16 key ranges a window of 5% of the writes lands in, on average (16 = all of them; 1 or 2 = one hot range at a time)."

// Keys rewrites the keys of the bundled sample data with several
// strategies, checks that each invertible rewrite maps back, and shows on
// w how evenly the rows would land over 16 key ranges when written in
// their original (time) order.
func Keys(w io.Writer) error {
	schema, keys, err := sampleLogKeys()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "UserAccessLogs: %d rows keyed %s, written in time order.\n", len(keys), "("+schema.Text()+")")
	fmt.Fprintln(w, "Busiest of 16 key ranges per 5% window of writes, as a multiple of its fair share")
	fmt.Fprintln(w, "(1.0 = perfectly even; a random order scores about 1.7 on windows of 100 writes, a sorted one 12 to 16):")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STRATEGY\tNEW KEY\tBUSIEST\tRANGES/WINDOW\tROUND TRIP\tFIRST KEY")
	for _, dc := range spannerCases() {
		r, err := spannerRewriter(dc.config, schema)
		if err != nil {
			return err
		}
		enc := make([][]byte, len(keys))
		roundTrip := "n/a"
		if r.Invertible() {
			roundTrip = "ok"
		}
		var first []rewrite.Value
		for i, k := range keys {
			out, err := r.Rewrite(nil, k)
			if err != nil {
				return fmt.Errorf("%s: row %d: %w", dc.label, i+1, err)
			}
			if i == 0 {
				first = out
			}
			enc[i] = rewrite.AppendSpannerKey(nil, r.Out(), out)
			if r.Invertible() {
				back, err := r.Invert(nil, out)
				if err != nil || rewrite.CompareSpanner(schema, back, k) != 0 {
					roundTrip = "FAILED"
				}
			}
		}
		rep := hotspot.Measure(enc, hotspot.Options{})
		fmt.Fprintf(tw, "%s\t%s\t%.2fx\t%.1f\t%s\t%s\n", dc.label, describeKeyNames(r.Out()), rep.Busiest, rep.Touched, roundTrip, rewrite.FormatKey(first, false))
	}
	tw.Flush()
	fmt.Fprintln(w, rangesLine)

	cust, err := readSample("samples/customers.jsonl")
	if err != nil {
		return err
	}
	var dkeys []rewrite.DatastoreKey
	for i, rec := range cust {
		pk, err := rewrite.ParseKey(string(rec["__key__"]), nil)
		if err != nil || !pk.IsDatastore {
			return fmt.Errorf("customers.jsonl line %d: bad __key__: %v", i+1, err)
		}
		dkeys = append(dkeys, pk.Datastore)
	}
	fmt.Fprintf(w, "\nDatastore: %d Customer entities named Customer1, Customer2, ... with Order children.\n\n", len(dkeys))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STRATEGY\tBUSIEST\tRANGES/WINDOW\tROUND TRIP\tEXAMPLE")
	for _, dc := range []demoCase{
		{"none (copy)", rewrite.StepConfig{Strategy: "none"}},
		{"hashprefix n=4 elements=root", rewrite.StepConfig{Strategy: "hashprefix", Params: rewrite.Params{"elements": "root"}}},
		{"reverse elements=root", rewrite.StepConfig{Strategy: "reverse", Params: rewrite.Params{"elements": "root"}}},
		{"generation g=2 + hashprefix", rewrite.StepConfig{Strategy: "chain", Steps: []rewrite.StepConfig{{Strategy: "hashprefix", Params: rewrite.Params{"elements": "root"}}, {Strategy: "generation", Params: rewrite.Params{"g": 2, "as": "prefix"}}}}},
	} {
		r, err := datastoreRewriter(dc.config)
		if err != nil {
			return err
		}
		enc := make([][]byte, len(dkeys))
		roundTrip := "ok"
		var example rewrite.DatastoreKey
		for i, k := range dkeys {
			out, err := r.Rewrite(k)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", dc.label, k, err)
			}
			if i == 1 {
				example = out
			}
			enc[i] = rewrite.AppendDatastoreKey(nil, out)
			if back, err := r.Invert(out); err != nil || !back.Equal(k) {
				roundTrip = "FAILED"
			}
		}
		rep := hotspot.Measure(enc, hotspot.Options{})
		fmt.Fprintf(tw, "%s\t%.2fx\t%.1f\t%s\t%s\n", dc.label, rep.Busiest, rep.Touched, roundTrip, rewrite.FormatDatastoreKey(example))
	}
	tw.Flush()
	return nil
}

// sampleLogKeys are the keys of the bundled UserAccessLogs rows, in the
// file's (time) order, with their schema.
func sampleLogKeys() (rewrite.KeySchema, [][]rewrite.Value, error) {
	logs, err := readSample("samples/user_access_logs.jsonl")
	if err != nil {
		return rewrite.KeySchema{}, nil, err
	}
	schema, err := rewrite.ParseKeySchema("UserAccessLogs", "LastAccess TIMESTAMP, UserId STRING(36)")
	if err != nil {
		return rewrite.KeySchema{}, nil, err
	}
	var keys [][]rewrite.Value
	for i, rec := range logs {
		pk, err := rewrite.ParseKey(fmt.Sprintf("[%s,%s]", rec["LastAccess"], rec["UserId"]), &schema)
		if err != nil {
			return rewrite.KeySchema{}, nil, fmt.Errorf("user_access_logs.jsonl line %d: %w", i+1, err)
		}
		keys = append(keys, pk.Values)
	}
	return schema, keys, nil
}

// spannerRewriter builds one of the demo's rewriters.
func spannerRewriter(c rewrite.StepConfig, schema rewrite.KeySchema) (*rewrite.SpannerRewriter, error) {
	s, err := rewrite.New(c)
	if err != nil {
		return nil, err
	}
	return s.Spanner(schema)
}

// datastoreRewriter builds one of the demo's rewriters.
func datastoreRewriter(c rewrite.StepConfig) (*rewrite.DatastoreRewriter, error) {
	s, err := rewrite.New(c)
	if err != nil {
		return nil, err
	}
	return s.Datastore()
}

func describeKeyNames(s rewrite.KeySchema) string {
	out := "("
	for i, c := range s.Columns {
		if i > 0 {
			out += ", "
		}
		out += c.Name
	}
	return out + ")"
}

// readSample reads a bundled JSON Lines sample into raw records.
func readSample(name string) ([]map[string]json.RawMessage, error) {
	f, err := configs.Samples.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []map[string]json.RawMessage
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, n, err)
		}
		recs = append(recs, rec)
	}
	return recs, sc.Err()
}
