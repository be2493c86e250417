// Package shared keeps one client per store and configuration for the
// whole process, for the DoFns of every job it runs.
//
// Why: the Go SDK's worker harness never tears a bundle's DoFns down
// (exec.Plan.Down is not called; plans are cached until the process
// ends), so a client a DoFn opens in Setup and closes in Teardown stays
// open for the life of the process. A process that runs job after job —
// rekey's own, whose loopback worker is the rekey process, a test binary,
// a worker an engine reuses — would keep every job's clients and their
// connections (four more to the Spanner emulator per job, measured). With
// a client per store and configuration, shared by the DoFns that use it,
// the connections are bounded by the stores, not by the jobs.
//
// A client is shared by key: the store (a database path, a project and
// database), the configuration (a variant name for each set of client
// options), and the emulator address the client library would connect
// to, read when the client is opened. Get counts references; when a
// DoFn's Teardown does run (a failed bundle's plan, the direct runner),
// its release drops one, and the last closes the client.
package shared

import (
	"os"
	"sync"
)

// Clients are the shared clients of one type.
type Clients[C any] struct {
	close func(C)

	mu sync.Mutex
	m  map[string]*entry[C]
}

type entry[C any] struct {
	c    C
	refs int
}

// New returns an empty set of shared clients closed with close.
func New[C any](close func(C)) *Clients[C] {
	return &Clients[C]{close: close, m: map[string]*entry[C]{}}
}

// Get returns the client of key, opening it with open if there is none,
// and a release that drops the reference (the last closes the client).
// The key is extended with the emulator addresses of the environment
// (SPANNER_EMULATOR_HOST, DATASTORE_EMULATOR_HOST), which decide where a
// client connects.
func (s *Clients[C]) Get(key string, open func() (C, error)) (C, func(), error) {
	key += "\x00" + os.Getenv("SPANNER_EMULATOR_HOST") + "\x00" + os.Getenv("DATASTORE_EMULATOR_HOST")
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	if !ok {
		c, err := open()
		if err != nil {
			var zero C
			return zero, func() {}, err
		}
		e = &entry[C]{c: c}
		s.m[key] = e
	}
	e.refs++
	var once sync.Once
	return e.c, func() { once.Do(func() { s.release(key, e) }) }, nil
}

func (s *Clients[C]) release(key string, e *entry[C]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.refs--
	if e.refs == 0 && s.m[key] == e {
		delete(s.m, key)
		s.close(e.c)
	}
}

// Len is how many clients are open.
func (s *Clients[C]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
