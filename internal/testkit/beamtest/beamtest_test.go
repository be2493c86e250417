package beamtest_test

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/rekeyio/rekey/internal/testkit/beamtest"
)

var (
	seen  = beam.NewCounter("beamtest", "seen")
	sizes = beam.NewDistribution("beamtest", "size")
)

func double(ctx context.Context, n int, emit func(string)) {
	seen.Inc(ctx, 1)
	sizes.Update(ctx, int64(n))
	emit(strconv.Itoa(2 * n))
}

func fail(n int) error {
	if n == 3 {
		return errors.New("three is refused")
	}
	return nil
}

func init() {
	register.Function3x0(double)
	register.Function1x1(fail)
	register.Emitter1[string]()
}

func TestRunCollectsMetricsAndElements(t *testing.T) {
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			out := beamtest.NewCollector(t)
			m := beamtest.Run(t, runner, func(s beam.Scope) {
				nums := beam.CreateList(s, []int{1, 2, 3, 4})
				out.Collect(s, beam.ParDo(s, double, nums))
			})
			if m["beamtest/seen"] != 4 || m["beamtest/size.max"] != 4 || m["beamtest/size.min"] != 1 || m["beamtest/size.sum"] != 10 {
				t.Errorf("metrics %v", m)
			}
			got := out.Strings()
			sort.Strings(got)
			if strings.Join(got, ",") != "2,4,6,8" {
				t.Errorf("collected %q", got)
			}
		})
	}
}

func TestRunErrReportsFailures(t *testing.T) {
	for _, runner := range beamtest.Runners {
		t.Run(runner, func(t *testing.T) {
			_, err := beamtest.RunErr(t.Context(), runner, func(s beam.Scope) {
				beam.ParDo0(s, fail, beam.CreateList(s, []int{1, 2, 3}))
			})
			if err == nil || !strings.Contains(err.Error(), "three is refused") {
				t.Errorf("error %v, want the DoFn's", err)
			}
		})
	}
}
