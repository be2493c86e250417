package pipeline

import (
	"context"
	"errors"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

var errPending = errors.New("not wired yet")

type spannerPlan struct{}

func (p *Plan) resolveSpannerSource(ctx context.Context) error { return errPending }
func (p *Plan) resolveSpannerTarget(ctx context.Context) error { return nil }
func (p *Plan) readSpanner(s beam.Scope) (beam.PCollection, []beam.PCollection, error) {
	return beam.PCollection{}, nil, errPending
}
func readDatastore(s beam.Scope, p *Plan) (beam.PCollection, []beam.PCollection, error) {
	return beam.PCollection{}, nil, errPending
}
func (p *Plan) writeSpanner(s beam.Scope, b beam.PCollection) ([]beam.PCollection, error) {
	return nil, errPending
}
func writeDatastore(s beam.Scope, p *Plan, b beam.PCollection) []beam.PCollection { return nil }
func prepareStores(ctx context.Context, p *Plan, o TargetOptions) error           { return nil }
