package pipeline

import (
	"os"
	"strings"
	"testing"
)

// Without --worker_binary a job stages rekey's own executable where it
// runs on the workers' platform, and says what to build and pass where
// it does not (Beam would compile the program from a source folder an
// installed rekey does not have).
func TestSelfWorker(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := selfWorker("linux", "amd64"); err != nil || got != self {
		t.Errorf("linux/amd64: %q, %v; want %q", got, err, self)
	}
	_, err = selfWorker("darwin", "arm64")
	if err == nil || !strings.Contains(err.Error(), "built for darwin/arm64") || !strings.Contains(err.Error(), "--worker_binary=") {
		t.Errorf("darwin/arm64: %v; want what to build and pass", err)
	}
}
