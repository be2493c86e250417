package shared

import (
	"errors"
	"testing"
)

// One client per key, whoever asks; the last release closes it; a
// failed open is not kept; another emulator address is another client.
func TestClients(t *testing.T) {
	opened, closed := 0, 0
	s := New(func(*int) { closed++ })
	open := func() (*int, error) { opened++; n := opened; return &n, nil }
	a, relA, _ := s.Get("db1", open)
	b, relB, _ := s.Get("db1", open)
	c, relC, _ := s.Get("db2", open)
	if a != b || a == c || opened != 2 {
		t.Fatalf("db1 twice and db2: %p %p %p, %d opened; want one client per key", a, b, c, opened)
	}
	relA()
	relA() // a second release of the same reference does nothing
	if closed != 0 {
		t.Fatalf("closed with a reference left")
	}
	relB()
	if closed != 1 || s.Len() != 1 {
		t.Fatalf("after the last release of db1: %d closed, %d open", closed, s.Len())
	}
	relC()
	if _, _, err := s.Get("db3", func() (*int, error) { return nil, errors.New("no") }); err == nil || s.Len() != 0 {
		t.Errorf("a failed open: %v, %d open", err, s.Len())
	}
	_, r1, _ := s.Get("db1", open)
	t.Setenv("SPANNER_EMULATOR_HOST", "localhost:1")
	_, r2, _ := s.Get("db1", open)
	if s.Len() != 2 {
		t.Errorf("another emulator address shares the client: %d open", s.Len())
	}
	r1()
	r2()
}
