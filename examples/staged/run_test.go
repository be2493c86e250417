// Package staged_test runs the operator guide's worked example of a
// staged migration (run.sh, docs/operator-guide.md) against the Firestore emulator, as written.
package staged_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestWorkedExample(t *testing.T) {
	if os.Getenv("DATASTORE_EMULATOR_HOST") == "" {
		t.Skip("DATASTORE_EMULATOR_HOST is not set (scripts/test.sh starts the emulator)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "run.sh")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("examples/staged/run.sh: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
