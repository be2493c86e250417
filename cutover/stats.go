package cutover

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Stats is a snapshot of a library's counters, per phase (by name) where
// a call was routed by one.
type Stats struct {
	Reads, Writes, Deletes map[Phase]int64
	// Fallbacks counts read_new reads that found no new record and read
	// old; Redirected the reads that went to the other store because the
	// key's touched mark said the one the phase reads missed a write;
	// SwitchWaits the calls that waited for their cohort's switch of
	// authority (see package phases); ShadowReads the shadow reads,
	// ShadowMismatches those where old and new differed and still did on
	// a second look, with the first of them in MismatchSamples (the old
	// key and how new differs). ShadowSettled counts the differences gone
	// on that second look (a write of the key in flight between the
	// reads), ShadowPending those on a key whose touched mark said a store
	// missed a write: the repair log holds it, and a repair puts it right.
	Fallbacks, Redirected, SwitchWaits int64
	ShadowReads, ShadowMismatches      int64
	ShadowSettled, ShadowPending       int64
	MismatchSamples                    []string
	// Repairs counts records written to the repair log (a second write
	// that failed); Unrepaired those whose repair entry failed too.
	Repairs, Unrepaired int64
	// Refreshes and RefreshErrors count the phase cache's reads.
	Refreshes, RefreshErrors int64
}

// maxSamples is how many mismatched keys Stats keeps.
const maxSamples = 20

// meter is the library's OpenTelemetry meter (the global provider's: an
// application that exports metrics sees rekey_cutover_* counters).
var meter = otel.Meter("github.com/rekeyio/rekey/cutover")

type counters struct {
	calls, fallbacks, mismatches, settled, pending, repairs, refreshes metric.Int64Counter
}

var otelCounters = func() counters {
	var c counters
	c.calls, _ = meter.Int64Counter("rekey_cutover_calls", metric.WithDescription("application calls by migration, phase and operation (read, write, delete, shadow_read)"))
	c.fallbacks, _ = meter.Int64Counter("rekey_cutover_read_fallbacks", metric.WithDescription("read_new reads that found no new record and read old"))
	c.mismatches, _ = meter.Int64Counter("rekey_cutover_shadow_mismatches", metric.WithDescription("shadow reads where old and new differed"))
	c.settled, _ = meter.Int64Counter("rekey_cutover_shadow_settled", metric.WithDescription("shadow reads where old and new differed and agreed on a second look (a write in flight between the reads)"))
	c.pending, _ = meter.Int64Counter("rekey_cutover_shadow_pending", metric.WithDescription("shadow reads where old and new differed on a key whose missed write is in the repair log"))
	c.repairs, _ = meter.Int64Counter("rekey_cutover_repairs", metric.WithDescription("second writes that failed, by outcome (logged, unrepaired)"))
	c.refreshes, _ = meter.Int64Counter("rekey_cutover_phase_refreshes", metric.WithDescription("phase cache reads, by outcome (ok, error)"))
	return c
}()

// stats counts a library's calls, in a snapshot and through OpenTelemetry.
type stats struct {
	migration attribute.KeyValue
	mu        sync.Mutex
	s         Stats
}

func newStats(migration string) *stats {
	return &stats{migration: attribute.String("migration", migration), s: Stats{Reads: map[Phase]int64{}, Writes: map[Phase]int64{}, Deletes: map[Phase]int64{}}}
}

func (st *stats) call(op string, p Phase) {
	st.mu.Lock()
	switch op {
	case "read":
		st.s.Reads[p]++
	case "write":
		st.s.Writes[p]++
	case "delete":
		st.s.Deletes[p]++
	case "shadow_read":
		st.s.ShadowReads++
	}
	st.mu.Unlock()
	otelCounters.calls.Add(context.Background(), 1, metric.WithAttributes(st.migration, attribute.String("phase", string(p)), attribute.String("op", op)))
}

func (st *stats) fallback() {
	st.mu.Lock()
	st.s.Fallbacks++
	st.mu.Unlock()
	otelCounters.fallbacks.Add(context.Background(), 1, metric.WithAttributes(st.migration))
}

func (st *stats) redirect() {
	st.mu.Lock()
	st.s.Redirected++
	st.mu.Unlock()
}

func (st *stats) switchWait() {
	st.mu.Lock()
	st.s.SwitchWaits++
	st.mu.Unlock()
}

func (st *stats) mismatch(key string) {
	st.mu.Lock()
	st.s.ShadowMismatches++
	if len(st.s.MismatchSamples) < maxSamples {
		st.s.MismatchSamples = append(st.s.MismatchSamples, key)
	}
	st.mu.Unlock()
	otelCounters.mismatches.Add(context.Background(), 1, metric.WithAttributes(st.migration))
}

func (st *stats) shadowSettled() {
	st.mu.Lock()
	st.s.ShadowSettled++
	st.mu.Unlock()
	otelCounters.settled.Add(context.Background(), 1, metric.WithAttributes(st.migration))
}

func (st *stats) shadowPending() {
	st.mu.Lock()
	st.s.ShadowPending++
	st.mu.Unlock()
	otelCounters.pending.Add(context.Background(), 1, metric.WithAttributes(st.migration))
}

func (st *stats) repair(logged bool) {
	outcome := "logged"
	st.mu.Lock()
	if logged {
		st.s.Repairs++
	} else {
		st.s.Unrepaired++
		outcome = "unrepaired"
	}
	st.mu.Unlock()
	otelCounters.repairs.Add(context.Background(), 1, metric.WithAttributes(st.migration, attribute.String("outcome", outcome)))
}

func (st *stats) refresh(err error) {
	outcome := "ok"
	st.mu.Lock()
	st.s.Refreshes++
	if err != nil {
		st.s.RefreshErrors++
		outcome = "error"
	}
	st.mu.Unlock()
	otelCounters.refreshes.Add(context.Background(), 1, metric.WithAttributes(st.migration, attribute.String("outcome", outcome)))
}

// snapshot copies the counters.
func (st *stats) snapshot() Stats {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := st.s
	out.Reads, out.Writes, out.Deletes = copyCounts(st.s.Reads), copyCounts(st.s.Writes), copyCounts(st.s.Deletes)
	out.MismatchSamples = append([]string(nil), st.s.MismatchSamples...)
	return out
}

func copyCounts(m map[Phase]int64) map[Phase]int64 {
	out := make(map[Phase]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
