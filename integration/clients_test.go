package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
)

// connectionsTo counts this process's established TCP connections to
// host:port (from /proc/net/tcp and tcp6: the sockets of the process's
// descriptors).
func connectionsTo(t *testing.T, hostport string) int {
	t.Helper()
	_, port, ok := strings.Cut(hostport, ":")
	if !ok {
		t.Fatalf("no port in %q", hostport)
	}
	var p int
	fmt.Sscan(port, &p)
	inodes := map[string]bool{}
	fds, _ := filepath.Glob("/proc/self/fd/*")
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	n := 0
	for _, f := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 || fs[3] != "01" || !inodes[fs[9]] { // 01: ESTABLISHED
				continue
			}
			if _, rport, ok := strings.Cut(fs[2], ":"); ok && rport == fmt.Sprintf("%04X", p) {
				n++
			}
		}
	}
	return n
}

// A process that runs job after job (a rekey command running several,
// the tests, a worker an engine reuses) does not keep a client per job:
// the Go SDK never tears its DoFns down, so their clients are shared per
// process and store, and the connections to the store stay as many after
// the fifth job as after the first.
func TestClientsDoNotLeakAcrossJobs(t *testing.T) {
	emulator.RequireSpanner(t)
	host := os.Getenv("SPANNER_EMULATOR_HOST")
	dir := t.TempDir()
	var lines []string
	for i := range 200 {
		lines = append(lines, fmt.Sprintf(`{"Id": "u%04d", "Page": "/p/%d"}`, i, i))
	}
	in := writeLines(t, "in.jsonl", lines)
	dbID, _ := newSpannerTarget(t, "leak", "CREATE TABLE Logs (Id STRING(MAX) NOT NULL, Page STRING(MAX)) PRIMARY KEY (Id)")
	cfg := loadYAML(t, fmt.Sprintf(`
source: {type: jsonl, path: %q, table: Logs, key: "Id STRING(MAX)"}
target: {type: spanner, project: %s, instance: %s, database: %s, table: Logs}
rewrite: {strategy: hashprefix}
dead_letter: %q
`, in, emulator.SpannerProject(), emulator.SpannerInstance(), dbID, filepath.Join(dir, "dead.jsonl")))
	// And a Spanner source with an interleaved child table, into another
	// database.
	srcID, src := newSpannerTarget(t, "leaksrc",
		"CREATE TABLE P (Id STRING(MAX) NOT NULL, V STRING(MAX)) PRIMARY KEY (Id)",
		"CREATE TABLE C (Id STRING(MAX) NOT NULL, N INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (Id, N), INTERLEAVE IN PARENT P ON DELETE CASCADE")
	var ms []*spanner.Mutation
	for i := range 100 {
		id := fmt.Sprintf("p%03d", i)
		ms = append(ms, spanner.Insert("P", []string{"Id", "V"}, []any{id, "v"}), spanner.Insert("C", []string{"Id", "N", "V"}, []any{id, int64(1), "c"}))
	}
	if _, err := src.Apply(t.Context(), ms); err != nil {
		t.Fatal(err)
	}
	dstID, _ := newSpannerTarget(t, "leakdst")
	fromSpanner := loadYAML(t, fmt.Sprintf(`
source: {type: spanner, project: %s, instance: %s, database: %s, table: P}
target: {type: spanner, project: %s, instance: %s, database: %s, table: P2}
rewrite: {strategy: hashprefix}
interleaved: [C]
dead_letter: %q
`, emulator.SpannerProject(), emulator.SpannerInstance(), srcID, emulator.SpannerProject(), emulator.SpannerInstance(), dstID, filepath.Join(dir, "dead2.jsonl")))
	for _, c := range []struct {
		name string
		cfg  *config.Config
	}{{"files to Spanner", cfg}, {"Spanner with a child table to Spanner", fromSpanner}} {
		var after []int
		var last string
		for range 5 {
			res := migrate(t, c.cfg, "prism")
			last = res.Counters.String()
			if res.Counters[migration.Written] == 0 {
				t.Fatalf("%s: nothing written: %s", c.name, res.Counters)
			}
			after = append(after, connectionsTo(t, host))
		}
		t.Logf("%s: connections to the Spanner emulator after each job: %v (the last: %s)", c.name, after, last)
		if after[4] > after[0] {
			t.Errorf("%s: connections grew from %d after the first job to %d after the fifth: %v", c.name, after[0], after[4], after)
		}
	}
}
