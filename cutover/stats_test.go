package cutover

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestStatsReachOpenTelemetry: the library's counters are made when the
// package loads, from the global meter provider, before an application
// sets its own; OpenTelemetry's global provider hands them to the one set
// later, and an application reading its metrics sees every call, by
// migration, phase, operation and outcome, as Stats counts them.
func TestStatsReachOpenTelemetry(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(provider)
	t.Cleanup(func() {
		_ = provider.Shutdown(context.Background())
		otel.SetMeterProvider(prev)
	})

	st := newStats("otel-test")
	for range 3 {
		st.call("write", DualWrite)
	}
	st.call("read", Shadow)
	st.call("shadow_read", Shadow)
	st.mismatch("k1")
	st.mismatch("k2")
	st.shadowPending()
	st.shadowSettled()
	st.shadowSettled()
	st.fallback()
	st.repair(true)
	st.repair(false)
	st.refresh(nil)
	st.refresh(errors.New("unavailable"))

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	// sum is the counter name's total over the points whose attributes
	// include want (this test's migration always).
	sum := func(name string, want ...attribute.KeyValue) int64 {
		var n int64
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != name {
					continue
				}
				data, ok := m.Data.(metricdata.Sum[int64])
				if !ok {
					t.Fatalf("%s is a %T, want a sum of int64", name, m.Data)
				}
				for _, p := range data.DataPoints {
					v, _ := p.Attributes.Value("migration")
					match := v.AsString() == "otel-test"
					for _, kv := range want {
						if v, ok := p.Attributes.Value(kv.Key); !ok || v != kv.Value {
							match = false
						}
					}
					if match {
						n += p.Value
					}
				}
			}
		}
		return n
	}
	for _, c := range []struct {
		name  string
		attrs []attribute.KeyValue
		want  int64
	}{
		{"rekey_cutover_calls", []attribute.KeyValue{attribute.String("op", "write"), attribute.String("phase", "dual_write")}, 3},
		{"rekey_cutover_calls", []attribute.KeyValue{attribute.String("op", "read"), attribute.String("phase", "shadow")}, 1},
		{"rekey_cutover_calls", []attribute.KeyValue{attribute.String("op", "shadow_read")}, 1},
		{"rekey_cutover_calls", nil, 5},
		{"rekey_cutover_shadow_mismatches", nil, 2},
		{"rekey_cutover_shadow_pending", nil, 1},
		{"rekey_cutover_shadow_settled", nil, 2},
		{"rekey_cutover_read_fallbacks", nil, 1},
		{"rekey_cutover_repairs", []attribute.KeyValue{attribute.String("outcome", "logged")}, 1},
		{"rekey_cutover_repairs", []attribute.KeyValue{attribute.String("outcome", "unrepaired")}, 1},
		{"rekey_cutover_phase_refreshes", []attribute.KeyValue{attribute.String("outcome", "ok")}, 1},
		{"rekey_cutover_phase_refreshes", []attribute.KeyValue{attribute.String("outcome", "error")}, 1},
	} {
		if got := sum(c.name, c.attrs...); got != c.want {
			t.Errorf("%s %v = %d, want %d", c.name, c.attrs, got, c.want)
		}
	}
	s := st.snapshot()
	if s.Writes[DualWrite] != 3 || s.ShadowMismatches != 2 || s.ShadowPending != 1 || s.ShadowSettled != 2 || s.Repairs != 1 || s.Unrepaired != 1 || s.RefreshErrors != 1 {
		t.Errorf("Stats %+v disagree with what was counted", s)
	}
}
