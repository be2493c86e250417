package sink_test

// The Datastore sink tests run their pipelines through internal/testkit/beamtest;
// these names keep the tests short.

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/rekeyio/rekey/internal/testkit/beamtest"
)

var dsRunners = beamtest.Runners

func dsRun(t *testing.T, runner string, build func(s beam.Scope)) map[string]int64 {
	t.Helper()
	return beamtest.Run(t, runner, build)
}

type dsCollector struct{ c *beamtest.Collector }

func newDSCollector(t *testing.T) dsCollector { return dsCollector{beamtest.NewCollector(t)} }

func (c dsCollector) bytes(s beam.Scope, col beam.PCollection)   { c.c.Collect(s, col) }
func (c dsCollector) strings(s beam.Scope, col beam.PCollection) { c.c.Collect(s, col) }
func (c dsCollector) elements() []any                            { return c.c.Elements() }
