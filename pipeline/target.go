package pipeline

import (
	"context"
	"io"
)

// TargetOptions control PrepareTarget.
type TargetOptions struct {
	// Create runs the target DDL; without it the DDL is only printed.
	Create bool
	// Force runs even if the target's manifest records a different spec.
	Force bool
	Out   io.Writer
}

// PrepareTarget prints (and with Create runs) the target DDL, and checks
// and records the rewrite spec in the target's manifest.
func PrepareTarget(ctx context.Context, p *Plan, o TargetOptions) error {
	return prepareStores(ctx, p, o)
}
